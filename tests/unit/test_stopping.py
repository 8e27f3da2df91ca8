"""Rounds that stop when the answer is known keep their error rate: a simulation with the measured noise.

The noise model is this machine's quiet-machine floor (``bench/results/noise.json``): throughput
varies by 4.8% (CV) from round to round, on each contender apart, and every round also shifts
both contenders alike (drift, which the paired ratio cancels). Seeded: the same draws on every
machine and run.
"""

from __future__ import annotations

import numpy as np
import pytest

from tritongen.errors import ConfigError
from tritongen.intervals import paired_ratio
from tritongen.stopping import (
    DEFAULT_MAX_ROUNDS,
    FUTILITY_FROM,
    MIN_ROUNDS,
    Side,
    Verdict,
    check_stopping,
    judge,
    project,
    spent_confidence,
)

CV = 0.048
"""Throughput's coefficient of variation per round on a quiet machine (measured, bench/results/noise.json)."""
SIMULATIONS = 400


def _sequential(
    rng: np.random.Generator, truth: float, max_rounds: int = DEFAULT_MAX_ROUNDS, side: Side = "both"
) -> Verdict:
    """One contender pair measured round by round until the verdict is in, or the cap."""
    return _rounds_to_verdict(rng, truth, max_rounds, side)[0]


def _rounds_to_verdict(
    rng: np.random.Generator, truth: float, max_rounds: int = DEFAULT_MAX_ROUNDS, side: Side = "both"
) -> tuple[Verdict, int]:
    """The verdict of one pair measured round by round, and the rounds it took."""
    a: list[float | None] = []
    b: list[float | None] = []
    verdict = judge(a, b)
    for number in range(1, max_rounds + 1):
        drift = rng.normal(0.0, 0.05)  # both alike: cancels in the ratio
        b.append(1000.0 * np.exp(drift + rng.normal(0.0, CV)))
        a.append(1000.0 * truth * np.exp(drift + rng.normal(0.0, CV)))
        # as compare (both sides) and tune (can the candidate beat the current config?) judge
        verdict = judge(a, b, final=number == max_rounds, last=max_rounds, side=side)
        if verdict.decision is not None:
            return verdict, number
    return verdict, max_rounds


def test_the_spent_levels_add_up_to_the_error_rate() -> None:
    alphas = [1.0 - spent_confidence(n, 0.95) for n in range(MIN_ROUNDS, 100_000)]
    assert sum(alphas) == pytest.approx(0.05, rel=1e-4) and sum(alphas) < 0.05
    for cap in (MIN_ROUNDS, 8, DEFAULT_MAX_ROUNDS):  # a cap: equal shares of the looks up to it
        shares = [1.0 - spent_confidence(n, 0.95, last=cap) for n in range(MIN_ROUNDS, cap + 1)]
        assert sum(shares) == pytest.approx(0.05) and len(set(shares)) == 1


def test_a_tie_is_called_different_in_at_most_five_percent_of_runs() -> None:
    rng = np.random.default_rng(20261201)
    verdicts = [_sequential(rng, 1.0) for _ in range(SIMULATIONS)]
    different = sum(v.decision == "different" for v in verdicts) / SIMULATIONS
    assert different <= 0.05
    # The others are ties, unresolvable or undecided: each with an interval that holds 1 (the truth).
    rest = [v for v in verdicts if v.decision != "different"]
    assert all(v.ratio is not None and v.ratio.low is not None and v.ratio.low <= 1.0 <= (v.ratio.high or 0)
               for v in rest)  # fmt: skip


def test_a_ten_percent_difference_is_found_in_at_least_ninety_percent() -> None:
    rng = np.random.default_rng(7)
    for truth in (1.10, 1 / 1.10):
        verdicts = [_sequential(rng, truth) for _ in range(SIMULATIONS)]
        found = [v for v in verdicts if v.decision == "different"]
        assert len(found) / SIMULATIONS >= 0.90
        assert all((v.ratio is not None and (v.ratio.estimate > 1) == (truth > 1)) for v in found)


def test_a_naive_recheck_would_not_keep_the_rate() -> None:
    """Why the levels are spent: a 95% interval rechecked after every round calls many more ties."""
    from tritongen.intervals import paired_ratio

    rng = np.random.default_rng(3)
    naive = 0
    for _ in range(SIMULATIONS):
        a: list[float | None] = []
        b: list[float | None] = []
        for _round in range(DEFAULT_MAX_ROUNDS):
            b.append(1000.0 * np.exp(rng.normal(0.0, CV)))
            a.append(1000.0 * np.exp(rng.normal(0.0, CV)))
            ratio = paired_ratio(a, b) if len(a) >= MIN_ROUNDS else None
            if ratio is not None and ratio.significant:
                naive += 1
                break
    assert naive / SIMULATIONS > 0.10


