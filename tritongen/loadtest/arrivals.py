"""How an open loop's sends arrive: ``--arrival constant|poisson|gamma:CV``, and the CV achieved.

Each user of an open loop draws the gaps between its sends from a seeded generator: a
constant 1/rate, exponential gaps (Poisson arrivals, CV 1), or gamma gaps of a given
coefficient of variation (shape 1/CV², the mean still 1/rate): above 1 the sends come in
bursts with quiet spells between, below 1 they are more regular than Poisson. A gamma
schedule is one process's: several processes' schedules added together would average their
bursts out, so a gamma run sends from one process.

What the run achieved is measured from the sends themselves (the gaps between those that
left on schedule, counted per window in :data:`ARRIVAL_GAPS`) and reported next to what was asked.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from tritongen.errors import ConfigError
from tritongen.io.loadgen_shared import ARRIVAL_GAPS

ARRIVALS = ("constant", "poisson", "gamma")
CV_DRIFT_WARNING = 0.10
"""A run whose achieved inter-arrival CV is further than this from the asked one says so."""
MIN_GAPS = 1000
"""Below this many gaps the achieved CV is too rough to warn about."""


def parse_arrival(text: str) -> tuple[str, float | None]:
    """``constant``, ``poisson`` or ``gamma:CV``: the process and the CV a gamma asks for.

    Raises:
        ConfigError: an unknown process, a gamma without its CV, or a CV that is not positive.
    """
    kind, _, cv_text = text.strip().lower().partition(":")
    if kind not in ARRIVALS:
        raise ConfigError(
            f"--arrival {text!r} is unknown", "use constant, poisson or gamma:CV (e.g. gamma:2)"
        )
    if kind != "gamma":
        if cv_text:
            raise ConfigError(f"--arrival {text!r}: only gamma takes a CV", f"use {kind}, or gamma:{cv_text}")
        return kind, None
    if not cv_text:
        raise ConfigError(
            "--arrival gamma needs its CV", "give it as gamma:CV, e.g. gamma:2 (above 1: bursts)"
        )
    try:
        cv = float(cv_text)
    except ValueError:
        cv = math.nan
    if not (cv > 0 and math.isfinite(cv)):
        raise ConfigError(f"--arrival {text!r}: the CV must be a positive number", "e.g. gamma:2")
    return kind, cv


def asked_cv(arrival: str, cv: float | None) -> float:
    """The CV of the gaps an arrival process asks for: 0 constant, 1 Poisson, the gamma's own."""
    if arrival == "gamma":
        return cv if cv is not None else 1.0
    return 1.0 if arrival == "poisson" else 0.0


def achieved_cv(counts: Mapping[str, int]) -> float | None:
    """The coefficient of variation of the gaps counted in ``counts`` (None with fewer than 2 gaps)."""
    n_name, sum_name, squares_name = ARRIVAL_GAPS
    n, total, squares = counts.get(n_name, 0), counts.get(sum_name, 0), counts.get(squares_name, 0)
    if n < 2 or total <= 0:
        return None
    mean = total / n
    variance = max(0.0, squares / n - mean * mean) * n / (n - 1)
    return math.sqrt(variance) / mean


def cv_warning(arrival: str, cv: float | None, achieved: float | None, gaps: int) -> str | None:
    """One line when the sends' CV drifted more than 10% from the one asked (a Poisson or gamma run)."""
    if arrival == "constant" or achieved is None or gaps < MIN_GAPS:
        return None
    asked = asked_cv(arrival, cv)
    if abs(achieved - asked) <= CV_DRIFT_WARNING * asked:
        return None
    return (
        f"the gaps between sends had a CV of {achieved:.2f} against the {asked:g} asked "
        f"({arrival}): the generator did not keep the schedule's shape"
    )
