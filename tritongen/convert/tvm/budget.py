"""The tuning budget (trials and a deadline) and progress: each kernel's best time as it improves."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tritongen.convert.artifact import Progress
from tritongen.convert.tvm.measure import mean_seconds
from tritongen.convert.tvm.options import TvmOptions

UNLIMITED_TRIALS = 1_000_000
TRIALS_PER_ROUND = 16
"""Candidates measured per round under a time budget: small rounds reach every kernel early."""


@dataclass(frozen=True)
class Budget:
    """One phase's share: at most ``max_trials`` trials, until ``deadline`` (monotonic seconds)."""

    max_trials: int
    deadline: float
    trials_bound: bool
    """Whether a trial count (not only time) bounds tuning."""
    total_trials: int
    end: float
    """The whole run's deadline (monotonic seconds)."""

    @classmethod
    def first(cls, options: TvmOptions, share: float) -> Budget:
        """The first phase's ``share`` of the options' trials and minutes."""
        now = time.monotonic()
        minutes = options.tune_minutes or 0.0
        end = now + 60.0 * minutes if minutes > 0 else float("inf")
        bound = options.tune_trials > 0
        total = options.tune_trials if bound else UNLIMITED_TRIALS
        return cls(
            max_trials=max(1, round(total * share)) if bound else UNLIMITED_TRIALS,
            deadline=now + 60.0 * minutes * share if minutes > 0 else float("inf"),
            trials_bound=bound,
            total_trials=total,
            end=end,
        )

    def rest(self, used_trials: int) -> Budget | None:
        """What is left after ``used_trials``, up to the run's deadline; ``None`` when nothing is."""
        left = self.total_trials - used_trials if self.trials_bound else UNLIMITED_TRIALS
        if left < 1 or time.monotonic() >= self.end:
            return None
        return Budget(left, self.end, self.trials_bound, self.total_trials, self.end)

    def per_round(self, tasks: int) -> int:
        """Candidates per round: a trial budget spread over ``tasks``, else :data:`TRIALS_PER_ROUND`."""
        if self.trials_bound:
            return min(64, max(1, self.max_trials // max(1, tasks)))
        return TRIALS_PER_ROUND


class Tracker:
    """Counts trials per kernel, reports each kernel's best time as it improves, enforces deadlines."""

    def __init__(self, say: Progress) -> None:
        self.say = say
        self.trials: dict[tuple[str, str], int] = {}
        self.best_s: dict[tuple[str, str], float] = {}
        self.total_trials = 0
        self.stopped = False
        self._entries: list[tuple[str, str]] = []
        self._deadline = float("inf")

    def start_phase(self, entries: list[tuple[str, str]], budget: Budget) -> None:
        """Begin a phase over ``entries`` (bucket label, task name), in the scheduler's task order."""
        self._entries = entries
        self._deadline = budget.deadline
        self.stopped = False

    def measured(self, scheduler: Any, task_id: int, runner_results: Sequence[Any]) -> None:
        """Count a round of one task; report a new best; end the phase once its time is spent.

        Raises:
            TimeoutError: the phase's deadline has passed (after every round already
                measured has been collected).
        """
        key = self._entries[task_id]
        self.trials[key] = self.trials.get(key, 0) + len(runner_results)
        self.total_trials += len(runner_results)
        times = [mean_seconds(r.run_secs) for r in runner_results if r.error_msg is None]
        best = min((t for t in times if t is not None), default=None)
        previous = self.best_s.get(key)
        if best is not None and (previous is None or best < previous):
            self.best_s[key] = best
            was = f" (was {_time_text(previous)})" if previous is not None else ""
            self.say(
                f"TVM: {key[0]} {key[1]}: best {_time_text(best)}{was} "
                f"after {self.trials[key]} trials; {self.total_trials} in all"
            )
        if time.monotonic() > self._deadline and not self.stopped:
            self.stopped = True
            # Collect the rounds other tasks have measured (into the database, through the
            # callbacks), then stop the scheduler: it offers no way to end early itself.
            for index, task in enumerate(scheduler.tasks_):
                if index != task_id and task.runner_futures is not None:
                    scheduler.join_running_task(index)
            raise TimeoutError("tuning time budget spent")

    def callback(self) -> Any:
        """A MetaSchedule measure callback that reports each round to :meth:`measured`."""
        from tvm.ir.utils import derived_object
        from tvm.s_tir.meta_schedule.measure_callback import PyMeasureCallback

        tracker = self

        @derived_object
        class Progressing(PyMeasureCallback):  # type: ignore[misc]
            """Reports progress and stops tuning once the phase's time is spent."""

            def apply(
                self,
                task_scheduler: Any,
                task_id: int,
                measure_candidates: Sequence[Any],
                builder_results: Sequence[Any],
                runner_results: Sequence[Any],
            ) -> None:
                tracker.measured(task_scheduler, task_id, runner_results)

        return Progressing()


def _time_text(seconds: float) -> str:
    """``1.234 ms``, ``5.6 µs`` or ``40 ns``."""
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3f} ms"
    return f"{seconds * 1e6:.1f} µs" if seconds >= 1e-6 else f"{seconds * 1e9:.0f} ns"
