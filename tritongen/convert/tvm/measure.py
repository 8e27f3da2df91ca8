"""Building and timing single kernels the way MetaSchedule does: long-lived builders, its runner."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from tritongen.convert.tvm.options import usable_cores

BUILD_TIMEOUT_S = 300.0
"""Per-candidate build limit while tuning (a worker's first build also imports TVM)."""


def build_candidate(job: tuple[Any, Any]) -> str:
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


def persistent_builder() -> Any:
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
            for outcome in self.pool.map_with_error_catching(build_candidate, jobs):
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


def measure_kernels(mods: list[Any], target: Any, builder: Any) -> list[float | None]:
    """Time each scheduled one-kernel module as tuning does; seconds per call, ``None`` where it fails."""
    from tvm.s_tir import meta_schedule as ms

    if not mods:
        return []
    built = builder.build([ms.builder.BuilderInput(mod, target) for mod in mods])
    runner = ms.runner.LocalRunner()
    device = "cuda" if str(target.kind.name) == "cuda" else "cpu"
    inputs = []
    for mod, result in zip(mods, built, strict=True):
        if result.error_msg is None:
            args = ms.arg_info.ArgInfo.from_prim_func(mod["main"])
            inputs.append(ms.runner.RunnerInput(result.artifact_path, device, args))
    futures = iter(runner.run(inputs)) if inputs else iter(())
    seconds: list[float | None] = []
    for result in built:
        outcome = next(futures).result() if result.error_msg is None else None
        ok = outcome is not None and outcome.error_msg is None
        seconds.append(mean_seconds(outcome.run_secs) if ok and outcome is not None else None)
    return seconds


def mean_seconds(run_secs: Sequence[Any] | None) -> float | None:
    """The mean of a record's or result's ``run_secs`` (``None`` when it has none)."""
    runs = [float(s) for s in run_secs or []]
    return sum(runs) / len(runs) if runs else None
