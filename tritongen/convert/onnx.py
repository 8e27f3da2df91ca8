"""ONNX target: the ONNX file itself, served by ONNX Runtime."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from tritongen.convert.artifact import Array, Artifact, Runner, Target
from tritongen.convert.wrappers import write_wrapper
from tritongen.sources.adaptation import Adaptation
from tritongen.sources.signature import Signature

if TYPE_CHECKING:
    import onnx


def write_onnx_artifact(source: Path, model_dir: Path, target: Target, version: int = 1) -> Artifact:
    """Write ``<version>/model.onnx`` (and the Python-backend ``model.py`` for ``local``).

    ``container`` serves the file with Triton's native ``onnxruntime`` backend; ``local``
    serves it through a Python-backend wrapper running ONNX Runtime, since the embedded
    server has only the Python backend.
    """
    import onnx

    from tritongen.convert.served_onnx import copy_external_data

    version_dir = model_dir / str(version)
    version_dir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, version_dir / "model.onnx")
    graph_only = onnx.load(str(source), load_external_data=False)
    files = [f"{version}/model.onnx"]
    files += [f"{version}/{name}" for name in copy_external_data(source, graph_only, version_dir)]
    if target == "container":
        return Artifact(format="onnx", backend="onnxruntime", files=tuple(files))
    files += [f"{version}/{name}" for name in write_wrapper("onnxruntime_model.py", version_dir)]
    return Artifact(
        format="onnx",
        backend="python",
        files=tuple(files),
        python_requirements=("onnxruntime-gpu", "numpy<2"),
    )


def onnx_runner(path: Path, signature: Signature, threads: int | None = None) -> Runner:
    """Run an ONNX file in-process with ONNX Runtime on the CPU."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    if threads:
        options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    session = ort.InferenceSession(str(path), sess_options=options, providers=["CPUExecutionProvider"])
    names = [t.name for t in signature.outputs]

    def run(feed: dict[str, Array]) -> list[Array]:
        outputs: list[Array] = session.run(names, {k: _strings_as_str(v) for k, v in feed.items()})
        return outputs

    return run


def adapted_runner(runner: Runner, adaptation: Adaptation, signature: Signature) -> Runner:
    """``runner`` (the source) taking served feeds and answering as the served model does."""
    if not adaptation.needed:
        return runner
    names = [t.name for t in signature.outputs]

    def run(feed: dict[str, Array]) -> list[Array]:
        return adaptation.served_outputs(names, runner(adaptation.source_feed(feed)))

    return run


def _strings_as_str(array: Array) -> Array:
    """String tensors as ONNX Runtime reads them: ``str`` elements (BYTES data holds ``bytes``)."""
    if array.dtype != np.object_:
        return array
    decoded: Array = np.vectorize(lambda v: v.decode() if isinstance(v, bytes) else v, otypes=[object])(array)
    return decoded


def graph_inputs(model: onnx.ModelProto) -> list[onnx.ValueInfoProto]:
    """The graph's real inputs: its declared inputs less those that are initializers (weights)."""
    initializers = {init.name for init in model.graph.initializer}
    return [value for value in model.graph.input if value.name not in initializers]
