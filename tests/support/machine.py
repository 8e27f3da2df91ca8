"""How busy this machine was while a test measured: timings are compared only where it had CPU to spare."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import psutil

BUSY_LIMIT = 0.85
"""Share of the machine's CPU time in use over a measurement above which its timings are not compared."""
ATTEMPTS = 3
"""Measurements of one timing test at most, while the machine is too busy for the comparison."""


@dataclass
class CpuUse:
    """The share of all CPUs' time that was not idle over the ``with`` block (set when it ends)."""

    busy: float = 1.0

    @property
    def spare(self) -> bool:
        """Whether the machine had CPU to spare: at most ``BUSY_LIMIT`` of it in use."""
        return self.busy <= BUSY_LIMIT


@contextmanager
def cpu_use() -> Iterator[CpuUse]:
    """Measure how busy every CPU was during the block (other processes included)."""
    use = CpuUse()
    before = psutil.cpu_times()
    try:
        yield use
    finally:
        after = psutil.cpu_times()
        total = sum(after) - sum(before)
        idle = (after.idle + getattr(after, "iowait", 0.0)) - (before.idle + getattr(before, "iowait", 0.0))
        use.busy = 1.0 - idle / total if total > 0 else 1.0
