"""ONNX target: the ONNX file itself, served by ONNX Runtime."""

from __future__ import annotations

import shutil
from pathlib import Path

from tritongen.convert.artifact import Artifact, Target
from tritongen.convert.wrappers import write_wrapper
from tritongen.sources.onnx_source import OnnxSource


def write_onnx_artifact(source: OnnxSource, model_dir: Path, target: Target, version: int = 1) -> Artifact:
    """Write ``<version>/model.onnx`` (and the Python-backend ``model.py`` for ``local``).

    ``container`` serves the file with Triton's native ``onnxruntime`` backend; ``local``
    serves it through a Python-backend wrapper running ONNX Runtime, since the embedded
    server has only the Python backend.
    """
    version_dir = model_dir / str(version)
    version_dir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source.path, version_dir / "model.onnx")
    files = [f"{version}/model.onnx"]
    if target == "container":
        return Artifact(format="onnx", backend="onnxruntime", files=tuple(files))
    files += [f"{version}/{name}" for name in write_wrapper("onnxruntime_model.py", version_dir)]
    return Artifact(
        format="onnx",
        backend="python",
        files=tuple(files),
        python_requirements=("onnxruntime-gpu", "numpy<2"),
    )
