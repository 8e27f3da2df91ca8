"""The pure logic of ``tritongen tune``: space, objective and strategies, with simulated servers."""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tritongen.errors import ConfigError
from tritongen.tune.objective import (
    FAILED_OBJECTIVE,
    Measurement,
    best,
    feasible,
    gain,
    objective,
    pareto_front,
)
from tritongen.tune.space import Baseline, Candidate, SearchSpace, parse_preferred_sets
from tritongen.tune.strategy import AdaptiveSearch, GridSearch, SearchStrategy, make_strategy

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


def test_baseline_is_batching_off() -> None:
    base = SPACE.baseline()
    assert base == Baseline(32, 1)
    assert SPACE.baseline(8) == Baseline(8)
    assert base.key == "baseline-mb32-i1"
    assert base.to_json()["dynamic_batching"] is False
    assert Baseline.from_json(base.to_json()) == base
    options = base.to_options()
    assert options.dynamic_batching is False
    assert options.preferred_batch_sizes is None and options.max_queue_delay_us is None
    options.check()
    with pytest.raises(ConfigError):
        Baseline.from_json(Candidate(8, None, 0, 1).to_json())


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
