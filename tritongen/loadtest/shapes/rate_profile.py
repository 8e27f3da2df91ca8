"""Rates that change along the run: a linear ramp (``--rate 100..1000/60s``) and stages (``--stages``).

A profile is a list of stages, each a rate held for its length or a rate ramped linearly to
another (``100:30s,100..500:60s,500:30s``). Its sends follow the arrival process asked
(constant, Poisson, gamma) in the profile's own time: unit-rate arrivals are drawn, seeded, and
each is sent when the rate's integral from the start reaches it, so a Poisson process stays
Poisson (with a rate that changes) and a gamma one keeps its bursts.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from tritongen.errors import ConfigError
from tritongen.io.loadgen_shared import arrival_gaps
from tritongen.loadtest.shapes.base import STEP_IN_TURN, LoadShape, Schedule, Stage

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}
MAX_SENDS = 5_000_000
"""A profile that asks more sends than this is refused (its schedule would not fit in memory)."""


@dataclass(frozen=True)
class RatePart:
    """One stage: from ``start_rate`` to ``end_rate`` (equal: held) over ``duration_s``."""

    start_rate: float
    end_rate: float
    duration_s: float

    @property
    def text(self) -> str:
        """The rate as written: ``500`` or ``100..1000``."""
        if self.start_rate == self.end_rate:
            return f"{self.start_rate:g}"
        return f"{self.start_rate:g}..{self.end_rate:g}"

    @property
    def sends(self) -> float:
        """The sends it asks for: the rate's integral over its length."""
        return (self.start_rate + self.end_rate) / 2 * self.duration_s


@dataclass(frozen=True)
class _Arrivals:
    """What :func:`arrival_gaps` reads: unit-rate gaps of the process asked."""

    arrival: str
    arrival_cv: float
    user_rate: float = 1.0


class RateProfile(LoadShape):
    """An open loop whose rate follows stages: held rates and linear ramps."""

    def __init__(self, parts: tuple[RatePart, ...], option: str, arrival: str = "constant", cv: float = 1.0):
        self.parts = parts
        self.option = option
        self.arrival = arrival
        self.cv = cv

    @property
    def duration_s(self) -> float:
        """The stages' lengths added up."""
        return sum(part.duration_s for part in self.parts)

    @property
    def mean_rate(self) -> float:
        """The sends asked over the measured span, per second."""
        return sum(part.sends for part in self.parts) / self.duration_s

    def with_arrival(self, arrival: str, cv: float | None) -> RateProfile:
        """The same stages, their sends drawn from ``arrival`` (``--arrival``)."""
        return RateProfile(self.parts, self.option, arrival, 1.0 if cv is None else cv)

    def stages(self) -> tuple[Stage, ...]:
        """Each stage, numbered from 1, with its rate as written."""
        stages, start = [], 0.0
        for number, part in enumerate(self.parts, 1):
            stages.append(Stage(str(number), start, part.duration_s, part.text))
            start += part.duration_s
        return tuple(stages)

    def describe(self) -> str:
        """``stages 100/s for 30 s, 100..500/s for 60 s`` (a ramp: ``ramp 100..1000/s over 60 s``)."""
        if self.option.startswith("--rate"):
            part = self.parts[0]
            return f"ramp {part.text}/s over {part.duration_s:g} s"
        return "stages " + ", ".join(f"{p.text}/s for {p.duration_s:g} s" for p in self.parts)

    def schedule(self, warmup_s: float, seed: int) -> Schedule:
        """The warm-up at the first stage's starting rate, then the stages' sends, seeded."""
        rng = random.Random(seed)
        gap = arrival_gaps(_Arrivals(self.arrival, self.cv), rng)
        first_rate = self.parts[0].start_rate
        warm: list[float] = []
        if warmup_s > 0 and first_rate > 0:
            at = -warmup_s
            while at < 0:
                warm.append(at)
                at += gap() / first_rate
        times = _profile_times(self.parts, gap)
        all_times = np.concatenate([np.asarray(warm, dtype=np.float64), times])
        return Schedule(warmup_s, all_times, np.full(len(all_times), STEP_IN_TURN, dtype=np.int64))


