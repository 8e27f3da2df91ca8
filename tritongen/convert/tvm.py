"""TVM target: ONNX -> Relax -> one compiled library, served by the Python backend.

The ONNX graph is imported with its dynamic dims kept symbolic, so one ``tvm_model.so``
serves every batch size and sequence length; the ``dlight`` rules schedule its kernels.
Untuned kernels are slow on real models, so MetaSchedule can tune one static shape
(``tune_batch_size`` rows, ``dim_values`` for the other dynamic dims) into
``tvm_model_tuned.so``; the wrapper runs it for requests of exactly that shape and the
symbolic library for all others. Tuning records are cached per model, target and shape,
so rebuilding the same model reuses them instead of tuning again.

The library is not called ``model.so``: the Python backend imports ``model`` by module
name from the version directory, and an extension module ``model.so`` would shadow
``model.py``.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from tritongen.convert.artifact import Artifact, OnnxBuild, Progress
from tritongen.convert.onnx import graph_inputs
from tritongen.convert.wrappers import write_wrapper
from tritongen.errors import ConversionError, MissingDependencyError
from tritongen.sources.signature import TRITON_TO_NUMPY, Signature

if TYPE_CHECKING:
    import onnx

LIBRARY = "tvm_model.so"
TUNED_LIBRARY = "tvm_model_tuned.so"
METADATA = "tvm_metadata.json"
METADATA_VERSION = 1
DEFAULT_DIM_VALUE = 128
"""Value of a dynamic non-batch dim (e.g. sequence length) during tuning, unless given."""
CACHE_ENV = "TRITONGEN_CACHE_DIR"
BUILD_TIMEOUT_S = 300.0
"""Per-candidate build limit while tuning (a worker's first build also imports TVM)."""


@dataclass(frozen=True)
class TvmOptions:
    """How to compile (and optionally tune) a model with TVM."""

    target: str | None = None
    """``None`` or ``llvm``: this host's CPU; ``cuda``; or a TVM target as JSON dict text."""
    tune_trials: int = 0
    """MetaSchedule measurement trials over all tasks; 0 with no ``tune_minutes`` skips tuning."""
    tune_minutes: float | None = None
    """Wall-clock budget for tuning; tuning stops at whichever budget ends first."""
    tune_batch_size: int | None = None
    """Batch size tuning is done at; default the model's max batch size."""
    dim_values: dict[str, int] = field(default_factory=dict)
    """Values of other dynamic dims during tuning, by ONNX dim name; default 128 each."""
    cache_dir: Path | None = None
    """Tuning-record cache; default ``$TRITONGEN_CACHE_DIR`` or ``~/.cache/tritongen/tvm``."""

    @property
    def tunes(self) -> bool:
        """Whether these options ask for MetaSchedule tuning."""
        return self.tune_trials > 0 or (self.tune_minutes is not None and self.tune_minutes > 0)


@dataclass(frozen=True)
class _CompileTarget:
    """Where the library runs: the target as a dict (as recorded) and as a TVM ``Target``."""

    spec: dict[str, Any]
    tvm: Any

    @property
    def on_cuda(self) -> bool:
        """Whether the target is a CUDA GPU (else a CPU)."""
        return bool(self.spec["kind"] == "cuda")


def tvm_unavailable_reason() -> str | None:
    """Say why TVM cannot be used here, or ``None`` when ``tvm`` and its Relax frontend import."""
    try:
        import tvm  # noqa: F401
        from tvm import relax  # noqa: F401
        from tvm.relax.frontend.onnx import from_onnx  # noqa: F401
    except Exception as e:  # a broken install raises more than ImportError
        return f"apache-tvm does not import ({type(e).__name__}: {_first_line(str(e))})"
    return None


def tvm_requirements() -> tuple[str, ...]:
    """Pinned packages the wrapper needs: the installed TVM and TVM FFI, and numpy<2."""
    return (
        f"apache-tvm=={metadata.version('apache-tvm')}",
        f"apache-tvm-ffi=={metadata.version('apache-tvm-ffi')}",
        "numpy<2",
    )


def resolve_target(text: str | None) -> dict[str, Any]:
    """Turn ``TvmOptions.target`` into a TVM target dict.

    Raises:
        ConversionError: the text is neither ``llvm``, ``cuda`` nor a JSON object with a ``kind``.
    """
    spec = (text or "llvm").strip()
    if spec == "llvm":
        import tvm

        cpu = str(tvm.target.codegen.llvm_get_system_cpu())
        return {"kind": "llvm", "mcpu": cpu, "num-cores": _usable_cores()}
    if spec == "cuda":
        return {"kind": "cuda"}
    try:
        parsed = json.loads(spec)
    except json.JSONDecodeError:
        parsed = None
    if not isinstance(parsed, dict) or not isinstance(parsed.get("kind"), str):
        raise ConversionError(
            f"unknown TVM target {spec!r}",
            'use llvm, cuda or a JSON target such as {"kind": "llvm", "mcpu": "znver3"}',
        )
    return parsed


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
    _check_options(options)
    say = progress or (lambda _message: None)

    import onnx

    data = build.onnx_path.read_bytes()
    model = onnx.load_from_string(data)
    check_supported_ops(model)
    target_dict = resolve_target(options.target)
    target = _CompileTarget(target_dict, _make_target(target_dict))
    signature = build.signature
    io_dtypes = {spec.name: _numpy_dtype(spec.data_type) for spec in signature.inputs + signature.outputs}
    version_dir = build.version_dir
    version_dir.mkdir(parents=True, exist_ok=True)
    inputs = _input_dims(model, signature)

    compile_s = _compile_library(model, build.onnx_path.name, inputs, target, version_dir / LIBRARY, say)
    files = [f"{build.version}/{LIBRARY}"]
    tuning: dict[str, Any] | None = None
    if options.tunes:
        shapes = _tuning_shapes(inputs, signature, options, build.max_batch_size)
        tuning = _tune_and_compile(model, data, shapes, target, options, say)
        _export(tuning.pop("executable"), version_dir / TUNED_LIBRARY)
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
    target: _CompileTarget,
    path: Path,
    say: Progress,
) -> float:
    """Compile the model with its dynamic dims symbolic into ``path``; the seconds it took."""
    kind = target.spec["kind"]
    say(f"TVM: compiling {name} for {kind} (symbolic dims: {_symbolic_dims(inputs) or 'none'})")
    started = time.perf_counter()
    module = import_onnx(model, name)
    _export(_compile(module, target, database=None), path)
    compile_s = time.perf_counter() - started
    say(f"TVM: {path.name} compiled in {compile_s:.1f} s")
    return compile_s


