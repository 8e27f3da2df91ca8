"""What a load test reports while it runs: one line of progress, given to a callback."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Progress:
    """What the live progress line shows."""

    label: str
    phase: str
    measured_s: float
    target_s: float
    qps: float | None
    p99_us: float | None
    errors: int
    stable: bool


ProgressCallback = Callable[[Progress], None]
