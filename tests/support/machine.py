"""How busy this machine was while a test measured: timings are compared only where it had CPU to spare."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import psutil

BUSY_LIMIT = 0.85
"""Share of the machine's CPU time in use over a measurement above which its timings are not compared."""
PEAK_LIMIT = 0.95
"""Share of the CPUs in use over any ``PEAK_S`` of a measurement above which its tail is not compared."""
PEAK_S = 0.5
"""Length of the spans whose CPU use makes :attr:`CpuUse.peak`."""
ATTEMPTS = 3
"""Measurements of one timing test at most, while the machine is too busy for the comparison."""


@dataclass
class CpuUse:
    """The share of all CPUs' time that was not idle over the ``with`` block (set when it ends)."""

    busy: float = 1.0
    spans: list[float] = field(default_factory=list)
    """The share in use over each ``PEAK_S`` of the block."""

    @property
    def spare(self) -> bool:
        """Whether the machine had CPU to spare: at most ``BUSY_LIMIT`` of it in use."""
        return self.busy <= BUSY_LIMIT

    @property
    def peak(self) -> float:
        """The largest share in use over any ``PEAK_S`` of the block (the whole block's if none)."""
        return max(self.spans, default=self.busy)

    @property
    def steady(self) -> bool:
        """CPU to spare throughout, not only on average: what a latency tail needs to be compared."""
        return self.spare and self.peak <= PEAK_LIMIT


@contextmanager
def cpu_use() -> Iterator[CpuUse]:
    """Measure how busy every CPU was during the block (other processes included)."""
    use = CpuUse()
    done = threading.Event()

    def sample() -> None:
        psutil.cpu_percent(interval=None, percpu=False)
        while not done.wait(PEAK_S):
            use.spans.append(psutil.cpu_percent(interval=None, percpu=False) / 100.0)

    sampler = threading.Thread(target=sample, daemon=True)
    before = psutil.cpu_times()
    sampler.start()
    try:
        yield use
    finally:
        done.set()
        sampler.join()
        after = psutil.cpu_times()
        total = sum(after) - sum(before)
        idle = (after.idle + getattr(after, "iowait", 0.0)) - (before.idle + getattr(before, "iowait", 0.0))
        use.busy = 1.0 - idle / total if total > 0 else 1.0
