"""The artifact: the symbolic library, one library per shape bucket, their metadata and the wrapper."""

from __future__ import annotations

import hashlib
import json
import time
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from tritongen.convert.artifact import Artifact, OnnxBuild, Progress
from tritongen.convert.tvm.buckets import BucketPlan, BucketRequest, Dims, plan_buckets
from tritongen.convert.tvm.compile import compile_module, export_library, fuse, legalize
from tritongen.convert.tvm.cross import target_arch
from tritongen.convert.tvm.frontend import check_supported_ops, import_onnx, relax_dims
from tritongen.convert.tvm.options import (
    CompileTarget,
    TvmOptions,
    check_options,
    make_target,
    resolve_target,
    tvm_requirements,
    tvm_unavailable_reason,
)
from tritongen.convert.tvm.profile import kernel_times
from tritongen.convert.tvm.tuning import Bucket, TuningJob, tune_buckets
from tritongen.convert.wrappers import write_wrapper
from tritongen.errors import ConversionError, MissingDependencyError
from tritongen.sources.signature import TRITON_TO_NUMPY, Signature

LIBRARY = "tvm_model.so"
METADATA = "tvm_metadata.json"
METADATA_VERSION = 2


def bucket_library(label: str) -> str:
    """The file name of a bucket's library: ``tvm_bucket_8x128.so``."""
    return f"tvm_bucket_{label}.so"


def write_tvm_artifact(
    build: OnnxBuild, options: TvmOptions, *, progress: Progress | None = None
) -> Artifact:
    """Compile ``build.onnx_path`` with TVM into ``<version>/`` libraries plus the Python-backend wrapper.

    Both repository targets serve the library through the Python backend, since Triton
    has no TVM backend; ``build.target`` is accepted for symmetry with the other converters.

    Raises:
        MissingDependencyError: TVM (or, for tuning, xgboost) is not installed.
        ConversionError: the frontend cannot import the graph, the buckets are impossible,
            or compiling fails.
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
    symbolic = import_onnx(model, build.onnx_path.name)
    inputs, outputs = _signature_dims(symbolic)
    plan = _plan(options, build, inputs, outputs) if options.bucketed else None
    version_dir = build.version_dir
    version_dir.mkdir(parents=True, exist_ok=True)

    files: list[str] = []
    compile_s = 0.0
    if plan is None or not plan.strict:
        compile_s = _compile_symbolic(symbolic, target, options, version_dir / LIBRARY, say)
        files.append(f"{build.version}/{LIBRARY}")
    buckets_facts: dict[str, Any] | None = None
    tuning: dict[str, Any] | None = None
    if plan is not None:
        job = TuningJob(hashlib.sha256(data).hexdigest(), target, options, {n: io_dtypes[n] for n in inputs})
        buckets_facts, tuning = _build_buckets(symbolic, plan, inputs, job, version_dir, say)
        files += [f"{build.version}/{lib['library']}" for lib in buckets_facts["libraries"]]

    facts = _metadata(signature, io_dtypes, (inputs, outputs), target, compile_s)
    facts.update(
        library=None if plan is not None and plan.strict else LIBRARY, buckets=buckets_facts, tuning=tuning
    )
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


def _signature_dims(symbolic: Any) -> tuple[Dims, list[tuple[int | str | None, ...]]]:
    """Inputs' and outputs' dims as TVM imported them (dynamic dims by their graph names)."""
    inputs, outputs = relax_dims(symbolic)
    clean: Dims = {}
    for name, dims in inputs.items():
        if any(d is None for d in dims):
            raise ConversionError(
                f"input {name!r} has a computed dim TVM cannot bucket",
                "re-export the model with plain dynamic dims",
            )
        clean[name] = tuple(d for d in dims if d is not None)
    return clean, outputs


def _plan(
    options: TvmOptions, build: OnnxBuild, inputs: Dims, outputs: list[tuple[int | str | None, ...]]
) -> BucketPlan:
    """The bucket plan, refused where an output could not be sliced back after padding.

    Raises:
        ConversionError: impossible buckets or padding (see :func:`plan_buckets`).
    """
    request = BucketRequest(
        text=options.buckets,
        pads=options.pads,
        strict=options.strict_buckets,
        max_batch_size=build.max_batch_size,
        preferred_batch_sizes=options.preferred_batch_sizes,
        dim_values=options.dim_values,
    )
    plan = plan_buckets(request, inputs, build.signature.batched)
    names = [spec.name for spec in build.signature.outputs]
    batch = set(plan.names({plan.batch_dim} if plan.batch_dim else set()))
    for name, dims in zip(names, outputs, strict=False):
        if not dims:
            raise ConversionError(
                f"TVM cannot tell the shape of output {name!r}, so bucket outputs cannot be sliced back",
                "convert without --tvm-buckets/tuning (the symbolic library serves every shape)",
            )
        if batch and dims[0] not in batch:
            raise ConversionError(
                f"output {name!r} does not start with the batch dim, so padded rows cannot be sliced off",
                "convert without --tvm-buckets/tuning (the symbolic library serves every shape)",
            )
        if plan.padded and any(d is None for d in dims):
            raise ConversionError(
                f"output {name!r} has a computed dim, so padding cannot be sliced back",
                "leave --tvm-pad out (requests must then match a bucket exactly)",
            )
    return plan


def _compile_symbolic(
    symbolic: Any, target: CompileTarget, options: TvmOptions, path: Path, say: Progress
) -> float:
    """Compile the model with its dynamic dims symbolic into ``path``; the seconds it took."""
    say(f"TVM: compiling the symbolic library for {target.spec['kind']} (any shape)")
    started = time.perf_counter()
    executable = compile_module(symbolic, target, database=None, fast_math=options.fast_math)
    export_library(executable, path, target)
    compile_s = time.perf_counter() - started
    say(f"TVM: {path.name} compiled in {compile_s:.1f} s")
    return compile_s


def _build_buckets(
    symbolic: Any, plan: BucketPlan, inputs: Dims, job: TuningJob, version_dir: Path, say: Progress
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """One library per bucket (tuned when asked); the ``buckets`` and ``tuning`` facts."""
    target, options = job.target, job.options
    say(f"TVM: {len(plan.buckets())} shape bucket(s): {plan.describe()}")
    for dim in plan.exact_dims():
        say(
            f"TVM: dim {dim} is not declared paddable (--tvm-pad): "
            "requests must match one of its bucket values exactly"
        )
    legal = legalize(symbolic, target.tvm, fast_math=options.fast_math)
    buckets = []
    for dims in plan.buckets():
        bind = plan.bind(dims)
        shapes = {
            name: [d if isinstance(d, int) else bind[d] for d in shape] for name, shape in inputs.items()
        }
        buckets.append(Bucket(plan.label(dims), dims, shapes, fuse(legal, target.tvm, bind)))
    database, tuning = tune_buckets(buckets, job, say) if options.tunes else (None, None)
    libraries = []
    for bucket in buckets:
        started = time.perf_counter()
        applied: dict[str, int] = {}
        executable = compile_module(bucket.module, target, database=database, legalized=True, applied=applied)
        library = bucket_library(bucket.label)
        export_library(executable, version_dir / library, target)
        facts: dict[str, Any] = {
            "label": bucket.label,
            "dims": bucket.dims,
            "bind": plan.bind(bucket.dims),
            "library": library,
            "shapes": bucket.shapes,
            "compile_s": round(time.perf_counter() - started, 3),
            "tuned_kernels": applied.get("kernels", 0),
        }
        if database is not None and not target.on_cuda and target_arch(target.spec) == target_arch({}):
            facts["profile"] = _profile(executable, bucket, job.dtypes)
        say(f"TVM: {library} compiled ({facts['tuned_kernels']} tuned kernels){_profile_text(facts)}")
        libraries.append(facts)
    return dict(plan.as_json(), libraries=libraries), tuning


def _profile(executable: Any, bucket: Bucket, dtypes: dict[str, str]) -> dict[str, Any]:
    """One timed run of a bucket's library: its total and its slowest kernels with their shares."""
    measured = kernel_times(executable, bucket.shapes, dtypes)
    kernels = sorted(measured["kernels"].items(), key=lambda kv: -kv[1]["seconds"])
    total = sum(v["seconds"] for _, v in kernels) or 1.0
    return {
        "total_ms": round(measured["total_s"] * 1e3, 3),
        "kernels": [
            {
                "name": name,
                "calls": v["calls"],
                "ms": round(v["seconds"] * 1e3, 3),
                "share": round(v["seconds"] / total, 4),
            }
            for name, v in kernels[:12]
        ],
    }


