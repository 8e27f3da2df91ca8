"""The pure logic of ``tritongen tune``: space, objective and strategies, with simulated servers."""

from __future__ import annotations

import json
import math
import random
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tritongen.client.address import ServerAddress
from tritongen.errors import ConfigError
from tritongen.loadtest.find_max import MaxSearch, SloObjective
from tritongen.loadtest.result import RunResult
from tritongen.loadtest.rounds import Rounds
from tritongen.loadtest.shapes.rate_profile import parse_stages
from tritongen.loadtest.spec import RUN_OVERHEAD_S, LoadSpec
from tritongen.tune.confirm import Confirmation, Entry, judge
from tritongen.tune.objective import (
    FAILED_OBJECTIVE,
    Measurement,
    best,
    feasible,
    gain,
    objective,
    pareto_front,
)
from tritongen.tune.report import TuneReport
from tritongen.tune.request import RELOAD_S, TuneRequest, check_claim, claim_directory, plan
from tritongen.tune.runner import _finalists
from tritongen.tune.space import Candidate, Current, SearchSpace, parse_preferred_sets
from tritongen.tune.strategy import AdaptiveSearch, GridSearch, SearchStrategy, make_strategy
from tritongen.tune.trial import TrialRecord, judged_by_latency

SPACE = SearchSpace(
    max_batch_sizes=(8, 16, 32),
    preferred_batch_sizes=parse_preferred_sets("4,8;8,16;none"),
    max_queue_delays_us=(0, 100, 500, 1000, 2000),
    instance_counts=(1, 2),
)
WIDE_SPACE = SearchSpace(
    max_batch_sizes=(8, 16, 32, 64),
    preferred_batch_sizes=parse_preferred_sets("4,8;8,16;16,32;none"),
    max_queue_delays_us=(0, 100, 500, 1000, 2000),
    instance_counts=(1, 2, 4),
)


# --- parsing and the space ---------------------------------------------------------------


