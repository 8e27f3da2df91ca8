"""What ``tritongen tune`` maximises: throughput under a P99 latency SLO (and an optional memory cap).

Under a load that sets the throughput itself (a replayed trace, stages, an open loop at one rate),
every config that keeps up serves the same throughput: there the lower P99 is the better config.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")

FAILED_OBJECTIVE = -math.inf
"""The objective of a failed trial (or one with no latency): below everything else."""


@dataclass(frozen=True)
class Measurement:
    """What one trial measured; ``p99_us`` is ``None`` when no request succeeded."""

    infer_per_s: float
    p99_us: float | None
    memory_bytes: int | None = None
    failed: bool = False
    level: float | None = None
    """The load level (concurrency or rate) this figure was measured at."""
    by_latency: bool = False
    """Measured under a load that sets the throughput itself (``--trace``, ``--stages``, one ``--rate``):
    judged by the lower P99."""

    @property
    def judged_by(self) -> str:
        """``p99`` by latency, else ``throughput`` (as trial results and the tune JSON name it)."""
        return "p99" if self.by_latency else "throughput"

    @property
    def score(self) -> float:
        """What is maximised among feasible figures: throughput, or the reciprocal P99 (1/s) by latency."""
        if not self.by_latency:
            return self.infer_per_s
        return 1e6 / self.p99_us if self.p99_us else 0.0


def _miss(m: Measurement, slo_p99_ms: float | None, max_memory_mb: float | None) -> float:
    """How far ``m`` misses its limits, as the largest relative excess (0 when within them)."""
    misses = [0.0]
    if slo_p99_ms is not None and m.p99_us is not None:
        misses.append(m.p99_us / (slo_p99_ms * 1000.0) - 1.0)
    if max_memory_mb is not None and m.memory_bytes is not None:
        misses.append(m.memory_bytes / (max_memory_mb * 1024.0 * 1024.0) - 1.0)
    return max(misses)


def feasible(m: Measurement, slo_p99_ms: float | None, max_memory_mb: float | None = None) -> bool:
    """Whether a trial succeeded within the SLO and the memory cap.

    ``None`` limits are not applied; memory that was not measured is not held against a trial.
    """
    if m.failed or m.p99_us is None:
        return False
    return _miss(m, slo_p99_ms, max_memory_mb) <= 0.0


def objective(m: Measurement, slo_p99_ms: float | None, max_memory_mb: float | None = None) -> float:
    """The score to maximise: ``infer_per_s`` (by latency: 1/P99) when feasible, else a negative number.

    An infeasible trial scores minus its relative excess over the limits (``-0.2`` is 20 %
    over the SLO), so search strategies can still rank near misses above far ones; a failed
    trial scores :data:`FAILED_OBJECTIVE`.
    """
    if m.failed or m.p99_us is None:
        return FAILED_OBJECTIVE
    if feasible(m, slo_p99_ms, max_memory_mb):
        return max(m.score, 0.0)
    return -_miss(m, slo_p99_ms, max_memory_mb)


def best(
    results: Sequence[tuple[T, Measurement]], slo_p99_ms: float | None, max_memory_mb: float | None = None
) -> tuple[T, Measurement] | None:
    """The feasible result with the most throughput (ties: lower P99, then earlier); ``None`` if none.

    By latency: the one with the lowest P99 (ties: more throughput, then earlier).
    """
    found: tuple[T, Measurement] | None = None
    for config, m in results:
        if not feasible(m, slo_p99_ms, max_memory_mb):
            continue
        if found is None or _better(m, found[1]):
            found = (config, m)
    return found


def _better(a: Measurement, b: Measurement) -> bool:
    if a.by_latency and a.score != b.score:
        return a.score > b.score
    if a.infer_per_s != b.infer_per_s:
        return a.infer_per_s > b.infer_per_s
    return (a.p99_us or 0.0) < (b.p99_us or 0.0)


def pareto_front(results: Sequence[tuple[T, Measurement]]) -> list[tuple[T, Measurement]]:
    """The results no other one beats on both throughput (higher) and P99 (lower), by rising P99.

    Failed trials and trials without a P99 are left out; equal results are all kept.
    """
    valid = [(c, m, m.p99_us) for c, m in results if not m.failed and m.p99_us is not None]

    def dominated(throughput: float, p99_us: float) -> bool:
        return any(
            t >= throughput and p <= p99_us and (t > throughput or p < p99_us)
            for t, p in ((o.infer_per_s, o_p99) for _, o, o_p99 in valid)
        )

    front = [(c, m, p99) for c, m, p99 in valid if not dominated(m.infer_per_s, p99)]
    front.sort(key=lambda r: (r[2], r[1].infer_per_s))
    return [(c, m) for c, m, _ in front]


def gain(best: Measurement | None, baseline: Measurement | None) -> float | None:
    """The throughput factor of ``best`` over ``baseline`` (2.0 = twice); ``None`` when not comparable."""
    if best is None or baseline is None or best.failed or baseline.failed:
        return None
    if baseline.infer_per_s <= 0.0:
        return None
    return best.infer_per_s / baseline.infer_per_s
