"""The artifact: the symbolic library, the tuned one when asked for, their metadata and the wrapper."""

from __future__ import annotations

import json
import time
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from tritongen.convert.artifact import Artifact, OnnxBuild, Progress
from tritongen.convert.tvm.compile import compile_module, export_library
from tritongen.convert.tvm.frontend import check_supported_ops, import_onnx, input_dims, tuning_shapes
from tritongen.convert.tvm.options import (
    CompileTarget,
    TvmOptions,
    check_options,
    make_target,
    resolve_target,
    tvm_requirements,
    tvm_unavailable_reason,
)
from tritongen.convert.tvm.tuning import tune_and_compile
from tritongen.convert.wrappers import write_wrapper
from tritongen.errors import ConversionError, MissingDependencyError
from tritongen.sources.signature import TRITON_TO_NUMPY, Signature

if TYPE_CHECKING:
    import onnx

LIBRARY = "tvm_model.so"
TUNED_LIBRARY = "tvm_model_tuned.so"
METADATA = "tvm_metadata.json"
METADATA_VERSION = 1


def write_tvm_artifact(
    build: OnnxBuild, options: TvmOptions, *, progress: Progress | None = None
) -> Artifact:
    """Compile ``build.onnx_path`` with TVM into ``<version>/tvm_model.so`` plus its Python-backend wrapper.

    Both repository targets serve the library through the Python backend, since Triton
    has no TVM backend; ``build.target`` is accepted for symmetry with the other converters.

    Raises:
        MissingDependencyError: TVM (or, for tuning, xgboost) is not installed.
        ConversionError: the frontend cannot import the graph, or compiling fails.
    """
    reason = tvm_unavailable_reason()
    if reason is not None:
        raise MissingDependencyError(reason, "install apache-tvm and apache-tvm-ffi<0.1.15")
    check_options(options)
    say = progress or (lambda _message: None)

    import onnx

    data = build.onnx_path.read_bytes()
    model = onnx.load_from_string(data)
    check_supported_ops(model)
    target_dict = resolve_target(options.target)
    target = CompileTarget(target_dict, make_target(target_dict))
    signature = build.signature
    io_dtypes = {spec.name: _numpy_dtype(spec.data_type) for spec in signature.inputs + signature.outputs}
    version_dir = build.version_dir
    version_dir.mkdir(parents=True, exist_ok=True)
    inputs = input_dims(model, signature)

    compile_s = _compile_library(model, build.onnx_path.name, inputs, target, version_dir / LIBRARY, say)
    files = [f"{build.version}/{LIBRARY}"]
    tuning: dict[str, Any] | None = None
    if options.tunes:
        shapes = tuning_shapes(inputs, signature, options, build.max_batch_size)
        tuning = tune_and_compile(model, data, shapes, target, options, say)
        export_library(tuning.pop("executable"), version_dir / TUNED_LIBRARY)
        tuning["library"] = TUNED_LIBRARY
        files.append(f"{build.version}/{TUNED_LIBRARY}")

    facts = _metadata(signature, io_dtypes, inputs, target, compile_s, tuning)
    (version_dir / METADATA).write_text(json.dumps(facts, indent=2) + "\n", encoding="utf-8")
    files.append(f"{build.version}/{METADATA}")
    files += [f"{build.version}/{name}" for name in write_wrapper("tvm_model.py", version_dir)]
    return Artifact(
        format="tvm",
        backend="python",
        files=tuple(files),
        python_requirements=tvm_requirements(),
        engine=facts,
    )


def _compile_library(
    model: onnx.ModelProto,
    name: str,
    inputs: dict[str, tuple[int | str, ...]],
    target: CompileTarget,
    path: Path,
    say: Progress,
) -> float:
    """Compile the model with its dynamic dims symbolic into ``path``; the seconds it took."""
    kind = target.spec["kind"]
    say(f"TVM: compiling {name} for {kind} (symbolic dims: {_symbolic_dims(inputs) or 'none'})")
    started = time.perf_counter()
    module = import_onnx(model, name)
    export_library(compile_module(module, target, database=None), path)
    compile_s = time.perf_counter() - started
    say(f"TVM: {path.name} compiled in {compile_s:.1f} s")
    return compile_s


def _metadata(
    signature: Signature,
    io_dtypes: dict[str, str],
    inputs: dict[str, tuple[int | str, ...]],
    target: CompileTarget,
    compile_s: float,
    tuning: dict[str, Any] | None,
) -> dict[str, Any]:
    """The facts the wrapper reads from ``tvm_metadata.json`` (and the artifact records)."""
    return {
        "metadata_version": METADATA_VERSION,
        "tvm_version": metadata.version("apache-tvm"),
        "tvm_ffi_version": metadata.version("apache-tvm-ffi"),
        "target": target.spec,
        "device": "cuda" if target.on_cuda else "cpu",
        "library": LIBRARY,
        "inputs": [
            {"name": spec.name, "dtype": io_dtypes[spec.name], "shape": list(inputs[spec.name])}
            for spec in signature.inputs
        ],
        "outputs": [{"name": spec.name, "dtype": io_dtypes[spec.name]} for spec in signature.outputs],
        "symbolic_dims": _symbolic_dims(inputs),
        "compile_s": round(compile_s, 3),
        "tuning": tuning,
    }


def _symbolic_dims(inputs: dict[str, tuple[int | str, ...]]) -> list[str]:
    """The names of the dynamic dims over all inputs, sorted."""
    return sorted({d for dims in inputs.values() for d in dims if isinstance(d, str)})


def _numpy_dtype(data_type: str) -> str:
    dtype = TRITON_TO_NUMPY.get(data_type)
    if dtype is None or dtype is np.object_:
        raise ConversionError(f"TVM cannot take {data_type} tensors", "use numeric inputs and outputs")
    return str(np.dtype(dtype))
