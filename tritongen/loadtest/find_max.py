"""``loadtest --find-max``: the highest load level that still meets the SLO, found by measuring.

The search starts at the level given (concurrency or rate) and doubles it while each level meets
the SLO, up to a cap; from the first level that misses, it bisects between the highest level that
met and the lowest that missed, until the two are within ``precision`` of each other (or one
level apart for a concurrency). A level meets the SLO when its P99 is within ``--slo-p99-ms``
(a tensor load) or its TTFT, ITL and end-to-end P99 are within the ``--slo`` limits (an LLM
load), and no more than 1% of its requests failed. The answer is the bracket the last two
levels make (:class:`~tritongen.loadtest.sweep_stop.FoundMax`), with the throughput (an LLM
load's goodput) at the level that met: a point between them was not measured, so none is said.

The search is the first round; later rounds (``--rounds``) measure the levels it chose again,
for their intervals in the levels table.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from tritongen.errors import ConfigError
from tritongen.loadtest.result import RunResult
from tritongen.loadtest.sweep_stop import FoundMax

MAX_ERROR_SHARE = 0.01
"""A level whose failed requests are more than this share misses the SLO, whatever its latency."""
DEFAULT_PRECISION = 0.10
DEFAULT_CAP = {"concurrency": 256.0, "rate": 20_000.0}
"""The highest level searched unless ``--max-level`` says otherwise."""


@dataclass(frozen=True)
class SloObjective:
    """What a level must meet: P99 limits in ms (None: no limit on that figure)."""

    p99_ms: float | None = None
    ttft_ms: float | None = None
    itl_ms: float | None = None
    e2e_ms: float | None = None

    def text(self) -> str:
        """``P99 ≤ 20 ms``, or the LLM limits given."""
        named = [("P99", self.p99_ms), ("TTFT P99", self.ttft_ms), ("ITL P99", self.itl_ms),
                 ("E2E P99", self.e2e_ms)]  # fmt: skip
        return ", ".join(f"{name} ≤ {limit:g} ms" for name, limit in named if limit is not None)

    def miss(self, run: RunResult) -> str | None:
        """Why ``run`` misses the objective (None: it meets it)."""
        if run.status != "ok" or not run.requests:
            return f"the run ended {run.status}" if run.status != "ok" else "no request finished"
        if run.errors > MAX_ERROR_SHARE * run.requests:
            return f"{run.errors} of {run.requests} requests failed"
        figures = [
            ("P99", self.p99_ms, run.latency_us), ("TTFT P99", self.ttft_ms, run.ttft_us),
            ("ITL P99", self.itl_ms, run.itl_us), ("E2E P99", self.e2e_ms, run.e2e_us),
        ]  # fmt: skip
        for name, limit, measured in figures:
            if limit is None:
                continue
            p99 = (measured or {}).get("p99")
            if p99 is None or p99 > limit * 1000:
                shown = "none" if p99 is None else f"{p99 / 1000:.2f} ms"
                return f"{name} {shown} over {limit:g} ms"
        return None


@dataclass(frozen=True)
class MaxSearch:
    """The levels of ``--find-max``: doubling from ``start`` to ``cap``, then bisecting the bracket."""

    start: float
    cap: float
    objective: SloObjective
    precision: float = DEFAULT_PRECISION
    whole: bool = True
    """Levels are whole numbers (a concurrency)."""

    def __post_init__(self) -> None:
        if not self.objective.text():
            raise ConfigError(
                "--find-max looks for the most load within an SLO, and none was given",
                "add --slo-p99-ms MS (or --slo ttft=MS,itl=MS for an LLM load)",
            )
        if not 0 < self.start <= self.cap:
            raise ConfigError(
                f"--find-max starts at {self.start:g}, which is not between 0 and --max-level {self.cap:g}",
                "give one starting level below --max-level",
            )
        if not 0 < self.precision < 1:
            raise ConfigError(
                f"--search-precision {self.precision:g} is not between 0 and 1", "e.g. --search-precision 0.1"
            )

    @staticmethod
    def _bracket(measured: Sequence[tuple[float, bool]]) -> tuple[float | None, float | None]:
        met = [level for level, passed in measured if passed]
        missed = [level for level, passed in measured if not passed]
        return max(met, default=None), min(missed, default=None)

    def next_level(self, measured: Sequence[tuple[float, bool]]) -> float | None:
        """The level after ``measured`` (each level with whether it met the SLO); None when done."""
        if not measured:
            return self.start
        meets, misses = self._bracket(measured)
        if meets is None:
            return None  # the first level already missed
        if misses is None:
            return None if meets >= self.cap else min(self._round(meets * 2), self.cap)
        if misses <= meets * (1 + self.precision) or (self.whole and misses - meets <= 1):
            return None
        middle = self._round(math.sqrt(meets * misses))  # halfway on the log scale the levels double on
        if self.whole and middle <= meets:
            middle = meets + 1  # whole levels more than one apart: the next one up is between
        return middle if meets < middle < misses else None

    def most_levels(self) -> int:
        """The most levels the search can measure: every doubling, then the bisections after the last."""
        doublings = math.ceil(math.log2(self.cap / self.start)) + 1
        widest = max(2.0, self.cap / 2)  # the bracket the doubling can leave: (cap/2, cap]
        steps = math.log2(widest) if self.whole else math.log2(math.log(2) / math.log(1 + self.precision))
        return doublings + max(1, math.ceil(steps))

    def _round(self, level: float) -> float:
        return float(math.floor(level)) if self.whole else round(level, 3)

    def passes(self, current: RunResult, label: str) -> bool:
        """Whether ``current`` meets the objective."""
        del label  # the result says why it missed
        return self.objective.miss(current) is None

    def outcome(self, measured: Sequence[tuple[float, bool]], runs: Sequence[RunResult]) -> FoundMax:
        """The bracket ``measured`` makes, with the throughput (goodput for an LLM load) where it met."""
        meets, misses = self._bracket(measured)
        at = next((run for (level, _), run in zip(measured, runs, strict=False) if level == meets), None)
        rate = None if at is None else (at.goodput_per_s if at.goodput_per_s is not None else at.qps)
        return FoundMax(
            objective=self.objective.text(),
            meets=meets,
            misses=misses,
            precision=self.precision,
            capped=misses is None and meets is not None,
            levels=list(measured),
            throughput_at_meets=rate,
        )
