"""Stop a sweep early: at the first level that misses the P99 limit or saturates the server.

A sweep's levels go up (concurrency 1, 4, 16, 64 or rates 500, 1000, 2000). Past the server's
knee a higher level buys no throughput, only latency: a closed loop queues its extra requests
(latency grows with the level), an open loop piles them up. ``--stop-at-saturation`` ends the
sweep at the first level where either

- its P99 exceeds ``--slo-p99-ms`` (``slo``), or
- its throughput did not rise beyond the noise over the level before while its P99 rose
  (``saturation``). The noise is the run's own: each run's measured windows give its
  throughput's mean and standard error, and the ratio of two levels' throughputs gets a t
  interval from both (on the log scale). "Not beyond the noise" means the interval's low end
  is at most 1: the rise cannot be told from no rise. A run with fewer than two windows has
  no interval; its rise must then exceed ``NO_INTERVAL_RISE`` (10%).

Only the first round decides; later rounds measure the levels up to the one that stopped it.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from tritongen.intervals import DEFAULT_CONFIDENCE, t_quantile
from tritongen.loadtest.result import RunResult, run_level
from tritongen.loadtest.sweep_stop import SweepStop

NO_INTERVAL_RISE = 0.10
"""Without windows to judge the noise by, a rise counts when above this (twice the ~5% quiet-machine
round-to-round noise of throughput)."""


@dataclass(frozen=True)
class Gain:
    """Throughput of one level over the level before, with its interval from both runs' windows."""

    estimate: float
    low: float | None
    high: float | None

    def text(self) -> str:
        """``1.02× [0.95, 1.09]``, or ``1.02×`` without an interval."""
        if self.low is None or self.high is None:
            return f"{self.estimate:.2f}×"
        return f"{self.estimate:.2f}× [{self.low:.2f}, {self.high:.2f}]"


@dataclass(frozen=True)
class SaturationRule:
    """``--stop-at-saturation``, with the P99 limit that also stops the sweep (None: none)."""

    slo_p99_ms: float | None = None
    confidence: float = DEFAULT_CONFIDENCE

    def check(self, previous: RunResult | None, current: RunResult, label: str) -> SweepStop | None:
        """Whether the sweep stops at ``current`` (``previous``: the level before, None for the first)."""
        p99 = _p99_us(current)
        if self.slo_p99_ms is not None and p99 is not None and p99 > self.slo_p99_ms * 1000:
            return SweepStop(
                "slo",
                run_level(current),
                f"{label}'s P99 {p99 / 1000:.2f} ms exceeds --slo-p99-ms {self.slo_p99_ms:g}",
            )
        if previous is None:
            return None
        gain = throughput_gain(previous, current, self.confidence)
        before = _p99_us(previous)
        if gain is None or p99 is None or before is None or before <= 0:
            return None
        rising = gain.low > 1.0 if gain.low is not None else gain.estimate > 1.0 + NO_INTERVAL_RISE
        if rising or p99 <= before:
            return None
        return SweepStop(
            "saturation",
            run_level(current),
            f"{label} saturated: throughput {gain.text()} of the level before (no rise beyond the "
            f"noise) while P99 rose {p99 / before:.2f}× ({before / 1000:.2f} → {p99 / 1000:.2f} ms)",
        )


def throughput_gain(
    previous: RunResult, current: RunResult, confidence: float = DEFAULT_CONFIDENCE
) -> Gain | None:
    """``current``'s throughput over ``previous``'s, with a t interval from their windows' spread.

    None when either run has no throughput. Without at least two windows in each, the estimate
    has no interval.
    """
    if previous.qps <= 0 or current.qps <= 0:
        return None
    estimate = current.qps / previous.qps
    spreads = [_relative_error(previous), _relative_error(current)]
    if any(s is None for s in spreads):
        return Gain(estimate, low=None, high=None)
    counts = [len(_window_qps(previous)), len(_window_qps(current))]
    se = math.sqrt(sum(s * s for s in spreads if s is not None))
    half = t_quantile(confidence, max(1, sum(counts) - 2)) * se
    return Gain(estimate, estimate * math.exp(-half), estimate * math.exp(half))


def _window_qps(run: RunResult) -> list[float]:
    values = (w.get("qps") for w in run.windows)
    return [float(v) for v in values if v is not None and v > 0]


def _relative_error(run: RunResult) -> float | None:
    """The standard error of the run's mean throughput over its windows, relative to the mean."""
    values = _window_qps(run)
    if len(values) < 2:
        return None
    mean = statistics.fmean(values)
    return statistics.stdev(values) / mean / math.sqrt(len(values))


def _p99_us(run: RunResult) -> float | None:
    figure = (run.latency_us or {}).get("p99")
    return None if figure is None else float(figure)
