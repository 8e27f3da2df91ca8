"""MetaSchedule tuning of one static shape, with its records cached per model, target and shape."""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tritongen.convert.artifact import Progress
from tritongen.convert.tvm.compile import compile_module, legalize_and_fuse
from tritongen.convert.tvm.frontend import import_onnx
from tritongen.convert.tvm.options import CompileTarget, TvmOptions, first_line, usable_cores
from tritongen.errors import ConversionError

if TYPE_CHECKING:
    import onnx

CACHE_ENV = "TRITONGEN_CACHE_DIR"
BUILD_TIMEOUT_S = 300.0
"""Per-candidate build limit while tuning (a worker's first build also imports TVM)."""


def _cache_dir(options: TvmOptions) -> Path:
    if options.cache_dir is not None:
        return options.cache_dir
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env) / "tvm"
    return Path.home() / ".cache" / "tritongen" / "tvm"


def tune_and_compile(
    model: onnx.ModelProto,
    data: bytes,
    shapes: dict[str, list[int]],
    target: CompileTarget,
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

    static = legalize_and_fuse(import_onnx(model, "the model", shapes), target.tvm)
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
    executable = compile_module(static, target, database, legalized=True, applied=applied)
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
            f"TVM tuning failed: {first_line(str(e)) or type(e).__name__}",
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

    cores = usable_cores()

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
