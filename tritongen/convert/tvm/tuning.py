"""MetaSchedule tuning of every bucket in one budget, with records shared and cached.

The budget runs in two phases over one database and one cost model:

1. the largest bucket's matmuls (and dense layers, convolutions), which hold most FLOPs;
2. their schedules are moved to the other buckets (:mod:`.transfer`); every bucket is
   then compiled and profiled, and the kernels that take most of its measured run time
   (up to 90%, at most :data:`TASKS_PER_BUCKET`) are tuned together for the rest of the
   budget, starting from the moved schedules. Task weights are calls per inference, so
   MetaSchedule's scheduler spends trials where they cut the most run time.

Records live in one database per model, target and TVM version (any bucket set reuses
them); a run's summary is kept by bucket set and budget, so the same build again tunes
nothing.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from tritongen.convert.artifact import Progress
from tritongen.convert.tvm.budget import Budget, Tracker
from tritongen.convert.tvm.compile import compile_module
from tritongen.convert.tvm.measure import mean_seconds, persistent_builder
from tritongen.convert.tvm.options import CompileTarget, TvmOptions, first_line, usable_cores
from tritongen.convert.tvm.profile import kernel_times
from tritongen.convert.tvm.transfer import transfer_records
from tritongen.errors import ConversionError

CACHE_ENV = "TRITONGEN_CACHE_DIR"
FIRST_PHASE_SHARE = 0.5
"""Share of the budget for the largest bucket's matmuls before schedules move to the others."""
TASKS_PER_BUCKET = 8
"""At most this many kernels per bucket are tuned in the second phase."""
COVERAGE = 0.9
"""The second phase tunes the kernels that make up this share of a bucket's measured time."""


@dataclass(frozen=True)
class Bucket:
    """One static shape of the model: its label (``8x128``), dim values, input shapes and module."""

    label: str
    dims: dict[str, int]
    shapes: dict[str, list[int]]
    module: Any
    """The legalized and fused Relax module with every dim bound."""


@dataclass(frozen=True)
class TuningJob:
    """What is tuned and how: the model's hash, target, options and input dtypes."""

    model_sha256: str
    target: CompileTarget
    options: TvmOptions
    dtypes: dict[str, str]


def cache_dir(options: TvmOptions) -> Path:
    """Where tuning records are kept: the options' folder, ``$TRITONGEN_CACHE_DIR/tvm`` or ``~/.cache``."""
    if options.cache_dir is not None:
        return options.cache_dir
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env) / "tvm"
    return Path.home() / ".cache" / "tritongen" / "tvm"


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:20]


def tune_buckets(buckets: list[Bucket], job: TuningJob, say: Progress) -> tuple[Any, dict[str, Any]]:
    """Tune ``buckets`` (smallest first) within the options' budget, or reuse a cached run.

    Returns the database of records and the facts ``tvm_metadata.json`` keeps.

    Raises:
        ConversionError: tuning fails for another reason than the deadline.
    """
    options = job.options
    work_dir = cache_dir(options) / _digest(
        {
            "model_sha256": job.model_sha256,
            "target": job.target.spec,
            "tvm": metadata.version("apache-tvm"),
            "fast_math": options.fast_math,
        }
    )
    work_dir.mkdir(parents=True, exist_ok=True)
    labels = [b.label for b in buckets]
    summary = work_dir / f"run-{_digest(labels)}.json"
    with _locked(work_dir, say):
        previous = _read_summary(summary)
        database = _open_database(work_dir)
        if previous is not None and _budget_covered(previous, options):
            say(f"TVM: reusing cached tuning records ({previous['trials']} trials) from {work_dir}")
            return database, dict(previous, cache_hit=True, cache_dir=str(work_dir))
        facts = _tune(buckets, job, work_dir, database, say)
        facts.update(
            requested_trials=options.tune_trials, requested_minutes=options.tune_minutes, buckets=labels
        )
        staged = summary.with_suffix(".tmp")
        staged.write_text(json.dumps(facts, indent=2) + "\n", encoding="utf-8")
        os.replace(staged, summary)
    return database, dict(facts, cache_hit=False, cache_dir=str(work_dir))


def _read_summary(path: Path) -> dict[str, Any] | None:
    """A cached run's summary; ``None`` when there is none or it cannot be read (tuned again)."""
    try:
        facts = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return facts if isinstance(facts, dict) and isinstance(facts.get("trials"), int) else None


