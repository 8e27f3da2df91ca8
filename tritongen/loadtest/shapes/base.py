"""What every load shape gives a run: its measured length, its stages and its sends laid out in time.

A shape's sends are drawn here, before the run, and written as a schedule
(:func:`~tritongen.io.loadgen_shared.write_schedule`) that one load process replays: each send's
time from the measured span's start and the request it sends. The process starts the schedule's
time 0 on a window's start and marks it, so the measured span, the stages and the schedule line up.
Before time 0 it sends the warm-up: the shape's start (its first rate, or the trace's first
requests) for ``--warmup``.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from tritongen.errors import ConfigError

STEP_IN_TURN = -1
"""The step of a send that takes the next request in turn (a shape with no requests of its own)."""
GRID_MS = 1
"""Stage lengths are whole milliseconds: the window that divides them all is found on that grid."""


@dataclass(frozen=True)
class Stage:
    """A part of the measured span reported on its own (a stage of ``--stages``, a ramp)."""

    label: str
    start_s: float
    duration_s: float
    rate: str
    """The rate asked, as the user wrote it (``500``, ``100..1000``)."""


@dataclass(frozen=True)
class Schedule:
    """The sends of one run: times in s from the measured span's start (from ``-warmup_s``), and steps."""

    warmup_s: float
    times_s: npt.NDArray[np.float64]
    steps: npt.NDArray[np.int64]

    @property
    def measured_sends(self) -> int:
        """Sends at or after time 0."""
        return int(np.count_nonzero(self.times_s >= 0))


class LoadShape(ABC):
    """An open loop's sends laid out in time: the run's length, its stages, its schedule."""

    option: str
    """The option that asked for it (``--stages``, ``--trace``, ``--rate A..B/D``)."""

    @property
    @abstractmethod
    def duration_s(self) -> float:
        """The measured span's length."""

    @property
    @abstractmethod
    def mean_rate(self) -> float:
        """Sends per second over the measured span (the run's level)."""

    @abstractmethod
    def stages(self) -> tuple[Stage, ...]:
        """The parts of the measured span reported on their own (none: only the whole)."""

    @abstractmethod
    def schedule(self, warmup_s: float, seed: int) -> Schedule:
        """The run's sends, the warm-up's first, seeded."""

    @abstractmethod
    def describe(self) -> str:
        """One line: what the shape sends, and for how long."""

    def notes(self, warmup_s: float = 0.0) -> tuple[str, ...]:
        """What the user should know about how the shape was read, and its ``warmup_s`` (none by default)."""
        del warmup_s
        return ()

    def rows_per_request(self, rows: int, batched: bool) -> float:
        """The rows (batch size) a request carries on average; ``rows``: the load's own request's."""
        del batched
        return float(rows)

    def window_s(self, longest_s: float, also_s: float | None = None) -> float:
        """The longest window up to ``longest_s`` dividing the span, every stage and ``also_s`` (a timeslice).

        The measured span and each stage's figures are whole numbers of windows: their edges are window edges.
        """
        lengths = (
            [self.duration_s] + [stage.duration_s for stage in self.stages()] + ([also_s] if also_s else [])
        )
        grid = 0
        for length in lengths:
            grid = math.gcd(grid, round(length * 1000 / GRID_MS))
        grid_s = grid * GRID_MS / 1000
        return float(Fraction(grid_s).limit_denominator(10**6) / math.ceil(grid_s / longest_s - 1e-9))


def measured_cap(max_duration_s: float | None, shape: LoadShape | None) -> float | None:
    """``--max-duration`` in s; a shaped load's own length (where the option does not apply).

    Raises:
        ConfigError: a ``--max-duration`` given to a shaped load.
    """
    if shape is None:
        return max_duration_s
    if max_duration_s is not None:
        raise ConfigError(f"{shape.option} lasts its own length: --max-duration does not apply", "drop it")
    return shape.duration_s
