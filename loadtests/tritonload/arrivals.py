"""The gaps between an open-loop user's scheduled sends (the standard library only: tests draw them too).

The arrival processes of ``--triton-arrival``: ``constant``, ``poisson`` and ``gamma`` with
``--triton-arrival-cv``; tritongen's side, the CV asked and achieved, is in its loadtest/arrivals.py.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Protocol

from .shared import ARRIVAL_GAPS

BLOCK = 1000
"""Gamma gaps are drawn and nudged this many at a time."""


class ArrivalOptions(Protocol):
    """What the draw reads of the options."""

    @property
    def user_rate(self) -> float:
        """Sends per second of one user."""
        ...

    @property
    def arrival(self) -> str:
        """``constant``, ``poisson`` or ``gamma``."""
        ...

    @property
    def arrival_cv(self) -> float:
        """``gamma``: the CV of the gaps."""
        ...


def arrival_gaps(options: ArrivalOptions, rng: random.Random) -> Callable[[], float]:
    """The gaps between one user's scheduled sends, in s, drawn from ``rng``.

    ``constant``: 1/rate each; ``poisson``: exponential (CV 1); ``gamma``: shape 1/CV², scale
    CV²/rate, so the mean gap stays 1/rate and a CV above 1 sends in bursts.
    """
    rate = options.user_rate
    if options.arrival == "poisson":
        return lambda: rng.expovariate(rate)
    if options.arrival == "gamma":
        return _gamma_gaps(rng, 1.0 / rate, options.arrival_cv)
    return lambda: 1.0 / rate


def _gamma_gaps(rng: random.Random, mean: float, cv: float) -> Callable[[], float]:
    """Gamma gaps in blocks of :data:`BLOCK`, each block nudged to the mean and CV asked.

    A bursty process's sample CV wanders: over 10,000 gaps of CV 2 it is off by 2.5% (one
    standard error), so a 20 s run would miss the CV asked by 5% one time in twenty. Each block
    of draws is raised to the power (near 1) that gives it the CV asked, then scaled to the
    mean: a run's rate and CV hold to within a percent, its gaps still drawn from the gamma.
    """
    shape = 1.0 / (cv * cv)
    block: list[float] = []

    def draw() -> float:
        if not block:
            drawn = [rng.gammavariate(shape, mean / shape) for _ in range(BLOCK)]
            block.extend(reversed(_nudged(drawn, mean, cv)))
        return block.pop()

    return draw


def _nudged(gaps: list[float], mean: float, cv: float) -> list[float]:
    """``gaps`` raised to the power whose result has coefficient of variation ``cv``, scaled to ``mean``."""
    low, high = 0.25, 4.0
    power = 1.0
    for _ in range(40):  # the CV of x**p grows with p: bisection
        power = (low + high) / 2
        if _cv([g**power for g in gaps]) < cv:
            low = power
        else:
            high = power
    powered = [g**power for g in gaps]
    factor = mean * len(powered) / sum(powered)
    return [g * factor for g in powered]


def _cv(values: list[float]) -> float:
    n = len(values)
    average = sum(values) / n
    variance = sum((v - average) ** 2 for v in values) / (n - 1)
    return float(variance**0.5) / average


def gap_counts(gap_s: float) -> tuple[tuple[str, int], ...]:
    """What one gap between sends on schedule adds to a window's counters (``ARRIVAL_GAPS``)."""
    gap_us = int(gap_s * 1e6)
    return tuple(zip(ARRIVAL_GAPS, (1, gap_us, gap_us * gap_us), strict=True))


def gaps_cv(counts: dict[str, int]) -> float | None:
    """The coefficient of variation of the gaps counted in ``counts`` (None with fewer than 2)."""
    n, total, squares = (counts.get(name, 0) for name in ARRIVAL_GAPS)
    if n < 2 or total <= 0:
        return None
    mean = total / n
    variance = max(0.0, squares / n - mean * mean) * n / (n - 1)
    return float(variance**0.5) / mean