@contextmanager
def _locked(work_dir: Path, say: Progress) -> Iterator[None]:
    """Hold ``work_dir``'s lock: two builds of one model must not write one database at once."""
    with open(work_dir / "lock", "w", encoding="utf-8") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            say(f"TVM: waiting for another build tuning the same model ({work_dir})")
            fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def _open_database(work_dir: Path) -> Any:
    """The records in ``work_dir``.

    Raises:
        ConversionError: the files cannot be read back.
    """
    from tvm.s_tir import meta_schedule as ms

    try:
        return ms.database.JSONDatabase(work_dir=str(work_dir), allow_missing=True)
    except Exception as e:
        raise ConversionError(
            f"the TVM tuning cache {work_dir} is unreadable: {first_line(str(e)) or type(e).__name__}",
            f"delete {work_dir} and build again (its records are tuned again)",
        ) from e


def _budget_covered(previous: dict[str, Any], options: TvmOptions) -> bool:
    """Whether a cached run did at least as much tuning as ``options`` asks for.

    What the run achieved counts, not what it asked for: its trials against a trial
    budget, its tuning time against a time budget (a run stopped early by its trials
    does not cover a longer time budget).
    """
    if options.tune_trials > 0 and int(previous.get("trials") or 0) >= options.tune_trials:
        return True
    asked_s = 60.0 * (options.tune_minutes or 0.0)
    return asked_s > 0 and float(previous.get("tune_s") or 0.0) >= 0.95 * asked_s


def _tune(
    buckets: list[Bucket], job: TuningJob, work_dir: Path, database: Any, say: Progress
) -> dict[str, Any]:
    """Both phases; the facts of the run (trials, seconds, and per task: calls, trials, best time)."""
    from tvm.s_tir import meta_schedule as ms

    target = job.target.tvm
    tasks = {b.label: _tunable_tasks(b.module, target) for b in buckets}
    anchor = buckets[-1]
    heavy = [t for t in tasks[anchor.label] if _heavy(t)] or tasks[anchor.label]
    tracker = Tracker(say)
    builder = persistent_builder()
    cost_model = ms.CostModel.create("xgb", num_tuning_cores=usable_cores())
    runner = _Runner(work_dir, database, builder, cost_model)
    started = time.perf_counter()
    say(
        f"TVM: tuning {len(buckets)} bucket(s) ({', '.join(b.label for b in buckets)}), "
        f"{_budget_text(job.options)}"
    )
    first = Budget.first(job.options, FIRST_PHASE_SHARE)
    say(f"TVM: phase 1: the {len(heavy)} matmul kernels of bucket {anchor.label}")
    runner.run([(anchor.label, t) for t in heavy], first, tracker)
    sources = {t.task_name: t for t in tasks[anchor.label]}
    for bucket in buckets[:-1]:
        moved = transfer_records(sources, tasks[bucket.label], database, target, builder)
        say(f"TVM: moved {len(moved)} tuned schedule(s) from {anchor.label} to {bucket.label}")
    if first.rest(tracker.total_trials) is not None:
        chosen: list[tuple[str, Any]] = []
        for bucket in buckets:
            chosen += [(bucket.label, t) for t in _slowest_tasks(bucket, tasks[bucket.label], job, database)]
        rest = first.rest(tracker.total_trials)  # profiling took time too
        if rest is not None and chosen:
            say(f"TVM: phase 2: {len(chosen)} kernels that take most of each bucket's time")
            runner.run(chosen, rest, tracker)
    seconds = time.perf_counter() - started
    say(f"TVM: tuned {tracker.total_trials} trials in {seconds:.0f} s")
    return {
        "trials": tracker.total_trials,
        "tune_s": round(seconds, 3),
        "tasks": _task_facts(buckets, tasks, database, target, tracker),
    }