def _profile_times(parts: tuple[RatePart, ...], gap: Callable[[], float]) -> npt.NDArray[np.float64]:
    """The send times of ``parts``: each unit-rate arrival sent when the rate's integral reaches it.

    The first arrival is at the start: a constant rate R then sends exactly R in each second.
    """
    times: list[float] = []
    unit = 0.0  # the next arrival in the profile's own (unit-rate) time: the first at the start
    start, integral = 0.0, 0.0
    for part in parts:
        slope = (part.end_rate - part.start_rate) / part.duration_s
        end_integral = integral + part.sends
        while unit < end_integral:
            need = unit - integral
            if abs(slope) < 1e-12:
                offset = need / part.start_rate
            else:  # start_rate·τ + slope·τ²/2 = need
                root = math.sqrt(max(0.0, part.start_rate**2 + 2 * slope * need))
                offset = (root - part.start_rate) / slope
            times.append(start + min(offset, part.duration_s))
            unit += gap()
        start += part.duration_s
        integral = end_integral
    return np.asarray(times, dtype=np.float64)


def parse_ramp(text: str) -> RateProfile:
    """``--rate FROM..TO/DURATION`` (``100..1000/60s``): one stage ramped linearly.

    Raises:
        ConfigError: not that spelling, a negative rate, both rates 0, or no length.
    """
    rates, slash, length = text.partition("/")
    if not slash:
        raise ConfigError(
            f"--rate {text!r}: a ramp needs its length", "write FROM..TO/DURATION, e.g. --rate 100..1000/60s"
        )
    part = _part(rates, length, f"--rate {text!r}")
    return _checked(RateProfile((part,), "--rate FROM..TO/DURATION"))


def parse_stages(text: str) -> RateProfile:
    """``--stages RATE:DURATION,...`` (a rate may be a ramp ``FROM..TO``), or a file of one stage per line.

    Raises:
        ConfigError: a stage that is not ``RATE:DURATION`` (the file's line named), or none at all.
    """
    path = Path(text)
    if path.is_file():
        lines = path.read_text(encoding="utf-8").splitlines()
        items = [(f"{path}, line {n}", line.split("#")[0].strip()) for n, line in enumerate(lines, 1)]
        items = [(where, line) for where, line in items if line]
    elif "/" in text or text.endswith((".txt", ".csv")):
        raise ConfigError(f"--stages {text!r}: no such file", "give RATE:DURATION,... or a file of stages")
    else:
        items = [(f"stage {n}", item.strip()) for n, item in enumerate(text.split(","), 1)]
    parts = []
    for where, item in items:
        rate, colon, length = (item if ":" in item else re.sub(r"\s+", ":", item, count=1)).partition(":")
        if not colon:
            raise ConfigError(
                f"--stages {where}: {item!r} is not RATE:DURATION", "e.g. 100:30s,500:60s,100:30s"
            )
        parts.append(_part(rate, length, f"--stages {where}"))
    if not parts:
        raise ConfigError(f"--stages {text!r} has no stage", "e.g. 100:30s,500:60s,100:30s")
    return _checked(RateProfile(tuple(parts), "--stages"))


def _part(rates: str, length: str, where: str) -> RatePart:
    low, dots, high = rates.strip().partition("..")
    try:
        start = float(low)
        end = float(high) if dots else start
    except ValueError:
        raise ConfigError(f"{where}: {rates.strip()!r} is not a rate", "e.g. 500 or 100..1000") from None
    match = _DURATION.match(length)
    if match is None:
        raise ConfigError(f"{where}: {length.strip()!r} is not a duration", "e.g. 30s, 2m or 500ms")
    duration = float(match.group(1)) * _UNITS[match.group(2)]
    if start < 0 or end < 0 or not (math.isfinite(start) and math.isfinite(end)) or start == end == 0:
        raise ConfigError(f"{where}: rates are requests/s, not negative, not both 0", "e.g. 0..500 or 500")
    if duration <= 0:
        raise ConfigError(f"{where}: a stage lasts more than 0 s", "e.g. 30s")
    return RatePart(start, end, duration)


def _checked(profile: RateProfile) -> RateProfile:
    asked = sum(part.sends for part in profile.parts)
    if asked > MAX_SENDS:
        raise ConfigError(
            f"{profile.option} asks {asked:,.0f} sends: more than one schedule holds ({MAX_SENDS:,})",
            "shorten the stages or lower the rates",
        )
    return profile