def _metadata(
    signature: Signature,
    io_dtypes: dict[str, str],
    inputs: dict[str, tuple[int | str, ...]],
    target: _CompileTarget,
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


def check_supported_ops(model: onnx.ModelProto) -> None:
    """Refuse a graph with ops TVM's ONNX frontend has no converter for, naming them all.

    Raises:
        ConversionError: one or more ops are unsupported.
    """
    from tvm.relax.frontend.onnx import onnx_frontend

    convert_map = getattr(onnx_frontend, "_get_convert_map", None)
    if convert_map is None:  # a later TVM may hide it; the frontend then reports ops itself
        return
    known = set(convert_map()) | {"Constant", "If"}
    missing = sorted({node.op_type for node in _all_nodes(model.graph)} - known)
    if missing:
        quoted = ", ".join(f"'{op}'" for op in missing)
        raise ConversionError(
            f"TVM's ONNX frontend does not support op{'s' if len(missing) > 1 else ''} {quoted}",
            "re-export the model without those ops (e.g. decompose them), or skip the tvm format",
        )


def import_onnx(model: onnx.ModelProto, name: str, shapes: dict[str, list[int]] | None = None) -> Any:
    """Import ``model`` into a Relax IRModule, weights bound as constants.

    Raises:
        ConversionError: the frontend fails; its reason is given in one line.
    """
    from tvm.relax.frontend.onnx import from_onnx

    try:
        return from_onnx(model, shape_dict=shapes, keep_params_in_input=False)
    except Exception as e:  # the frontend raises anything from ValueError to TVMError
        raise ConversionError(
            f"TVM's ONNX frontend cannot import {name}: {_first_line(str(e)) or type(e).__name__}",
            "re-export the model with static shapes or simpler ops, or skip the tvm format",
        ) from e


def _all_nodes(graph: onnx.GraphProto) -> Iterator[onnx.NodeProto]:
    for node in graph.node:
        yield node
        for attribute in node.attribute:
            if attribute.g.node:
                yield from _all_nodes(attribute.g)
            for sub in attribute.graphs:
                yield from _all_nodes(sub)


def _check_options(options: TvmOptions) -> None:
    if options.tune_trials < 0:
        raise ConversionError(f"tune_trials must be >= 0, not {options.tune_trials}")
    if options.tune_minutes is not None and options.tune_minutes < 0:
        raise ConversionError(f"tune_minutes must be >= 0, not {options.tune_minutes}")
    if options.tune_batch_size is not None and options.tune_batch_size < 1:
        raise ConversionError(f"tune_batch_size must be >= 1, not {options.tune_batch_size}")
    bad = {k: v for k, v in options.dim_values.items() if v < 1}
    if bad:
        raise ConversionError(f"dim_values must be >= 1: {bad}")
    if options.tunes:
        try:
            import xgboost  # noqa: F401
        except ImportError as e:
            raise MissingDependencyError(
                "TVM tuning needs xgboost (MetaSchedule's cost model)", "pip install xgboost-cpu"
            ) from e


def _make_target(spec: dict[str, Any]) -> Any:
    import tvm

    try:
        return tvm.target.Target(spec)
    except Exception as e:
        raise ConversionError(
            f"TVM rejects target {json.dumps(spec)}: {_first_line(str(e))}",
            "check the target's kind and attributes",
        ) from e


def _input_dims(model: onnx.ModelProto, signature: Signature) -> dict[str, tuple[int | str, ...]]:
    """Each graph input's dims with dynamic ones named (``batch`` for the batch dim)."""
    dims: dict[str, tuple[int | str, ...]] = {}
    for value in graph_inputs(model):
        shape: list[int | str] = []
        for index, dim in enumerate(value.type.tensor_type.shape.dim):
            if dim.HasField("dim_value") and dim.dim_value > 0:
                shape.append(int(dim.dim_value))
            elif index == 0 and signature.batched:
                shape.append(dim.dim_param or "batch")
            else:
                shape.append(dim.dim_param or f"{value.name}_dim{index}")
        dims[value.name] = tuple(shape)
    return dims


def _tuning_shapes(
    inputs: dict[str, tuple[int | str, ...]], signature: Signature, options: TvmOptions, max_batch_size: int
) -> dict[str, list[int]]:
    batch = options.tune_batch_size or (max_batch_size if signature.batched and max_batch_size > 0 else 1)
    shapes: dict[str, list[int]] = {}
    for name, dims in inputs.items():
        shape = []
        for index, dim in enumerate(dims):
            if isinstance(dim, int):
                shape.append(dim)
            elif index == 0 and signature.batched:
                shape.append(batch)
            else:
                shape.append(options.dim_values.get(dim, DEFAULT_DIM_VALUE))
        shapes[name] = shape
    return shapes


def _legalize_and_fuse(module: Any, target: Any) -> Any:
    import tvm
    from tvm import relax

    with target:
        passes = [
            *relax.pipeline.library_dispatch_passes(target),
            relax.transform.LegalizeOps(),
            relax.transform.AnnotateTIROpPattern(),
            relax.transform.FoldConstant(),
            relax.transform.FuseOps(),
            relax.transform.FuseTIR(),
        ]
        return tvm.transform.Sequential(passes)(module)


def _compile(
    module: Any,
    target: _CompileTarget,
    database: Any,
    *,
    legalized: bool = False,
    applied: dict[str, int] | None = None,
) -> Any:
    """Legalize, fuse, apply tuned schedules where the database has them, dlight for the rest.

    ``legalized``: ``module`` was already legalized and fused (the module tuning ran on).
    It must not be fused again: a second fusion changes the kernels, so the tuning
    records would no longer match them. ``applied["kernels"]`` receives how many kernels
    the tuning records scheduled.
    """
    import tvm
    from tvm import relax
    from tvm.s_tir import dlight as dl

    rules = (
        [dl.gpu.Matmul(), dl.gpu.GEMV(), dl.gpu.Reduction(), dl.gpu.GeneralReduction(), dl.gpu.Fallback()]
        if target.on_cuda
        else [dl.cpu.GEMV(), dl.cpu.Reduction(), _cpu_parallel_rule()]
    )
    tvm_target = target.tvm

    @tvm.transform.module_pass(opt_level=0)  # type: ignore[untyped-decorator]
    def pipeline(mod: Any, _ctx: Any) -> Any:
        if not legalized:
            mod = _legalize_and_fuse(mod, tvm_target)
        with tvm_target:
            if database is not None:
                mod = relax.transform.MetaScheduleApplyDatabase()(mod)
                if applied is not None:
                    applied["kernels"] = _scheduled_kernels(mod)
            mod = dl.ApplyDefaultSchedule(*rules)(mod)
            return tvm.transform.Sequential(_lowering_passes(tvm_target))(mod)

    try:
        if database is not None:
            with tvm_target, database, tvm.transform.PassContext(opt_level=3):
                return tvm.compile(module, tvm_target, relax_pipeline=pipeline)
        return tvm.compile(module, tvm_target, relax_pipeline=pipeline)
    except Exception as e:
        raise ConversionError(
            f"TVM failed to compile the model: {_first_line(str(e)) or type(e).__name__}",
            "try another target, or skip the tvm format",
        ) from e


def _cpu_parallel_rule() -> Any:
    """A last-resort CPU schedule: inline what can be inlined, run the spatial loops in parallel.

    Without it every kernel that no tuning record and no dlight rule covers (element-wise
    ops, layer norms, softmax, and the matmuls of a symbolic-shape library) runs on one
    core. Each block's spatial loops move outside its reduction loops and are fused into
    one parallel loop.
    """
    from tvm import s_tir
    from tvm.s_tir import dlight as dl
    from tvm.s_tir.dlight.analysis import normalize_prim_func

    class CpuParallel(dl.ScheduleRule):  # type: ignore[misc]
        def apply(self, func: Any, target: Any, _tunable: bool) -> Any:
            if type(func).__name__ != "PrimFunc" or "cpu" not in target.keys:
                return None
            sch = s_tir.Schedule(func)
            infos = normalize_prim_func(sch)
            if infos is None:
                return None
            for info in dl.try_inline(sch, infos):
                spatial: list[Any] = []
                other: list[Any] = []
                for loop, kind in zip(sch.get_loops(info.block_rv), info.dom_kind(), strict=False):
                    (spatial if kind == "S" else other).append(loop)
                if not spatial:
                    continue
                sch.reorder(*spatial, *other)
                sch.parallel(sch.fuse(*spatial))
            return sch

    return CpuParallel()


def _scheduled_kernels(mod: Any) -> int:
    """How many TIR functions of ``mod`` carry a schedule already."""
    return sum(
        1
        for _, func in mod.functions.items()
        if type(func).__name__ == "PrimFunc"
        and func.attrs is not None
        and func.attrs.get("tirx.is_scheduled", False)
    )


def _lowering_passes(target: Any) -> list[Any]:
    """The target's dataflow-lowering and finalizing passes (a fixed list where TVM lacks them)."""
    from tvm import relax

    try:
        return [*relax.pipeline.dataflow_lower_passes(target), *relax.pipeline.finalize_passes(target)]
    except (AttributeError, ValueError):  # TVM 0.27's CPU backend does not export them
        pass
    t = relax.transform
    return [
        t.RewriteDataflowReshape(),
        t.ToNonDataflow(),
        t.RemovePurityChecking(),
        t.CallTIRRewrite(),
        t.StaticPlanBlockMemory(),
        t.LowerAllocTensor(),
        t.KillAfterLastUse(),
        t.LowerRuntimeBuiltin(),
        t.ComputePrimValue(),
        t.VMShapeLower(),
        t.AttachGlobalSymbol(),
    ]


def _export(executable: Any, path: Path) -> None:
    try:
        executable.export_library(str(path))
    except Exception as e:
        raise ConversionError(
            f"TVM failed to write {path.name}: {_first_line(str(e)) or type(e).__name__}",
            "a cuda target needs the CUDA toolkit (nvcc) on this machine",
        ) from e


def _cache_dir(options: TvmOptions) -> Path:
    if options.cache_dir is not None:
        return options.cache_dir
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env) / "tvm"
    return Path.home() / ".cache" / "tritongen" / "tvm"


