"""Rules that end a sweep of load levels early, all of one kind: asked after each level, in order.

A sweep goes up its levels (concurrency 1, 4, 16, 64 or rates 500, 1000, 2000). A rule is
asked after each level of the first round, with the level before, and either lets the sweep
go on (``None``) or stops it there (a :class:`~tritongen.loadtest.result.SweepStop` saying
why). The load test then leaves the levels above out (later rounds measure up to that one).

- ``--stop-at-saturation``: :class:`~tritongen.loadtest.saturation.SaturationRule` (a P99 limit,
  or throughput that stopped rising while latency rose);
- perf_analyzer's ``-l``: :class:`LatencyLimit` (the level's stability latency above a limit);
- perf_analyzer's stop at a level that is not stable: :class:`StableOnly`.

:class:`FirstOf` asks several rules in order and takes the first that stops the sweep.

A search (:class:`LevelSearch`) chooses a sweep's levels one by one from the levels before it,
judging each with a rule: :class:`Bisection` is perf_analyzer's ``--binary-search``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Protocol

from tritongen.loadtest.result import RunResult, run_level
from tritongen.loadtest.sweep_stop import SweepStop


class SweepRule(Protocol):
    """A rule asked after each level of a sweep's first round."""

    def check(self, previous: RunResult | None, current: RunResult, label: str) -> SweepStop | None:
        """Whether the sweep stops at ``current`` (``previous``: the level before; ``label``: its name)."""
        ...


@dataclass(frozen=True)
class FirstOf:
    """Several rules, asked in order: the first that stops the sweep says why."""

    rules: tuple[SweepRule, ...]

    def check(self, previous: RunResult | None, current: RunResult, label: str) -> SweepStop | None:
        """The first rule's stop at ``current``, or ``None`` when every rule lets the sweep go on."""
        for rule in self.rules:
            stop = rule.check(previous, current, label)
            if stop is not None:
                return stop
        return None


@dataclass(frozen=True)
class LatencyLimit:
    """perf_analyzer's ``-l``: stop after the first level whose latency is above ``limit_ms``.

    The latency is the one the level's stability was judged on (P99, the mean, or ``--percentile``).
    """

    limit_ms: float
    rule: ClassVar[str] = "latency-threshold"

    def check(self, previous: RunResult | None, current: RunResult, label: str) -> SweepStop | None:
        """A stop when ``current``'s stability latency exceeds the limit."""
        del previous  # each level is judged on its own
        latency = current.stability_latency_us
        if latency is None or latency <= self.limit_ms * 1000:
            return None
        return SweepStop(
            self.rule,
            run_level(current),
            f"{label}'s latency {latency / 1000:.2f} ms exceeds the limit {self.limit_ms:g} ms",
        )


@dataclass(frozen=True)
class StableOnly:
    """perf_analyzer's stop at the first level that did not stabilise within its windows."""

    rule: ClassVar[str] = "unstable"

    def check(self, previous: RunResult | None, current: RunResult, label: str) -> SweepStop | None:
        """A stop when ``current`` is not stable."""
        del previous  # each level is judged on its own
        if current.stable:
            return None
        return SweepStop(self.rule, run_level(current), f"{label} did not stabilise")


class LevelSearch(Protocol):
    """Levels chosen one at a time from how the levels before them were judged."""

    def next_level(self, measured: Sequence[tuple[float, bool]]) -> float | None:
        """The level after ``measured`` (each level with whether it passed); None when the search is done."""
        ...

    def passes(self, current: RunResult, label: str) -> bool:
        """Whether ``current`` passes (``label``: its name)."""
        ...


@dataclass(frozen=True)
class Bisection:
    """perf_analyzer's ``--binary-search``: the highest level from ``start`` to ``end`` that ``rule`` passes.

    The start is measured first (when it fails, the search ends), then the end (when it passes, the
    search ends), then the middle of the highest level that passed and the lowest that failed, until
    the two are within ``step`` of each other. Whole levels (concurrency) round the middle down.
    """

    start: float
    end: float
    step: float
    rule: SweepRule
    """A level passes when this rule would not stop a sweep at it (perf_analyzer: :class:`LatencyLimit`)."""
    whole: bool = True

    def next_level(self, measured: Sequence[tuple[float, bool]]) -> float | None:
        """The level after ``measured``, or None when the search is done."""
        if not measured:
            return self.start
        if not measured[0][1]:
            return None
        if len(measured) == 1:
            return self.end
        if measured[1][1]:
            return None
        low, high = self.start, self.end
        for level, passed in measured[2:]:
            low, high = (level, high) if passed else (low, level)
        if high - low <= self.step:
            return None
        middle = (low + high) / 2
        return float(math.floor(middle)) if self.whole else middle

    def passes(self, current: RunResult, label: str) -> bool:
        """Whether ``rule`` lets a sweep go on after ``current``."""
        return self.rule.check(previous=None, current=current, label=label) is None

    @staticmethod
    def best(measured: Sequence[tuple[float, bool]]) -> float | None:
        """The highest level that passed; None when none did."""
        return max((level for level, passed in measured if passed), default=None)
