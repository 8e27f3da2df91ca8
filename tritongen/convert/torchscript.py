"""TorchScript target: ``model.pt``, served by libtorch (container) or a Python-backend wrapper (local)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from tritongen.convert.artifact import Array, Artifact, Runner, Target
from tritongen.convert.torch_export import TorchScriptMode, export_torchscript
from tritongen.convert.wrappers import write_wrapper
from tritongen.sources.signature import Signature
from tritongen.sources.torch_source import TorchSource, import_torch


def write_torchscript_artifact(
    source: TorchSource,
    model_dir: Path,
    target: Target,
    mode: TorchScriptMode = "trace",
    version: int = 1,
    device: str = "cpu",
) -> Artifact:
    """Write ``<version>/model.pt`` (and the wrapper ``model.py`` for ``local``).

    ``container`` serves it with Triton's native PyTorch backend, which maps the config's
    inputs and outputs to ``forward`` in order. ``device`` is where the module is traced.

    Raises:
        ConversionError: tracing or scripting fails.
    """
    torch = import_torch()
    version_dir = model_dir / str(version)
    export_torchscript(source, version_dir / "model.pt", mode, device=device)
    files = [f"{version}/model.pt"]
    how = "file" if source.kind == "torchscript" else mode
    engine: dict[str, object] = {"torch_version": str(torch.__version__), "torchscript": how}
    if device != "cpu" and how == "trace":
        engine["traced_on"] = device
    if target == "container":
        return Artifact(format="torchscript", backend="pytorch", files=tuple(files), engine=engine)
    files += [f"{version}/{name}" for name in write_wrapper("torchscript_model.py", version_dir)]
    torch_pin = str(torch.__version__).split("+")[0]
    return Artifact(
        format="torchscript",
        backend="python",
        files=tuple(files),
        python_requirements=(f"torch=={torch_pin}", "numpy<2"),
        engine=engine,
    )


def torchscript_runner(
    version_dir: Path, signature: Signature, threads: int | None = None, device_id: int | None = None
) -> Runner:
    """Run ``model.pt`` in-process as the wrapper does: on the CPU, or on ``cuda:<device_id>``."""
    torch = import_torch()
    if threads:
        torch.set_num_threads(threads)
    device = "cpu" if device_id is None else f"cuda:{device_id}"
    if device_id is not None:
        torch.cuda.set_device(device_id)
    module = torch.jit.load(str(version_dir / "model.pt"), map_location=device).eval()
    return module_runner(module, signature, device)


def module_runner(module: Any, signature: Signature, device: str = "cpu") -> Runner:
    """Wrap a torch module as a :data:`Runner` (inputs positional in signature order, moved to ``device``)."""
    torch = import_torch()
    names = [t.name for t in signature.inputs]
    out_names = [t.name for t in signature.outputs]

    def run(feed: dict[str, Array]) -> list[Array]:
        tensors = [torch.from_numpy(np.ascontiguousarray(feed[name])).to(device) for name in names]
        with torch.inference_mode():
            result = module(*tensors)
        if isinstance(result, dict):
            values = (
                [result[name] for name in out_names]
                if set(out_names) <= set(result)
                else list(result.values())
            )
        elif isinstance(result, (tuple, list)):
            values = list(result)
        else:
            values = [result]
        return [v.detach().cpu().numpy() for v in values]

    return run
