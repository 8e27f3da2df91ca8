"""Ramps and stages: their spelling, the windows that divide them, and the sends they lay out."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tritongen.errors import ConfigError
from tritongen.loadtest.shapes.base import STEP_IN_TURN
from tritongen.loadtest.shapes.rate_profile import parse_ramp, parse_stages


def _per_second(times: np.ndarray, seconds: int) -> list[int]:
    counts, _ = np.histogram(times, bins=np.arange(seconds + 1))
    return [int(c) for c in counts]


def test_stages_hold_each_rate_for_its_length() -> None:
    profile = parse_stages("100:2s,500:3s,50:1s")
    assert profile.duration_s == 6 and profile.mean_rate == pytest.approx((200 + 1500 + 50) / 6)
    assert [(s.label, s.start_s, s.duration_s, s.rate) for s in profile.stages()] == [
        ("1", 0, 2, "100"), ("2", 2, 3, "500"), ("3", 5, 1, "50"),
    ]  # fmt: skip
    schedule = profile.schedule(warmup_s=1.0, seed=0)
    measured = schedule.times_s[schedule.times_s >= 0]
    assert _per_second(measured, 6) == [100, 100, 500, 500, 500, 50]  # constant arrivals: exact counts
    warm = schedule.times_s[schedule.times_s < 0]
    assert len(warm) == 100 and warm.min() >= -1.0  # the warm-up at the first stage's rate
    assert set(schedule.steps.tolist()) == {STEP_IN_TURN}
    assert np.all(np.diff(schedule.times_s) >= 0)


def test_a_ramp_rises_linearly_and_keeps_poisson_arrivals_seeded() -> None:
    ramp = parse_ramp("100..900/4s").with_arrival("poisson", None)
    assert ramp.describe() == "ramp 100..900/s over 4 s" and ramp.mean_rate == 500
    times = ramp.schedule(0.0, seed=3).times_s
    expected = [200, 400, 600, 800]  # the rate's integral over each second
    for got, want in zip(_per_second(times, 4), expected, strict=True):
        assert abs(got - want) <= 4 * want**0.5  # a Poisson count: within four standard deviations
    assert np.array_equal(times, ramp.schedule(0.0, seed=3).times_s)
    assert not np.array_equal(times, ramp.schedule(0.0, seed=4).times_s)


def test_a_ramp_from_zero_and_down_to_zero() -> None:
    up = parse_ramp("0..200/2s").schedule(1.0, seed=0).times_s
    assert up.min() >= 0 and len(up) == 200  # nothing to warm up at rate 0
    assert _per_second(up, 2) == [50, 150]
    down = parse_stages("0..100:1s,100..0:1s").schedule(0.0, seed=0).times_s
    assert _per_second(down, 2) == [50, 50]


def test_a_gamma_stage_keeps_its_rate_and_cv() -> None:
    times = parse_stages("500:20s").with_arrival("gamma", 2.0).schedule(0.0, seed=7).times_s
    gaps = np.diff(times)
    assert len(times) / 20 == pytest.approx(500, rel=0.05)
    assert gaps.std(ddof=1) / gaps.mean() == pytest.approx(2.0, rel=0.05)


def test_windows_divide_every_stage_and_the_timeslice() -> None:
    assert parse_stages("100:30s,500:60s,100:30s").window_s(5.0) == 5.0
    assert parse_stages("100:7s,50:3s").window_s(5.0) == 1.0
    assert parse_stages("100:2.5s,50:2.5s").window_s(1.0) == pytest.approx(2.5 / 3)
    assert parse_stages("100:30s,500:60s").window_s(5.0, 4.0) == 2.0


def test_stages_from_a_file_name_their_line(tmp_path: Path) -> None:
    stages = tmp_path / "stages.txt"
    stages.write_text("# warm, peak, calm\n100 30s\n\n500:1m\n100..10:30s  # back down\n")
    assert [(s.rate, s.duration_s) for s in parse_stages(str(stages)).stages()] == [
        ("100", 30), ("500", 60), ("100..10", 30),
    ]  # fmt: skip
    stages.write_text("100:30s\nfast:10s\n")
    with pytest.raises(ConfigError, match=r"stages\.txt, line 2: 'fast' is not a rate"):
        parse_stages(str(stages))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("100:30s,500", r"stage 2: '500' is not RATE:DURATION"),
        ("100:soon", r"'soon' is not a duration"),
        ("-5:10s", "not negative"),
        ("0:10s", "not both 0"),
        ("100:0s", "lasts more than 0 s"),
        ("100:5000h", "more than one schedule holds"),
        ("missing/stages.txt", "no such file"),
    ],
)
def test_bad_stages_are_refused_in_one_line(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_stages(text)


@pytest.mark.parametrize(
    ("text", "message"),
    [("100..1000", "a ramp needs its length"), ("a..b/10s", "is not a rate"), ("0..0/10s", "not both 0")],
)
def test_bad_ramps_are_refused(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_ramp(text)
