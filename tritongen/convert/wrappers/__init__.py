"""Python-backend ``model.py`` files that serve artifacts on the embedded (local) server.

Each wrapper is copied into ``<model>/<version>/model.py`` together with
``tritongen_runtime.py`` (request batching shared by all wrappers). They stay
self-contained: in a container they run without tritongen installed.
"""

from __future__ import annotations

import importlib.util
import json
from importlib import resources
from pathlib import Path

from tritongen.convert.artifact import Array, Runner
from tritongen.errors import ConversionError
from tritongen.sources.signature import Signature

RUNTIME = "tritongen_runtime.py"
SCALARS_PARAMETER = "tritongen_scalar_inputs"
"""The config parameter naming a batching model's scalar inputs (one value per request); the
runtime, which runs without tritongen, spells it the same."""


def write_wrapper(wrapper: str, version_dir: Path) -> list[str]:
    """Copy ``wrapper`` as ``model.py`` and the shared runtime into ``version_dir``; return the names."""
    package = resources.files(__name__)
    (version_dir / "model.py").write_text(
        package.joinpath(wrapper).read_text(encoding="utf-8"), encoding="utf-8"
    )
    (version_dir / RUNTIME).write_text(
        package.joinpath(RUNTIME).read_text(encoding="utf-8"), encoding="utf-8"
    )
    return ["model.py", RUNTIME]


def wrapper_runner(
    version_dir: Path,
    signature: Signature,
    max_batch_size: int,
    threads: int | None = None,
    device_id: int | None = None,
) -> Runner:
    """Run the ``model.py`` in ``version_dir`` in-process, exactly as the Python backend will.

    The wrapper is instantiated with a config made from ``signature`` and its ``run``
    becomes the runner, so verification and benchmarks exercise the served code path
    (the engine, its input conversion and its thread settings) without a server.
    ``device_id`` makes it a KIND_GPU instance on that CUDA device; ``None``: KIND_CPU.
    """
    spec = importlib.util.spec_from_file_location(
        f"tritongen_wrapper_{abs(hash(str(version_dir)))}", version_dir / "model.py"
    )
    if spec is None or spec.loader is None:
        raise ConversionError(f"{version_dir / 'model.py'} cannot be loaded", "rebuild the model")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    parameters = {"intra_op_thread_count": {"string_value": str(threads)}} if threads else {}
    config = {
        "max_batch_size": max_batch_size,
        "input": [{"name": t.name} for t in signature.inputs],
        "output": [{"name": t.name} for t in signature.outputs],
        "instance_group": [
            {"count": 1, "kind": "KIND_CPU"}
            if device_id is None
            else {"count": 1, "kind": "KIND_GPU", "gpus": [device_id]}
        ],
        "parameters": parameters,
    }
    model = module.TritonPythonModel()
    model.initialize(
        {
            "model_config": json.dumps(config),
            "model_repository": str(version_dir.parent),
            "model_version": version_dir.name,
            "model_instance_kind": "CPU" if device_id is None else "GPU",
            "model_instance_device_id": str(device_id or 0),
        }
    )

    def run(feed: dict[str, Array]) -> list[Array]:
        outputs: list[Array] = model.run(feed)
        return outputs

    return run
