"""Moving tuned schedules between buckets: the same kernel at another shape.

A tuning record is keyed by its kernel's exact shapes, so a record of ``32x128`` never
matches the same matmul at ``8x128``. Its schedule still applies: the record's trace is
replayed on the other kernel with each tile split refitted to the new loop extents. The
moved schedule is timed like a tuning candidate and committed with that time, so it is
used where nothing better is tuned, and tuning of that kernel starts from it.
"""

from __future__ import annotations

from math import gcd
from typing import Any

from tritongen.convert.tvm.measure import measure_kernels


def refit_tiles(factors: list[int], extent: int) -> list[int]:
    """Tile factors for ``extent`` close to ``factors``: inner factors kept where they still divide.

    The product of the result is exactly ``extent`` (``SamplePerfectTile`` requires it).
    """
    rest = extent
    refit = [1] * len(factors)
    for i in range(len(factors) - 1, 0, -1):
        refit[i] = gcd(factors[i], rest)
        rest //= refit[i]
    refit[0] = rest
    return refit


def replay(record: Any, kernel: Any) -> Any | None:
    """``record``'s schedule replayed on ``kernel`` (an IRModule); ``None`` when it does not apply."""
    from tvm import s_tir

    schedule = s_tir.Schedule(kernel)

    def decide(inst: Any, inputs: Any, _attrs: Any, decision: Any) -> Any:
        if inst.kind.name != "SamplePerfectTile":
            return decision
        return refit_tiles([int(x) for x in decision], int(schedule.get(inputs[0]).extent))

    try:
        record.trace.apply_to_schedule(schedule, remove_postproc=False, decision_provider=decide)
    except Exception:  # a trace of a differently shaped kernel may not apply
        return None
    return schedule


def transfer_records(
    sources: dict[str, Any], targets: list[Any], database: Any, target: Any, builder: Any
) -> list[str]:
    """Replay the best record of each same-named source task on each target task, timed and committed.

    ``sources``: task name → extracted task of the bucket records come from; ``targets``:
    extracted tasks of another bucket. Returns the names of the tasks that received one.
    """
    from tvm.s_tir import meta_schedule as ms

    moved: list[tuple[Any, Any]] = []
    for task in targets:
        source = sources.get(task.task_name)
        if source is None or database.has_workload(task.dispatched[0]):
            continue
        record = database.query_tuning_record(source.dispatched[0], target, "main")
        schedule = replay(record, task.dispatched[0]) if record is not None else None
        if schedule is not None:
            moved.append((task, schedule))
    seconds = measure_kernels([schedule.mod for _, schedule in moved], target, builder)
    names = []
    for (task, schedule), secs in zip(moved, seconds, strict=True):
        if secs is None:
            continue
        kernel = task.dispatched[0]
        workload = database.commit_workload(kernel)
        args = ms.arg_info.ArgInfo.from_prim_func(kernel["main"])
        database.commit_tuning_record(
            ms.database.TuningRecord(schedule.trace, workload, [secs], target, args)
        )
        names.append(task.task_name)
    return names