def test_parse_preferred_sets() -> None:
    assert parse_preferred_sets("4,8;8,16;none") == ((4, 8), (8, 16), None)
    assert parse_preferred_sets(" 2 ; AUTO ") == ((2,), None)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty set"),
        ("4,8;;none", "empty set"),
        ("4,x", "not a list of integers"),
        ("4,,8", "not a list of integers"),
        ("0,8", "below 1"),
        ("4,8;none;4,8", "given twice"),
        ("none;auto", "given twice"),
    ],
)
def test_parse_preferred_sets_errors(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_preferred_sets(text)


def test_key_and_json_round_trip() -> None:
    c = Candidate(16, (4, 8), 500, 2)
    assert c.key == "mb16-pb4.8-qd500-i2"
    assert Candidate(32, None, 0, 1).key == "mb32-pbauto-qd0-i1"
    assert c.to_json() == {
        "max_batch_size": 16,
        "preferred_batch_sizes": [4, 8],
        "max_queue_delay_us": 500,
        "instances": 2,
    }
    assert Candidate.from_json(c.to_json()) == c
    auto = Candidate(8, None, 100, 1)
    assert auto.to_json()["preferred_batch_sizes"] is None
    assert Candidate.from_json(auto.to_json()) == auto
    keys = {c.key for c in WIDE_SPACE.candidates()}
    assert len(keys) == WIDE_SPACE.size
    assert all("/" not in k and " " not in k for k in keys)


def test_candidate_empty_preferred_is_auto_and_sorts() -> None:
    assert Candidate(8, (), 0, 1) == Candidate(8, None, 0, 1)
    ordered = sorted([Candidate(8, (4,), 0, 1), Candidate(8, None, 0, 1), Candidate(4, (2,), 9, 1)])
    assert ordered == [Candidate(4, (2,), 9, 1), Candidate(8, None, 0, 1), Candidate(8, (4,), 0, 1)]


@pytest.mark.parametrize(
    "data",
    [
        {},
        {"max_batch_size": 8, "preferred_batch_sizes": None, "max_queue_delay_us": 0},
        {"max_batch_size": "8", "preferred_batch_sizes": None, "max_queue_delay_us": 0, "instances": 1},
        {"max_batch_size": 8, "preferred_batch_sizes": [1.5], "max_queue_delay_us": 0, "instances": 1},
    ],
)
def test_candidate_from_bad_json(data: dict[str, object]) -> None:
    with pytest.raises(ConfigError, match="not a tune candidate"):
        Candidate.from_json(data)


def test_candidate_options() -> None:
    options = Candidate(16, None, 500, 2).to_options()
    assert options.dynamic_batching is True
    assert options.preferred_batch_sizes == ()
    assert options.max_queue_delay_us == 500
    assert options.instances == 2
    options.check()
    assert Candidate(0, None, 0, 3).to_options().dynamic_batching is False


def test_the_baseline_is_the_current_config_unchanged() -> None:
    from tritongen.triton.model_config import DynamicBatching, InstanceGroup, ModelConfig
    from tritongen.tune.trial import candidate_config

    plain = ModelConfig(name="m", backend="python", max_batch_size=16)
    off = Current.of(plain)
    assert off == Current(16, dynamic_batching=False)
    assert off.key == "current-mb16-nodb-i1"
    assert off.to_json() == {
        "current": True, "max_batch_size": 16, "dynamic_batching": False, "preferred_batch_sizes": None,
        "max_queue_delay_us": 0, "instances": 1,
    }  # fmt: skip
    batched = plain.model_copy(
        update={
            "dynamic_batching": DynamicBatching(
                preferred_batch_size=[4, 8], max_queue_delay_microseconds=500
            ),
            "instance_group": [InstanceGroup(count=2, kind="KIND_CPU")],
        }
    )
    on = Current.of(batched)
    assert on.key == "current-mb16-pb4.8-qd500-i2"
    assert Current.of(batched.model_copy(update={"dynamic_batching": DynamicBatching()})).key == (
        "current-mb16-pbauto-qd0-i2"
    )
    # Rendered as it is: nothing of the model's config changes.
    assert candidate_config(batched, on, "local") is batched
    assert on.to_options() == type(on.to_options())()


def test_grid_order_and_size() -> None:
    candidates = SPACE.candidates()
    # 3 x 3 x 5 x 2 = 90, less 8,16 under max batch 8 (5 delays x 2 instance counts).
    assert SPACE.size == len(candidates) == 80
    assert len(SPACE.skipped()) == 10
    assert candidates[:3] == [
        Candidate(8, (4, 8), 0, 1),
        Candidate(8, (4, 8), 0, 2),
        Candidate(8, (4, 8), 100, 1),
    ]
    assert candidates[10] == Candidate(8, None, 0, 1)
    assert candidates[-1] == Candidate(32, None, 2000, 2)
    assert len(set(candidates)) == len(candidates)


def test_skipped_notes() -> None:
    notes = {c.key: reason for c, reason in SPACE.skipped()}
    assert notes["mb8-pb8.16-qd0-i1"] == "preferred batch sizes 16 exceed max_batch_size 8"


@pytest.mark.parametrize(
    ("candidate", "message"),
    [
        (Candidate(8, (4, 16), 0, 1), "16 exceed max_batch_size 8"),
        (Candidate(8, (4, 4), 0, 1), "repeat a size"),
        (Candidate(8, (8, 4), 0, 1), "not increasing"),
        (Candidate(0, (4,), 0, 1), "need max_batch_size above 0"),
        (Candidate(0, None, 100, 1), "queue delay needs max_batch_size above 0"),
        (Candidate(8, None, -1, 1), "negative"),
        (Candidate(8, None, 0, 0), "below 1"),
        (Candidate(8, (0, 4), 0, 1), "size below 1"),
    ],
)
def test_legal_notes(candidate: Candidate, message: str) -> None:
    reason = SPACE.legal(candidate)
    assert reason is not None and message in reason


def test_legal_candidates() -> None:
    assert SPACE.legal(Candidate(8, (4, 8), 2000, 2)) is None
    assert SPACE.legal(Candidate(0, None, 0, 1)) is None


@pytest.mark.parametrize(
    ("space", "message"),
    [
        (SearchSpace((), (None,), (0,), (1,)), "--max-batch-size has no values"),
        (SearchSpace((8, 8), (None,), (0,), (1,)), "repeats"),
        (SearchSpace((8,), (None, ()), (0,), (1,)), "repeats"),
        (SearchSpace((-8,), (None,), (0,), (1,)), "below 0"),
        (SearchSpace((8,), (None,), (-1,), (1,)), "below 0"),
        (SearchSpace((8,), (None,), (0,), (0,)), "below 1"),
        (SearchSpace((8,), ((8, 4),), (0,), (1,)), "not strictly increasing"),
        (SearchSpace((8,), ((0, 4),), (0,), (1,)), "below 1"),
        (SearchSpace((8,), ((16,),), (0,), (1,)), "no legal combination"),
    ],
)
def test_space_check(space: SearchSpace, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        space.check()


def test_space_check_accepts() -> None:
    SPACE.check()
    WIDE_SPACE.check()


# --- objective ---------------------------------------------------------------------------


def test_feasible_and_objective() -> None:
    ok = Measurement(1000.0, 4_000.0)
    slow = Measurement(5000.0, 6_000.0)
    slower = Measurement(5000.0, 9_000.0)
    failed = Measurement(0.0, None, failed=True)
    assert feasible(ok, 5.0) and not feasible(slow, 5.0) and not feasible(failed, 5.0)
    assert feasible(slow, None)
    assert not feasible(Measurement(10.0, None), None)
    assert objective(ok, 5.0) == 1000.0
    assert objective(slow, 5.0) == pytest.approx(-0.2)
    assert objective(slow, 5.0) > objective(slower, 5.0) > objective(failed, 5.0) == FAILED_OBJECTIVE
    assert objective(Measurement(0.0, 1.0), 5.0) >= 0.0 > objective(slower, 5.0)


def test_memory_cap() -> None:
    m = Measurement(100.0, 1000.0, memory_bytes=300 * 1024 * 1024)
    assert feasible(m, 5.0, max_memory_mb=512)
    assert not feasible(m, 5.0, max_memory_mb=200)
    assert objective(m, 5.0, max_memory_mb=200) == pytest.approx(-0.5)
    assert feasible(Measurement(100.0, 1000.0), 5.0, max_memory_mb=1)  # not measured: not held against it


def test_best_and_gain() -> None:
    results = [
        (Candidate(8, None, 0, 1), Measurement(900.0, 3000.0)),
        (Candidate(16, None, 0, 1), Measurement(1200.0, 4900.0)),
        (Candidate(16, None, 0, 2), Measurement(1200.0, 4500.0)),
        (Candidate(32, None, 0, 1), Measurement(3000.0, 9000.0)),
        (Candidate(32, None, 0, 2), Measurement(9000.0, None, failed=True)),
    ]
    found = best(results, 5.0)
    assert found is not None and found[0] == Candidate(16, None, 0, 2)
    assert best(results, 1.0) is None
    assert best([], 5.0) is None
    no_slo = best(results, None)
    assert no_slo is not None and no_slo[0] == Candidate(32, None, 0, 1)
    assert gain(found[1], Measurement(400.0, 2000.0)) == pytest.approx(3.0)
    assert gain(found[1], Measurement(0.0, None, failed=True)) is None
    assert gain(None, Measurement(400.0, 2000.0)) is None


def test_under_a_load_that_sets_its_rate_the_lowest_p99_is_best() -> None:
    """A trace's throughput is the trace's: a config is better by its P99, not by noise in infer/s."""
    results = [
        (Candidate(8, None, 0, 1), Measurement(64.1, 240_000.0, by_latency=True)),
        (Candidate(8, None, 1000, 1), Measurement(63.9, 35_000.0, by_latency=True)),
        (Candidate(8, None, 5000, 1), Measurement(64.0, 38_000.0, by_latency=True)),
    ]
    found = best(results, None)
    assert found is not None and found[0] == Candidate(8, None, 1000, 1)
    assert best(results, 30.0) is None  # none within a 30 ms P99
    fast, slow = results[1][1], results[0][1]
    assert objective(fast, None) == pytest.approx(1e6 / 35_000.0)
    assert objective(fast, None) > objective(slow, None) > 0.0
    assert objective(slow, 100.0) == pytest.approx(-1.4)  # 240 ms: 140% over a 100 ms SLO, as by throughput


def test_pareto_front() -> None:
    a = (Candidate(8, None, 0, 1), Measurement(1000.0, 1000.0))
    b = (Candidate(16, None, 0, 1), Measurement(2000.0, 3000.0))
    dominated = (Candidate(16, None, 0, 2), Measurement(1500.0, 3500.0))
    tie = (Candidate(32, None, 0, 1), Measurement(2000.0, 3000.0))
    failed = (Candidate(32, None, 0, 2), Measurement(9000.0, 1.0, failed=True))
    fastest = (Candidate(32, None, 100, 1), Measurement(4000.0, 8000.0))
    assert pareto_front([dominated, fastest, b, failed, a, tie]) == [a, b, tie, fastest]
    assert pareto_front([]) == []


# --- strategies --------------------------------------------------------------------------


def test_make_strategy() -> None:
    assert isinstance(make_strategy("grid", SPACE, None), GridSearch)
    adaptive = make_strategy("adaptive", SPACE, None, seed=3, slo_p99_ms=5.0)
    assert isinstance(adaptive, AdaptiveSearch)
    assert adaptive.max_trials == 24  # 30 % of 80
    assert make_strategy("adaptive", SearchSpace((8,), (None,), (0, 100), (1,)), None).max_trials == 2
    with pytest.raises(ConfigError, match="unknown search strategy"):
        make_strategy("random", SPACE, None)
    with pytest.raises(ConfigError, match="below 1"):
        make_strategy("grid", SPACE, 0)


def test_grid_strategy_order_and_cap() -> None:
    assert _run(make_strategy("grid", SPACE, None), lambda c: Measurement(1.0, 1.0)) == SPACE.candidates()
    capped = _run(make_strategy("grid", SPACE, 7), lambda c: Measurement(1.0, 1.0))
    assert capped == SPACE.candidates()[:7]


def test_adaptive_starts_at_the_sensible_point() -> None:
    strategy = make_strategy("adaptive", SPACE, None, slo_p99_ms=5.0)
    assert strategy.next_candidate([]) == Candidate(32, None, 500, 1)


def test_adaptive_resumes_from_history() -> None:
    surface = SURFACES[0]
    measure = _measure(surface, seed=0)
    strategy = make_strategy("adaptive", SPACE, None, slo_p99_ms=None)
    full = _run(strategy, measure)
    history = [(c, measure(c)) for c in full[:5]]
    assert _run(strategy, measure, history) == full


def test_adaptive_survives_failures() -> None:
    everything_fails = _run(
        make_strategy("adaptive", SPACE, None, slo_p99_ms=5.0), lambda c: Measurement(0.0, None, failed=True)
    )
    assert 1 <= len(everything_fails) <= 24
    # Failing large configs: the search moves away from them and finds a feasible point.
    measure = _measure(SURFACES[0], seed=1)

    def oom(c: Candidate) -> Measurement:
        return Measurement(0.0, None, failed=True) if c.max_batch_size * c.instances > 16 else measure(c)

    tried = _run(make_strategy("adaptive", SPACE, None), oom)
    found = best([(c, oom(c)) for c in tried], None)
    assert found is not None


# --- simulation --------------------------------------------------------------------------


@dataclass(frozen=True)
class Surface:
    """A synthetic server with dynamic batching, driven at a fixed concurrency."""

    name: str
    overhead_us: float  # fixed cost per executed batch
    per_item_us: float  # cost per request in a batch
    concurrency: int  # requests in flight from the load generator
    cores: int  # instances beyond this contend for the same cores
    contention: float  # slowdown per instance above ``cores``
    fill_us: float  # queue-delay time constant for filling a batch
    aligned_bonus: float  # speed-up when a batch is exactly a preferred size
    noise: float  # relative noise on throughput and P99
    memory_limit: int = 10**9  # max batch x instances above this fails to load


SURFACES = (
    Surface("gpu-like", 900.0, 40.0, 64, 2, 0.5, 400.0, 0.08, 0.03),
    Surface("cpu-bound", 150.0, 120.0, 32, 1, 0.6, 250.0, 0.03, 0.03),
    Surface("overhead-heavy", 3000.0, 15.0, 48, 2, 0.3, 900.0, 0.05, 0.02),
    Surface("small-memory", 700.0, 60.0, 64, 2, 0.4, 500.0, 0.06, 0.03, memory_limit=32),
)


def simulate(surface: Surface, c: Candidate, rng: random.Random) -> Measurement:
    """Throughput and P99 of ``c`` on ``surface``; batching trades latency for throughput."""
    if c.max_batch_size * c.instances > surface.memory_limit:
        return Measurement(0.0, None, failed=True)
    n = c.instances
    ceiling = max(1.0, min(c.max_batch_size, surface.concurrency / n))
    start = max(1.0, 0.3 * ceiling)  # what is queued already with no delay
    batch = start + (ceiling - start) * (1.0 - math.exp(-c.max_queue_delay_us / surface.fill_us))
    wait_us = 0.7 * c.max_queue_delay_us
    speed = 1.0
    sizes = c.preferred_batch_sizes
    if sizes:
        reached = [s for s in sizes if s <= batch]
        if reached:  # batches go out at a preferred size without waiting out the whole delay
            batch -= 0.3 * (batch - max(reached))
            wait_us *= 0.75
            speed += surface.aligned_bonus
    slowdown = 1.0 + surface.contention * max(0, n - surface.cores)
    service_us = (surface.overhead_us + surface.per_item_us * batch) * slowdown / speed
    parallel = min(n, surface.cores) + 0.3 * max(0, n - surface.cores)
    infer_per_s = batch / service_us * 1e6 * parallel
    p99_us = 2.2 * service_us + wait_us + 0.2 * (surface.concurrency / n) * surface.per_item_us
    return Measurement(
        infer_per_s * rng.gauss(1.0, surface.noise),
        p99_us * abs(rng.gauss(1.0, surface.noise)),
        memory_bytes=c.max_batch_size * c.instances * 2**20,
    )


def _measure(surface: Surface, seed: int) -> Callable[[Candidate], Measurement]:
    """Seeded per candidate, so both strategies see the same measurement for the same config."""

    def measure(c: Candidate) -> Measurement:
        return simulate(surface, c, random.Random(f"{surface.name}:{seed}:{c.key}"))

    return measure


def _run(
    strategy: SearchStrategy,
    measure: Callable[[Candidate], Measurement],
    history: list[tuple[Candidate, Measurement]] | None = None,
) -> list[Candidate]:
    trials = list(history or [])
    for _ in range(10_000):
        c = strategy.next_candidate(trials)
        if c is None:
            return [c for c, _ in trials]
        trials.append((c, measure(c)))
    raise AssertionError("the strategy did not terminate")


def _slo_levels(surface: Surface, space: SearchSpace) -> list[float | None]:
    """SLOs at quartiles of the noise-free P99s of the grid (so a fair share meets them), and none."""
    quiet = replace(surface, noise=0.0)
    p99s = sorted(p for c in space.candidates() if (p := simulate(quiet, c, random.Random(0)).p99_us))
    return [p99s[int(q * (len(p99s) - 1))] / 1000.0 for q in (0.25, 0.5, 0.75)] + [None]


CASES = [
    (surface, space_name, slo, seed)
    for surface in SURFACES
    for space_name, space in (("space", SPACE), ("wide", WIDE_SPACE))
    for slo in _slo_levels(surface, space)
    for seed in (0, 1, 2)
]


def compare(surface: Surface, space: SearchSpace, slo: float | None, seed: int) -> tuple[int, int, float]:
    """Trials of grid and adaptive and the ratio of their best objectives."""
    measure = _measure(surface, seed)
    grid = _run(make_strategy("grid", space, None, seed), measure)
    adaptive = _run(make_strategy("adaptive", space, None, seed, slo_p99_ms=slo), measure)
    grid_best = max(objective(measure(c), slo) for c in grid)
    adaptive_best = max(objective(measure(c), slo) for c in adaptive)
    assert grid_best > 0
    return len(grid), len(adaptive), adaptive_best / grid_best


@pytest.mark.parametrize(
    ("surface", "space_name", "slo", "seed"),
    CASES,
    ids=[
        f"{s.name}-{n}-slo{'none' if slo is None else f'{slo:.2f}'}-seed{seed}" for s, n, slo, seed in CASES
    ],
)
def test_adaptive_matches_grid(surface: Surface, space_name: str, slo: float | None, seed: int) -> None:
    space = SPACE if space_name == "space" else WIDE_SPACE
    grid_trials, adaptive_trials, ratio = compare(surface, space, slo, seed)
    assert grid_trials == space.size
    assert adaptive_trials <= 0.3 * grid_trials
    assert ratio >= 0.95


# --- properties --------------------------------------------------------------------------

_measurements = st.one_of(
    st.builds(
        Measurement,
        infer_per_s=st.floats(0, 1e5, allow_nan=False),
        p99_us=st.one_of(st.none(), st.floats(1, 1e6, allow_nan=False)),
    ),
    st.just(Measurement(0.0, None, failed=True)),
)


@st.composite
def _spaces(draw: st.DrawFn) -> SearchSpace:
    batches = draw(st.lists(st.integers(0, 64), min_size=1, max_size=4, unique=True))
    sets = draw(
        st.lists(
            st.one_of(
                st.none(), st.lists(st.integers(1, 64), min_size=1, max_size=3, unique=True).map(sorted)
            ),
            min_size=1,
            max_size=4,
        )
    )
    preferred = tuple(dict.fromkeys(None if s is None else tuple(s) for s in sets))
    delays = draw(st.lists(st.integers(0, 5000), min_size=1, max_size=4, unique=True))
    counts = draw(st.lists(st.integers(1, 4), min_size=1, max_size=3, unique=True))
    return SearchSpace(tuple(batches), preferred, tuple(delays), tuple(counts))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    space=_spaces(),
    name=st.sampled_from(["grid", "adaptive"]),
    max_trials=st.one_of(st.none(), st.integers(1, 40)),
    seed=st.integers(0, 3),
    slo=st.one_of(st.none(), st.floats(0.01, 100)),
    data=st.data(),
)
def test_strategies_propose_legal_new_candidates_and_stop(
    space: SearchSpace,
    name: str,
    max_trials: int | None,
    seed: int,
    slo: float | None,
    data: st.DataObject,
) -> None:
    strategy = make_strategy(name, space, max_trials, seed, slo_p99_ms=slo)
    legal = set(space.candidates())
    history: list[tuple[Candidate, Measurement]] = []
    for _ in range(len(legal) + 1):
        c = strategy.next_candidate(history)
        if c is None:
            break
        assert c in legal and space.legal(c) is None
        assert c not in {seen for seen, _ in history}
        history.append((c, data.draw(_measurements)))
    else:
        raise AssertionError("the strategy did not stop")
    assert len(history) <= (max_trials or len(legal))
    assert (len(history) > 0) == (len(legal) > 0)


# --- confirmation: the finalists against the current config, in rounds ------------------

CURRENT = Current(16, dynamic_batching=False)
QUICK = Candidate(16, None, 500, 1)
SLOW_TAIL = Candidate(16, (8, 16), 2000, 2)


def _result(infer_per_s: float, p99_us: float, number: int, errors: int = 0) -> RunResult:
    return RunResult(
        mode="concurrency", concurrency=8, target_rate=None, batch_size=1, duration_s=1.0,
        requests=int(infer_per_s), errors=errors, errors_by_kind={"timeout": errors} if errors else {},
        qps=infer_per_s, infer_per_s=infer_per_s,
        latency_us={"p50": p99_us / 2, "p90": p99_us * 0.8, "p95": p99_us * 0.9, "p99": p99_us,
                    "p999": p99_us * 1.2, "mean": p99_us / 2},
        server_us=None, avg_batch=None, stable=True, gpu=None, cpu=None, round=number,
    )  # fmt: skip


def _judge(
    figures: dict[Candidate | Current, list[tuple[float, float]]],
    rounds: int | None = None,
    slo_p99_ms: float | None = None,
    status: str = "ok",
    errors: dict[Candidate | Current, int] | None = None,
) -> Confirmation:
    """Judge rounds of (infer/s, P99 µs) per contender, as ``measure_rounds`` would have measured them."""
    runs = {
        c.key: [_result(i, p, n + 1, (errors or {}).get(c, 0) if n == 1 else 0) for n, (i, p) in enumerate(v)]
        for c, v in figures.items()
    }
    completed = min(len(v) for v in figures.values())
    measured = Rounds(runs=runs, status=status, completed=completed)
    entries = [Entry(c.key, c, 8.0) for c in figures]
    return judge(measured, entries, rounds or completed, slo_p99_ms)


def _scaled(base: list[float], ratios: list[float], p99_us: float = 4000.0) -> list[tuple[float, float]]:
    return [(b * r, p99_us) for b, r in zip(base, ratios, strict=True)]


BASE = [1000.0, 1040.0, 970.0, 1010.0, 990.0]
BASE_ROUNDS = [(v, 4000.0) for v in BASE]


def test_the_current_config_stays_when_the_finalists_are_within_the_noise() -> None:
    confirmation = _judge(
        {
            CURRENT: BASE_ROUNDS,
            QUICK: _scaled(BASE, [1.03, 0.98, 1.05, 0.99, 1.02]),
            SLOW_TAIL: _scaled(BASE, [0.97, 1.02, 0.99, 1.01, 0.96]),
        }
    )
    quick = next(c for c in confirmation.finalists if c.candidate == QUICK)
    assert quick.ratio is not None and quick.ratio.low is not None and quick.ratio.high is not None
    assert quick.ratio.low < 1.0 < quick.ratio.high and not quick.ratio.significant
    assert quick.eligible and not quick.beats_current
    assert confirmation.winner is None and confirmation.best.is_current
    assert confirmation.best_finalist is quick  # the highest ratio, named by the verdict


def test_a_finalist_that_beats_the_current_config_significantly_is_chosen() -> None:
    confirmation = _judge(
        {
            CURRENT: BASE_ROUNDS,
            QUICK: _scaled(BASE, [1.88, 1.95, 1.90, 1.86, 1.93]),
            SLOW_TAIL: _scaled(BASE, [1.40, 1.45, 1.38, 1.42, 1.44]),
        },
        slo_p99_ms=10.0,
    )
    winner = confirmation.winner
    assert winner is not None and winner.candidate == QUICK
    assert winner.ratio is not None and winner.ratio.significant and winner.ratio.low > 1.5  # type: ignore[operator]
    assert winner.infer_per_s is not None and winner.infer_per_s.median == 1880.0  # 1000 × 1.88
    assert winner.ratio.text().startswith("1.90× [")
    assert confirmation.best is winner


def test_among_significant_finalists_the_highest_median_throughput_wins() -> None:
    # SLOW_TAIL is measured at a higher level: its ratio interval is tighter but its median lower.
    confirmation = _judge(
        {
            CURRENT: BASE_ROUNDS,
            QUICK: _scaled(BASE, [1.60, 1.90, 1.75, 1.65, 1.85]),
            SLOW_TAIL: _scaled(BASE, [1.50, 1.51, 1.50, 1.49, 1.50]),
        }
    )
    assert all(c.beats_current for c in confirmation.finalists)
    assert confirmation.winner is not None and confirmation.winner.candidate == QUICK


def test_judged_by_latency_a_finalist_wins_by_a_lower_p99_at_the_same_throughput() -> None:
    p99s = [240_000.0, 236_000.0, 251_000.0, 244_000.0, 238_000.0]

    def rounds_of(ratios: list[float]) -> list[RunResult]:  # the same throughput, P99 lower by ``ratios``
        return [_result(64.0, p / r, n + 1) for n, (p, r) in enumerate(zip(p99s, ratios, strict=True))]

    runs = {
        CURRENT.key: rounds_of([1.0] * 5),
        QUICK.key: rounds_of([6.8, 7.1, 6.9, 7.0, 7.2]),
        SLOW_TAIL.key: rounds_of([1.1, 0.9, 1.0, 1.2, 0.95]),
    }
    entries = [Entry(c.key, c, 64.0) for c in (CURRENT, QUICK, SLOW_TAIL)]
    confirmation = judge(Rounds(runs=runs, status="ok", completed=5), entries, 5, None, by_latency=True)
    assert confirmation.judged_by == "p99"
    quick, slow = confirmation.finalists
    assert (
        quick.ratio is not None
        and quick.ratio.significant
        and quick.ratio.estimate == pytest.approx(7.0, rel=0.05)
    )
    assert slow.ratio is not None and not slow.ratio.significant  # inside the noise: a tie, not a win
    assert confirmation.winner is quick
    by_throughput = judge(Rounds(runs=runs, status="ok", completed=5), entries, 5, None)
    assert by_throughput.winner is None  # the same throughput: nothing beats the current config


def test_a_finalist_over_the_slo_is_not_eligible() -> None:
    figures = {
        CURRENT: BASE_ROUNDS,
        QUICK: _scaled(BASE, [1.88, 1.95, 1.90, 1.86, 1.93], p99_us=12_000.0),
        SLOW_TAIL: _scaled(BASE, [1.40, 1.45, 1.38, 1.42, 1.44], p99_us=9_000.0),
    }
    confirmation = _judge(figures, slo_p99_ms=10.0)
    quick = next(c for c in confirmation.finalists if c.candidate == QUICK)
    assert quick.ratio is not None and quick.ratio.significant
    assert not quick.feasible and not quick.eligible and not quick.beats_current
    assert confirmation.winner is not None and confirmation.winner.candidate == SLOW_TAIL
    # Over the SLO both: the current config stays, however much faster they are.
    tight = _judge(figures, slo_p99_ms=8.0)
    assert tight.winner is None and tight.best.is_current
    assert not any(c.eligible for c in tight.finalists)


def test_a_current_config_that_misses_the_slo_gives_way_to_a_finalist_that_meets_it() -> None:
    """Equal throughput, but only the finalist meets the SLO over the rounds: it wins, and says why."""
    figures = {
        CURRENT: [(v, 12_000.0) for v in BASE],
        QUICK: _scaled(BASE, [1.03, 0.98, 1.05, 0.99, 1.02], p99_us=6_000.0),
    }
    confirmation = _judge(figures, slo_p99_ms=10.0)
    (quick,) = confirmation.finalists
    assert not confirmation.current.feasible and not quick.beats_current and quick.eligible
    assert confirmation.winner is quick
    # One round decides nothing, even then.
    one = _judge({c: v[:1] for c, v in figures.items()}, slo_p99_ms=10.0)
    assert one.winner is None


def test_a_finalist_with_errors_in_a_round_is_not_eligible() -> None:
    confirmation = _judge(
        {CURRENT: BASE_ROUNDS, QUICK: _scaled(BASE, [1.88, 1.95, 1.90, 1.86, 1.93])}, errors={QUICK: 3}
    )
    (quick,) = confirmation.finalists
    assert quick.infer_per_s is not None and quick.infer_per_s.rounds == 4  # the round with errors left out
    assert not quick.eligible and confirmation.winner is None


@pytest.mark.parametrize("gain", [1.0, 1.5, 3.0, 10.0])
def test_one_round_is_never_significant(gain: float) -> None:
    confirmation = _judge({CURRENT: BASE_ROUNDS[:1], QUICK: _scaled(BASE[:1], [gain])})
    (quick,) = confirmation.finalists
    assert quick.ratio is not None and quick.ratio.estimate == pytest.approx(gain)
    assert quick.ratio.low is None and not quick.ratio.significant
    assert confirmation.winner is None and confirmation.best.is_current
    assert "one round, no interval" in quick.ratio.text()


def test_rounds_are_paired_so_drift_of_the_machine_cancels() -> None:
    # The machine slows down round after round (both contenders alike): unpaired, the two
    # throughput intervals overlap; paired by round, a steady 10% gain is clear.
    drift = [1000.0, 900.0, 800.0, 700.0, 600.0]
    confirmation = _judge({CURRENT: [(v, 4000.0) for v in drift], QUICK: _scaled(drift, [1.1] * 5)})
    current, quick = confirmation.current, confirmation.finalists[0]
    assert current.infer_per_s is not None and quick.infer_per_s is not None
    assert quick.infer_per_s.low < current.infer_per_s.high  # type: ignore[operator]
    assert quick.beats_current and confirmation.winner is quick


def test_an_unfinished_confirmation_keeps_the_current_config() -> None:
    partial = _judge(
        {CURRENT: BASE_ROUNDS[:3], QUICK: _scaled(BASE[:3], [1.9, 1.9, 1.9])}, rounds=5, status="interrupted"
    )
    assert partial.completed == 3 and not partial.finished
    assert partial.finalists[0].ratio is not None and partial.finalists[0].ratio.significant
    assert partial.winner is None and partial.best.is_current


def _aa_decisions(gain: float, rounds: int, trials: int, cv: float = 0.05, seed: int = 7) -> float:
    """The share of simulated confirmations (3 finalists, one ``gain`` faster) that apply a finalist.

    Each round the machine runs at a random speed shared by all contenders (drift), and each
    measurement has its own noise of ``cv``: what interleaved rounds see on a busy machine.
    """
    rng = random.Random(seed)
    applied = 0
    for _ in range(trials):
        speeds = [rng.uniform(0.7, 1.1) for _ in range(rounds)]

        def rounds_of(level: float, speeds: list[float] = speeds) -> list[tuple[float, float]]:
            return [(1000.0 * level * s * rng.gauss(1.0, cv), 4000.0) for s in speeds]

        finalists = [Candidate(16, None, d, 1) for d in (0, 100, 500)]
        figures: dict[Candidate | Current, list[tuple[float, float]]] = {CURRENT: rounds_of(1.0)}
        for index, finalist in enumerate(finalists):
            figures[finalist] = rounds_of(gain if index == 0 else 1.0)
        confirmation = _judge(figures)
        applied += confirmation.winner is not None
    return applied / trials


def test_equal_finalists_are_applied_rarely_and_a_real_gain_is_found() -> None:
    # Only an interval above 1 applies a finalist: (1 - 0.95) / 2 per finalist, at most 7.5%
    # for three (the bound leaves three standard errors of 1,000 simulations). A 20% gain with
    # 5% noise per measurement is about 5.8 standard errors of the mean log ratio at 5 rounds,
    # against a critical value of 2.8: found nearly always.
    assert _aa_decisions(1.0, rounds=5, trials=1000) <= 0.1
    assert _aa_decisions(1.2, rounds=5, trials=300) >= 0.9


# --- the report: finalists, verdict, JSON, table; the request's checks and cost ----------


def _request(tmp: Path | None = None, **changes: object) -> TuneRequest:
    load = LoadSpec(
        model="m", address=ServerAddress.parse("localhost:8000"), levels=(8,), duration_s=2.0, warmup_s=1.0
    )
    request = TuneRequest(
        model="m", space=SearchSpace((16,), (None, (8, 16)), (0, 500, 2000), (1, 2)), load=load,
        slo_p99_ms=10.0, strategy="grid", out_dir=tmp or Path("unused"),
    )  # fmt: skip
    return replace(request, **changes)  # type: ignore[arg-type]


def _record(
    candidate: Candidate | Current, infer_per_s: float, p99_us: float, slo_ms: float = 10.0
) -> TrialRecord:
    m = Measurement(infer_per_s, p99_us, level=8.0)
    return TrialRecord(candidate.key, candidate, m, feasible(m, slo_ms), None)


def _report(rounds: int, ratios: dict[Candidate, list[float]]) -> TuneReport:
    request = _request(rounds=rounds, finalists=2)
    report = TuneReport(request=request, baseline=_record(CURRENT, 1000.0, 4000.0))
    report.trials = [
        _record(QUICK, 1900.0, 5000.0),
        _record(SLOW_TAIL, 1500.0, 6000.0),
        _record(Candidate(16, None, 0, 1), 1200.0, 3000.0),
        _record(Candidate(16, None, 0, 2), 2500.0, 20_000.0),  # over the SLO: never a finalist
    ]
    report.finalists = _finalists(report)
    figures: dict[Candidate | Current, list[tuple[float, float]]] = {CURRENT: BASE_ROUNDS[:rounds]}
    for candidate, r in ratios.items():
        figures[candidate] = _scaled(BASE[:rounds], r[:rounds])
    report.confirmation = _judge(figures, slo_p99_ms=10.0)
    return report


def test_finalists_are_the_best_feasible_trials_but_not_the_current_config() -> None:
    report = _report(5, {})
    assert [t.candidate for t in report.finalists] == [QUICK, SLOW_TAIL]
    report.same_as_current.append(QUICK.key)  # QUICK renders the current config: it is the baseline
    assert [t.candidate for t in _finalists(report)] == [SLOW_TAIL, Candidate(16, None, 0, 1)]


def test_report_applies_a_significant_winner_with_its_interval() -> None:
    report = _report(5, {QUICK: [1.88, 1.95, 1.90, 1.86, 1.93], SLOW_TAIL: [1.0, 1.02, 0.99, 1.01, 0.98]})
    assert report.decision == "apply" and report.winner is not None and report.winner.candidate == QUICK
    assert re.fullmatch(
        r"best: mb16-pbauto-qd500-i1 1,880 ± \d+ infer/s, 1\.90× \[1\.\d\d, 1\.\d\d\] the baseline "
        r"\(current config\)",
        report.verdict(),
    ), report.verdict()
    doc = json.loads(json.dumps(report.to_json()))
    assert doc["schema"] == "tritongen.tune/2" and doc["rounds"] == 5 and doc["confidence"] == 0.95
    assert doc["decision"] == "apply" and doc["finalists"] == [QUICK.key, SLOW_TAIL.key]
    contenders = doc["confirmation"]["contenders"]
    assert list(contenders) == [CURRENT.key, QUICK.key, SLOW_TAIL.key]  # the current config first
    assert contenders[CURRENT.key]["current"] and contenders[CURRENT.key]["ratio"] is None
    quick = contenders[QUICK.key]
    assert [r["round"] for r in quick["runs"]] == [1, 2, 3, 4, 5]
    assert quick["infer_per_s"]["rounds"] == 5 and quick["infer_per_s"]["ci_low"] is not None
    assert quick["p99_us"]["median"] == 4000.0 and quick["eligible"] and quick["feasible"]
    assert quick["ratio"]["significant"] and quick["ratio"]["ci_low"] > 1.0
    assert not contenders[SLOW_TAIL.key]["ratio"]["significant"]
    best = doc["best"]
    assert best["key"] == QUICK.key and best["significant"] and not best["current"]
    assert best["gain_over_baseline"]["estimate"] == pytest.approx(1.9037, abs=1e-3)
    assert best["infer_per_s"]["median"] == 1880.0


def test_report_keeps_the_current_config_within_the_noise() -> None:
    report = _report(5, {QUICK: [1.03, 0.98, 1.05, 0.99, 1.02], SLOW_TAIL: [0.97, 1.02, 0.99, 1.01, 0.96]})
    assert report.decision == "keep" and report.winner is None
    assert re.fullmatch(
        r"keep the current config: no finalist beat it beyond the noise "
        r"\(best finalist mb16-pbauto-qd500-i1: 1\.0\d× \[0\.9\d, 1\.\d\d\]\)",
        report.verdict(),
    ), report.verdict()
    doc = report.to_json()
    assert doc["decision"] == "keep"
    assert doc["best"]["key"] == CURRENT.key and doc["best"]["current"]
    assert doc["best"]["gain_over_baseline"] is None and not doc["best"]["significant"]


def test_report_of_one_round_says_it_is_a_quick_look() -> None:
    report = _report(1, {QUICK: [3.0], SLOW_TAIL: [2.0]})
    assert report.decision == "keep"
    assert report.verdict().startswith("keep the current config: one round is a quick look")
    assert "best finalist mb16-pbauto-qd500-i1: 3.00× (one round, no interval)" in report.verdict()


def test_report_without_finalists_keeps_the_current_config() -> None:
    report = TuneReport(request=_request(), baseline=_record(CURRENT, 1000.0, 4000.0))
    report.trials = [_record(QUICK, 1900.0, 50_000.0)]
    report.finalists = _finalists(report)
    assert report.finalists == [] and report.decision == "keep" and report.current_feasible
    assert report.verdict() == "keep the current config: no other config met the SLO in the search"
    doc = report.to_json()
    assert doc["confirmation"] is None and doc["best"]["key"] == CURRENT.key
    assert doc["best"]["infer_per_s"]["median"] == 1000.0


def test_tune_table_and_plot_show_the_confirmation() -> None:
    from tritongen.report.html import render_report
    from tritongen.report.plots import confirmed_points, tune_figure, tune_points
    from tritongen.report.tune_tables import tune_table
    from tritongen.tune.document import TuneDocument

    report = _report(5, {QUICK: [1.88, 1.95, 1.90, 1.86, 1.93], SLOW_TAIL: [1.0, 1.02, 0.99, 1.01, 0.98]})
    doc = json.loads(json.dumps(report.to_json()))
    typed = TuneDocument.from_json(doc)
    table = tune_table(typed)
    assert table.headers[-3:] == ("rounds infer/s", "rounds P99 ms", "vs current")
    assert len(table.rows) == len(doc["trials"]) + 1
    rows = {row[0]: row for row in table.rows}
    assert [row[0] for row in table.rows[:3]] == [CURRENT.key, QUICK.key, SLOW_TAIL.key]
    assert rows[CURRENT.key][-1] == "baseline"
    assert re.fullmatch(r"1,880 ± \d+", rows[QUICK.key][-3]) and rows[QUICK.key][-2] == "4.00 ± 0.00"
    assert rows[QUICK.key][-1].startswith("1.90× [")
    assert rows["mb16-pbauto-qd0-i2"][-3:] == ("", "", "")  # searched, not confirmed
    assert table.styles[1] == "good"
    points = confirmed_points(typed)
    assert [(p.label, p.current, p.best) for p in points] == [
        (CURRENT.key, True, False), (QUICK.key, False, True), (SLOW_TAIL.key, False, False),
    ]  # fmt: skip
    assert all(p.infer_low is not None and p.infer_low <= p.infer_per_s for p in points)
    trials, reference = tune_points(typed)
    figure = tune_figure(trials, "tune m", 10.0, reference, points)
    assert len(figure.axes[0].containers) == 3  # one error bar per confirmed config
    figure.clf()
    page = render_report([("tune.json", typed)])
    assert "best: mb16-pbauto-qd500-i1 1,880 ±" in page and "rounds infer/s" in page
    # A tritongen.tune/1 document (no confirmation) still reads.
    old = {
        **doc,
        "schema": "tritongen.tune/1",
        "confirmation": None,
        "best": {"key": QUICK.key, "infer_per_s": 1880.0, "p99_us": 4000.0, "gain_over_baseline": 1.5},
    }
    assert tune_table(TuneDocument.from_json(old)).headers == (
        "config",
        "infer/s",
        "P99 ms",
        "feasible",
        "front",
    )
    assert confirmed_points(TuneDocument.from_json(old)) == []
    assert "1.50× the baseline" in render_report(
        [("old.json", TuneDocument.from_json({**old, "verdict": None}))]
    )


def test_request_checks_rounds_confidence_and_finalists() -> None:
    _request().check()
    for changes, message in [
        ({"rounds": 0}, "--rounds 0 must be at least 1"),
        ({"confidence": 1.0}, "--confidence 1.0 is not a level between 0 and 1"),
        ({"confidence": 0.0}, "--confidence 0.0 is not a level between 0 and 1"),
        ({"confidence": -0.5}, "is not a level"),
        ({"finalists": 0}, "--finalists 0 must be at least 1"),
    ]:
        with pytest.raises(ConfigError, match=re.escape(message)):
            _request(**changes).check()


def test_plan_says_how_long_at_most() -> None:
    cost = plan(_request())  # 12 legal configs (grid), 3 finalists + the current config, 5 rounds
    assert (cost.trials, cost.contenders, cost.rounds) == (13, 4, 5)
    per_run = 1.0 + 2.0 + RUN_OVERHEAD_S + RELOAD_S  # warm-up, duration, overhead, reload
    assert cost.seconds == pytest.approx((13 + 4 * 5) * per_run)
    assert cost.max_seconds == pytest.approx((13 + 4 * 5) * (per_run + 4.0))  # 3 × the duration at most
    assert cost.text() == (
        f"about {math.ceil(cost.seconds / 60)} min (up to {math.ceil(cost.max_seconds / 60)} min while runs "
        "wait to be stable): 13 trials, then 4 configs × 5 rounds"
    )
    fixed = plan(_request(rounds=1, max_trials=1, load=replace(_request().load, max_duration_s=2.0)))
    assert fixed.text() == f"about {fixed.seconds:.0f} s: 2 trials, then 2 configs × 1 round"


def test_resume_claims(tmp_path: Path) -> None:
    out = tmp_path / "tune"
    request = _request(out)
    claim_directory(request)
    claim = (out / "tune-request.json").read_text()
    check_claim(request)
    for changes, message in [
        ({"rounds": 3}, "was tuned with --rounds 5 --finalists 3 --confidence 0.95"),
        ({"finalists": 2}, "was tuned with"),
        ({"confidence": 0.9}, "was tuned with"),
        ({"slo_p99_ms": 20.0}, "holds trials of another tune"),
        ({"model": "other"}, "holds trials of another tune"),
    ]:
        with pytest.raises(ConfigError, match=message):
            claim_directory(_request(out, **changes))
        assert (out / "tune-request.json").read_text() == claim  # nothing overwritten
    # A directory from before rounds were recorded: its search trials still count.
    old = {k: v for k, v in json.loads(claim).items() if k not in ("rounds", "finalists", "confidence")}
    (out / "tune-request.json").write_text(json.dumps(old))
    claim_directory(_request(out, rounds=3))
    assert json.loads((out / "tune-request.json").read_text())["rounds"] == 3


def test_a_resume_under_other_arrivals_is_refused_and_an_older_claim_meant_constant(tmp_path: Path) -> None:
    out = tmp_path / "tune"
    request = _request(out)
    bursty = replace(
        request, load=replace(request.load, mode="rate", levels=(50.0,), arrival="gamma", arrival_cv=2.0)
    )
    claim_directory(replace(bursty, load=replace(bursty.load, arrival="constant", arrival_cv=None)))
    with pytest.raises(ConfigError, match="holds trials of another tune"):
        claim_directory(bursty)
    burstier = replace(bursty, load=replace(bursty.load, arrival_cv=3.0), out_dir=tmp_path / "burstier")
    claim_directory(burstier)
    with pytest.raises(ConfigError, match="'arrival': 'gamma:3'"):
        claim_directory(replace(bursty, out_dir=burstier.out_dir))
    claim = json.loads((out / "tune-request.json").read_text())
    del claim["arrival"]  # written before arrivals were recorded: constant ones
    (out / "tune-request.json").write_text(json.dumps(claim))
    check_claim(replace(bursty, load=replace(bursty.load, arrival="constant", arrival_cv=None)))


def test_a_load_that_sets_the_throughput_is_judged_by_p99() -> None:
    closed = LoadSpec(model="m", address=ServerAddress.parse("localhost:8000"), levels=(8,))
    one_rate = replace(closed, mode="rate", levels=(200.0,))
    assert not judged_by_latency(closed)  # more throughput at the same concurrency is better
    assert judged_by_latency(one_rate)  # every config that keeps up serves 200/s
    assert not judged_by_latency(replace(one_rate, levels=(200.0, 400.0)))  # the best level feasible
    search = MaxSearch(start=200.0, cap=10_000.0, objective=SloObjective(p99_ms=10.0), whole=False)
    assert not judged_by_latency(replace(one_rate, search=search))  # the most load within the SLO
    stages = parse_stages("100:2s,300:2s")
    assert judged_by_latency(replace(one_rate, levels=(200.0,), duration_s=stages.duration_s, shape=stages))