def test_verdict_texts_and_refusals() -> None:
    verdict = judge([100.0, 101.0, 99.0, 100.5], [100.0, 100.5, 99.5, 100.0])
    assert verdict.decision == "equivalent" and verdict.text().startswith("equivalent within 5%: 1.00×")
    assert judge([1.0], [1.0]).decision is None and judge([1.0], [1.0], final=True).decision == "undecided"
    with pytest.raises(ConfigError, match="--max-rounds 1"):
        check_stopping(1, 0.05)
    with pytest.raises(ConfigError, match="--equivalence 60% is outside"):
        check_stopping(10, 0.6)


def test_equal_shares_within_a_cap_find_more_than_the_uncapped_series() -> None:
    """Why the cap's looks share alike: a 0.87× pair at a 10% spread per round, at most 8 rounds."""
    rng = np.random.default_rng(11)
    found = {"capped": 0, "uncapped": 0}
    for _ in range(SIMULATIONS):
        logs = rng.normal(np.log(0.87), 0.10, 8)
        a = [float(np.exp(x)) for x in logs]
        b = [1.0] * len(a)
        for name, last in (("capped", 8), ("uncapped", None)):
            found[name] += any(
                judge(a[:n], b[:n], last=last).decision == "different" for n in range(MIN_ROUNDS, 9)
            )
    assert found["capped"] > 1.2 * found["uncapped"], found


def test_a_tie_the_cap_cannot_resolve_stops_early() -> None:
    """With this machine's spread a true tie can never be called equivalent within 5% by round 20:
    waiting for the cap only spent rounds. Projected from the rounds so far, it stops early instead."""
    rng = np.random.default_rng(20261204)
    outcomes = [_rounds_to_verdict(rng, 1.0) for _ in range(SIMULATIONS)]
    rounds = [n for _, n in outcomes]
    assert float(np.median(rounds)) <= 8
    stopped = [v for v, _ in outcomes if v.decision == "unresolvable"]
    assert len(stopped) >= 0.5 * SIMULATIONS
    assert all(v.resolvable is not None and 0.0 < v.resolvable < 0.2 for v in stopped)
    assert stopped[0].text().startswith("no difference this machine can resolve (±")


def test_a_candidate_that_cannot_beat_its_reference_is_dropped_within_a_few_rounds() -> None:
    """Tune asks only whether a finalist beats the current config: near ties end in a few rounds,
    a 10% better candidate is still found."""
    rng = np.random.default_rng(5)
    for truth in (0.94, 1.0, 1.01):
        outcomes = [_rounds_to_verdict(rng, truth, side="greater") for _ in range(SIMULATIONS)]
        assert float(np.median([n for _, n in outcomes])) <= FUTILITY_FROM["greater"] + 1
        assert sum(v.decision == "different" and (v.ratio is not None and v.ratio.estimate > 1)
                   for v, _ in outcomes) <= 0.05 * SIMULATIONS  # fmt: skip
    better = [_sequential(rng, 1.10, side="greater") for _ in range(SIMULATIONS)]
    found = [v for v in better if v.decision == "different" and v.ratio is not None and v.ratio.estimate > 1]
    assert len(found) / SIMULATIONS >= 0.90


def test_the_projection_tells_a_resolvable_pair_from_one_that_is_not() -> None:
    wide = paired_ratio([1.3, 0.8, 1.1, 0.9], [1.0] * 4)  # ±20% a round: no cap of 20 resolves a tie
    clear = paired_ratio([1.21, 1.19, 1.2, 1.22], [1.0] * 4)
    assert wide is not None and clear is not None
    assert project(wide, DEFAULT_MAX_ROUNDS, 0.95, 0.05).chance < 0.05
    assert project(clear, DEFAULT_MAX_ROUNDS, 0.95, 0.05).chance > 0.95
    assert judge([1.3, 0.8, 1.1, 0.9], [1.0] * 4, last=DEFAULT_MAX_ROUNDS).decision == "unresolvable"
    # Before the first look that may stop it, and without a cap, it stays open.
    assert judge([1.3, 0.8, 1.1], [1.0] * 3, last=DEFAULT_MAX_ROUNDS).decision is None
    assert judge([1.3, 0.8, 1.1, 0.9], [1.0] * 4).decision is None