def _profile_text(facts: dict[str, Any]) -> str:
    profile = facts.get("profile")
    if not profile:
        return ""
    top = profile["kernels"][0] if profile["kernels"] else None
    slowest = f"; slowest kernel {top['name']} {100 * top['share']:.0f}%" if top else ""
    return f", {profile['total_ms']:.1f} ms per run{slowest}"


def _metadata(
    signature: Signature,
    io_dtypes: dict[str, str],
    dims: tuple[Dims, list[tuple[int | str | None, ...]]],
    target: CompileTarget,
    compile_s: float,
) -> dict[str, Any]:
    """The facts the wrapper reads from ``tvm_metadata.json`` (and the artifact records)."""
    inputs, outputs = dims
    output_dims = dict(zip([s.name for s in signature.outputs], outputs, strict=False))
    return {
        "metadata_version": METADATA_VERSION,
        "tvm_version": metadata.version("apache-tvm"),
        "tvm_ffi_version": metadata.version("apache-tvm-ffi"),
        "target": target.spec,
        "arch": target_arch(target.spec),
        "device": "cuda" if target.on_cuda else "cpu",
        "inputs": [
            {"name": spec.name, "dtype": io_dtypes[spec.name], "shape": list(inputs[spec.name])}
            for spec in signature.inputs
        ],
        "outputs": [
            {"name": spec.name, "dtype": io_dtypes[spec.name], "shape": list(output_dims.get(spec.name, ()))}
            for spec in signature.outputs
        ],
        "symbolic_dims": sorted({d for shape in inputs.values() for d in shape if isinstance(d, str)}),
        "compile_s": round(compile_s, 3),
    }


def _numpy_dtype(data_type: str) -> str:
    dtype = TRITON_TO_NUMPY.get(data_type)
    if dtype is None or dtype is np.object_:
        raise ConversionError(f"TVM cannot take {data_type} tensors", "use numeric inputs and outputs")
    return str(np.dtype(dtype))