def _tune_and_compile(
    model: onnx.ModelProto,
    data: bytes,
    shapes: dict[str, list[int]],
    target: _CompileTarget,
    options: TvmOptions,
    say: Progress,
) -> dict[str, Any]:
    """Tune the static ``shapes`` (or reuse cached records) and compile them with the records."""
    from tvm.s_tir import meta_schedule as ms

    key_text = json.dumps(
        {
            "model_sha256": hashlib.sha256(data).hexdigest(),
            "target": target.spec,
            "shapes": shapes,
            "tvm": metadata.version("apache-tvm"),
        },
        sort_keys=True,
    )
    key = hashlib.sha256(key_text.encode()).hexdigest()[:20]
    work_dir = _cache_dir(options) / key
    work_dir.mkdir(parents=True, exist_ok=True)
    summary_path = work_dir / "tuning.json"
    previous = json.loads(summary_path.read_text(encoding="utf-8")) if summary_path.is_file() else None

    static = _legalize_and_fuse(import_onnx(model, "the model", shapes), target.tvm)
    started = time.perf_counter()
    if previous is not None and _budget_covered(previous, options):
        say(f"TVM: reusing cached tuning records ({previous['trials']} trials) from {work_dir}")
        database = ms.database.JSONDatabase(work_dir=str(work_dir), allow_missing=True)
        facts = dict(previous, cache_hit=True)
    else:
        database, facts = _tune(static, target.tvm, work_dir, options, say)
        facts["cache_hit"] = False
        summary_path.write_text(json.dumps(facts, indent=2) + "\n", encoding="utf-8")
    say("TVM: compiling the tuned library")
    applied: dict[str, int] = {}
    executable = _compile(static, target, database, legalized=True, applied=applied)
    say(f"TVM: tuning records scheduled {applied.get('kernels', 0)} kernels")
    facts.update(
        shapes=shapes,
        tuned_kernels=applied.get("kernels", 0),
        cache_key=key,
        cache_dir=str(work_dir),
        compile_s=round(time.perf_counter() - started, 3),
        executable=executable,
    )
    return facts


