"""Open-loop arrivals: ``--arrival`` read in one line, the gaps drawn, the achieved CV from counters."""

from __future__ import annotations

import random
import statistics
from dataclasses import dataclass

import pytest
from tritongen.loadtests.tritonload.arrivals import BLOCK, arrival_gaps

from tritongen.errors import ConfigError
from tritongen.io.loadgen_shared import ARRIVAL_GAPS
from tritongen.loadtest.arrivals import achieved_cv, asked_cv, cv_warning, parse_arrival


@dataclass(frozen=True)
class _Options:
    user_rate: float
    arrival: str
    arrival_cv: float = 1.0


@pytest.mark.parametrize(
    ("text", "parsed"),
    [("constant", ("constant", None)), ("Poisson", ("poisson", None)), ("gamma:2", ("gamma", 2.0)),
     ("gamma:0.5", ("gamma", 0.5))],
)  # fmt: skip
def test_arrival_is_read(text: str, parsed: tuple[str, float | None]) -> None:
    assert parse_arrival(text) == parsed


@pytest.mark.parametrize(
    ("text", "message"),
    [("bursty", "--arrival 'bursty' is unknown"), ("gamma", "--arrival gamma needs its CV"),
     ("gamma:0", "the CV must be a positive number"), ("gamma:x", "the CV must be a positive number"),
     ("poisson:2", "only gamma takes a CV"), ("gamma:inf", "the CV must be a positive number")],
)  # fmt: skip
def test_a_bad_arrival_is_refused_in_one_line(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_arrival(text)


@pytest.mark.parametrize(
    ("arrival", "cv"), [("constant", 0.0), ("poisson", 1.0), ("gamma", 2.0), ("gamma", 0.5)]
)
def test_the_drawn_gaps_keep_the_rate_and_the_cv(arrival: str, cv: float) -> None:
    draw = arrival_gaps(_Options(user_rate=500.0, arrival=arrival, arrival_cv=cv or 1.0), random.Random(11))
    gaps = [draw() for _ in range(50_000)]
    mean = statistics.fmean(gaps)
    assert mean == pytest.approx(1 / 500, rel=0.03)
    assert statistics.stdev(gaps) / mean == pytest.approx(cv, abs=0.05 * max(cv, 1.0))
    assert cv == asked_cv(arrival, cv if arrival == "gamma" else None)


def test_every_block_of_gamma_gaps_has_the_mean_and_cv_asked() -> None:
    """A 20 s run at 500/s spans 10 blocks: its rate and CV hold to well within 5%, whatever the seed."""
    for seed in range(5):
        draw = arrival_gaps(_Options(user_rate=500.0, arrival="gamma", arrival_cv=2.0), random.Random(seed))
        gaps = [draw() for _ in range(10 * BLOCK)]
        for start in range(0, len(gaps), BLOCK):
            block = gaps[start : start + BLOCK]
            assert statistics.fmean(block) == pytest.approx(1 / 500, rel=1e-6)
            assert statistics.stdev(block) / statistics.fmean(block) == pytest.approx(2.0, rel=1e-3)
        span = gaps[BLOCK // 2 : -BLOCK // 2]  # a measured span cuts blocks at its edges
        assert statistics.stdev(span) / statistics.fmean(span) == pytest.approx(2.0, rel=0.03)
        assert min(gaps) >= 0


def test_the_achieved_cv_comes_from_the_window_counters() -> None:
    gaps_us = [1000, 3000, 1000, 3000]  # mean 2000, sample stdev 1154.7
    n, total, squares = ARRIVAL_GAPS
    counts = {n: len(gaps_us), total: sum(gaps_us), squares: sum(g * g for g in gaps_us)}
    assert achieved_cv(counts) == pytest.approx(statistics.stdev(gaps_us) / 2000)
    assert achieved_cv({n: 1, total: 5, squares: 25}) is None and achieved_cv({}) is None


def test_a_cv_that_drifted_is_flagged_once_there_are_enough_gaps() -> None:
    assert cv_warning("gamma", 2.0, 2.1, 5000) is None
    warning = cv_warning("gamma", 2.0, 1.5, 5000)
    assert warning is not None and "CV of 1.50 against the 2 asked" in warning
    assert cv_warning("gamma", 2.0, 1.5, 100) is None  # too few gaps to tell
    assert cv_warning("constant", None, 0.3, 5000) is None  # constant asks 0: a ratio means nothing