class _Runner:
    """Runs tuning phases over one database, builder and cost model."""

    def __init__(self, work_dir: Path, database: Any, builder: Any, cost_model: Any) -> None:
        self.work_dir = work_dir
        self.database = database
        self.builder = builder
        self.cost_model = cost_model

    def run(self, entries: list[tuple[str, Any]], budget: Budget, tracker: Tracker) -> None:
        """Tune ``entries`` (bucket label, extracted task) within ``budget``; records go to the database.

        Raises:
            ConversionError: tuning fails for another reason than the budget's deadline.
        """
        from tvm.s_tir import meta_schedule as ms

        # MetaSchedule prints its task table to stdout after every round; the progress
        # lines say what matters, and its full logs stay in the work dir's logs/.
        logging.getLogger("tvm.s_tir.meta_schedule").setLevel(logging.WARNING)
        contexts, weights = ms.relax_integration.extracted_tasks_to_tune_contexts(
            extracted_tasks=[task for _, task in entries],
            work_dir=str(self.work_dir),
            space="post-order-apply",
            strategy="evolutionary",
            seed=0,
        )
        tracker.start_phase([(label, task.task_name) for label, task in entries], budget)
        try:
            ms.tune_tasks(
                tasks=contexts,
                task_weights=weights,
                work_dir=str(self.work_dir),
                max_trials_global=budget.max_trials,
                num_trials_per_iter=budget.per_round(len(entries)),
                builder=self.builder,
                database=self.database,
                measure_callbacks=[*ms.MeasureCallback.create("default"), tracker.callback()],
                cost_model=self.cost_model,
            )
        except Exception as e:
            if tracker.stopped:  # the deadline: the records measured so far are in the database
                return
            raise ConversionError(
                f"TVM tuning failed: {first_line(str(e)) or type(e).__name__}",
                "build without tuning, or check apache-tvm-ffi<0.1.15 and psutil are installed",
            ) from e


def _tunable_tasks(module: Any, target: Any) -> list[Any]:
    from tvm.s_tir import meta_schedule as ms

    return [t for t in ms.relax_integration.extract_tasks(module, target) if not _is_scheduled(t)]


def _heavy(task: Any) -> bool:
    return any(k in task.task_name for k in ("matmul", "dense", "conv"))


def _slowest_tasks(bucket: Bucket, tasks: list[Any], job: TuningJob, database: Any) -> list[Any]:
    """The tasks that take most of ``bucket``'s measured run time with today's records.

    Profiling runs on this CPU; for a CUDA target every matmul is taken instead.
    """
    if job.target.on_cuda:
        return [t for t in tasks if _heavy(t)][:TASKS_PER_BUCKET]
    with job.target.tvm, database:
        executable = compile_module(bucket.module, job.target, database, legalized=True)
    profile = kernel_times(executable, bucket.shapes, job.dtypes, runs=1, warmup=False)
    by_name = {t.task_name: t for t in tasks}
    kernels = sorted(
        ((k, v["seconds"]) for k, v in profile["kernels"].items() if k in by_name), key=lambda kv: -kv[1]
    )
    total = sum(v["seconds"] for v in profile["kernels"].values()) or 1.0
    chosen: list[Any] = []
    covered = 0.0
    for name, seconds in kernels:
        if covered >= COVERAGE * total or len(chosen) >= TASKS_PER_BUCKET:
            break
        chosen.append(by_name[name])
        covered += seconds
    return chosen


def _task_facts(
    buckets: list[Bucket], tasks: dict[str, list[Any]], database: Any, target: Any, tracker: Tracker
) -> list[dict[str, Any]]:
    """Per bucket and task with a record: calls per inference, trials spent here, best time."""
    facts = []
    for bucket in buckets:
        for task in tasks[bucket.label]:
            record = database.query_tuning_record(task.dispatched[0], target, "main")
            best = mean_seconds(record.run_secs) if record is not None else None
            if best is None:
                continue
            facts.append(
                {
                    "bucket": bucket.label,
                    "name": task.task_name,
                    "calls": int(task.weight),
                    "trials": tracker.trials.get((bucket.label, task.task_name), 0),
                    "best_us": round(best * 1e6, 2),
                }
            )
    return facts


def _is_scheduled(task: Any) -> bool:
    return bool(task.mod.attrs.get("tirx.is_scheduled", False)) if task.mod.attrs else False


def _budget_text(options: TvmOptions) -> str:
    parts = []
    if options.tune_trials > 0:
        parts.append(f"up to {options.tune_trials} trials")
    if options.tune_minutes:
        parts.append(f"up to {options.tune_minutes:g} min")
    return " and ".join(parts)