def _budget_covered(previous: dict[str, Any], options: TvmOptions) -> bool:
    """Whether a cached run tuned at least as much as ``options`` asks for."""
    if options.tune_trials > 0 and previous.get("requested_trials", 0) >= options.tune_trials:
        return True
    asked_minutes = options.tune_minutes or 0.0
    return asked_minutes > 0 and float(previous.get("requested_minutes") or 0.0) >= asked_minutes


def _tune(
    module: Any, target: Any, work_dir: Path, options: TvmOptions, say: Progress
) -> tuple[Any, dict[str, Any]]:
    """Tune ``module``'s heavy kernels within the options' budget; the records and a summary."""
    tasks = _tuning_tasks(module, target)
    budget = _Budget(options, [t.task_name for t in tasks], say)
    say(f"TVM: tuning {len(tasks)} tasks, {_budget_text(options)}")
    started = time.perf_counter()
    database = _run_tuning(tasks, work_dir, budget)
    seconds = time.perf_counter() - started
    say(f"TVM: tuned {budget.trials} trials in {seconds:.0f} s")
    return database, {
        "tasks": len(tasks),
        "trials": budget.trials,
        "requested_trials": options.tune_trials,
        "requested_minutes": options.tune_minutes,
        "tune_s": round(seconds, 3),
    }


def _tuning_tasks(module: Any, target: Any) -> list[Any]:
    """The tasks worth tuning: the matmuls, dense layers and convolutions when there are any.

    The matmuls hold nearly all the FLOPs of dense and transformer models; a budget spread
    over every element-wise task reaches them too late. The rest keep the dlight schedules.
    """
    from tvm.s_tir import meta_schedule as ms

    tasks = [t for t in ms.relax_integration.extract_tasks(module, target) if not _is_scheduled(t)]
    heavy = [t for t in tasks if any(k in t.task_name for k in ("matmul", "dense", "conv"))]
    return heavy or tasks


class _Budget:
    """The tuning budget: trials over all tasks, and a wall-clock deadline; counts what is done."""

    def __init__(self, options: TvmOptions, task_names: list[str], say: Progress) -> None:
        self.max_trials = options.tune_trials if options.tune_trials > 0 else 1_000_000
        # Small rounds spread a time budget over every task instead of a few.
        self.per_round = (
            min(64, max(2, self.max_trials // max(1, len(task_names)))) if options.tune_trials > 0 else 16
        )
        self.deadline = (
            time.monotonic() + 60.0 * options.tune_minutes if options.tune_minutes else float("inf")
        )
        self.task_names = task_names
        self.say = say
        self.trials = 0
        self.stopped = False

    def measured(self, task_id: int, candidates: int) -> None:
        """Count a round of measured candidates; raise once the time budget is spent.

        Raises:
            TimeoutError: the deadline has passed.
        """
        self.trials += candidates
        self.say(f"TVM: {self.trials} trials done ({self.task_names[task_id]})")
        if time.monotonic() > self.deadline:
            self.stopped = True
            raise TimeoutError("tuning time budget spent")

    def callback(self) -> Any:
        """A MetaSchedule measure callback that reports each round to :meth:`measured`."""
        from tvm.ir.utils import derived_object
        from tvm.s_tir.meta_schedule.measure_callback import PyMeasureCallback

        budget = self

        @derived_object
        class Budget(PyMeasureCallback):  # type: ignore[misc]
            """Reports progress and stops tuning once the time budget is spent.

            Terminating tasks does not stop the task scheduler mid-round, so the callback
            raises; the records measured so far are already in the JSON database.
            """

            def apply(
                self,
                task_scheduler: Any,
                task_id: int,
                measure_candidates: Sequence[Any],
                builder_results: Sequence[Any],
                runner_results: Sequence[Any],
            ) -> None:
                budget.measured(task_id, len(measure_candidates))

        return Budget()


def _run_tuning(tasks: list[Any], work_dir: Path, budget: _Budget) -> Any:
    """Run MetaSchedule over ``tasks``; the database of records (partial when the deadline stopped it).

    Raises:
        ConversionError: tuning fails for another reason than the deadline.
    """
    from tvm.s_tir import meta_schedule as ms

    contexts, weights = ms.relax_integration.extracted_tasks_to_tune_contexts(
        extracted_tasks=tasks,
        work_dir=str(work_dir),
        space="post-order-apply",
        strategy="evolutionary",
        seed=0,
    )
    try:
        return ms.tune_tasks(
            tasks=contexts,
            task_weights=weights,
            work_dir=str(work_dir),
            max_trials_global=budget.max_trials,
            num_trials_per_iter=budget.per_round,
            builder=_persistent_builder(),
            measure_callbacks=[*ms.MeasureCallback.create("default"), budget.callback()],
            cost_model="xgb",
        )
    except Exception as e:
        if budget.stopped:
            return ms.database.JSONDatabase(work_dir=str(work_dir), allow_missing=True)
        raise ConversionError(
            f"TVM tuning failed: {_first_line(str(e)) or type(e).__name__}",
            "build without tuning, or check apache-tvm-ffi<0.1.15 and psutil are installed",
        ) from e


def _build_candidate(job: tuple[Any, Any]) -> str:
    """Build one tuning candidate into a tar file (runs in a builder worker process)."""
    import tempfile

    import tvm
    from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock
    from tvm.support.tar import tar

    mod, target = job
    mod = RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(mod)
    built = tvm.compile(mod, target=target)
    path = os.path.join(tempfile.mkdtemp(prefix="tritongen-tvm-"), f"candidate.{tar.output_format}")
    built.export_library(path, fcompile=tar)
    return path


def _persistent_builder() -> Any:
    """A MetaSchedule builder whose worker processes live for the whole tuning run.

    TVM's ``LocalBuilder`` starts fresh workers for every batch of candidates and each
    imports all of TVM's tensor intrinsics first (about a minute of CPU here), often
    past the build timeout. These workers start once and skip that import: the fp32
    schedules tuned here use no tensor intrinsics.
    """
    from tvm.ir.utils import derived_object
    from tvm.s_tir.meta_schedule.builder import BuilderResult, PyBuilder
    from tvm.support.popen_pool import PopenPoolExecutor, StatusKind

    cores = _usable_cores()

    @derived_object
    class PersistentBuilder(PyBuilder):  # type: ignore[misc]
        """Builds candidates in long-lived worker processes."""

        def __init__(self) -> None:
            super().__init__()
            self.pool = PopenPoolExecutor(max_workers=max(1, min(cores, 4)), timeout=BUILD_TIMEOUT_S)

        def build(self, build_inputs: Sequence[Any]) -> list[Any]:
            jobs = [(item.mod, item.target) for item in build_inputs]
            results = []
            for outcome in self.pool.map_with_error_catching(_build_candidate, jobs):
                if outcome.status == StatusKind.COMPLETE:
                    results.append(BuilderResult(artifact_path=outcome.value, error_msg=None))
                else:
                    results.append(
                        BuilderResult(
                            artifact_path=None,
                            error_msg=f"build failed ({outcome.status.name}): {outcome.value}",
                        )
                    )
            return results

    return PersistentBuilder()


def _is_scheduled(task: Any) -> bool:
    return bool(task.mod.attrs.get("tirx.is_scheduled", False)) if task.mod.attrs else False


def _budget_text(options: TvmOptions) -> str:
    parts = []
    if options.tune_trials > 0:
        parts.append(f"up to {options.tune_trials} trials")
    if options.tune_minutes:
        parts.append(f"up to {options.tune_minutes:g} min")
    return " and ".join(parts)


def _numpy_dtype(data_type: str) -> str:
    dtype = TRITON_TO_NUMPY.get(data_type)
    if dtype is None or dtype is np.object_:
        raise ConversionError(f"TVM cannot take {data_type} tensors", "use numeric inputs and outputs")
    return str(np.dtype(dtype))


def _usable_cores() -> int:
    """How many CPU cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def _first_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[0] if lines else ""
