"""``loadtest --find-max``'s search: the levels it chooses, when it stops, and the bracket it reports.

The search runs against a made-up server whose levels meet the SLO up to a known level: it must
double up to the first miss, bisect to within its precision (or one level of a concurrency),
stop at its cap still meeting, and say nothing met when the first level missed.
"""

from __future__ import annotations

import pytest

from tritongen.errors import ConfigError
from tritongen.loadtest.find_max import MaxSearch, SloObjective
from tritongen.loadtest.result import RunResult
from tritongen.loadtest.sweep_stop import FoundMax

OBJECTIVE = SloObjective(p99_ms=20.0)


def _search(search: MaxSearch, highest_meeting: float) -> list[tuple[float, bool]]:
    """The levels ``search`` measures against a server that meets the SLO up to ``highest_meeting``."""
    measured: list[tuple[float, bool]] = []
    while (level := search.next_level(measured)) is not None:
        assert level not in [done for done, _ in measured]  # no level is measured twice
        measured.append((level, level <= highest_meeting))
        assert len(measured) < 40
    return measured


@pytest.mark.parametrize("highest", [1, 5, 37, 100, 255])
def test_a_concurrency_search_ends_one_level_or_its_precision_apart_around_the_highest_that_meets(
    highest: int,
) -> None:
    search = MaxSearch(start=1, cap=256, objective=OBJECTIVE, precision=0.01, whole=True)
    measured = _search(search, highest)
    found = search.outcome(measured, [])
    assert found.meets is not None and found.misses is not None
    assert found.meets <= highest < found.misses
    assert found.misses - found.meets <= 1 or found.misses <= found.meets * 1.01  # one level, or 1%
    assert [level for level, _ in measured[:3]] == [1, 2, 4][: len(measured[:3])]  # doubling first


def test_a_rate_search_stops_within_its_precision() -> None:
    search = MaxSearch(start=100, cap=20_000, objective=OBJECTIVE, precision=0.1, whole=False)
    measured = _search(search, 1234.0)
    found = search.outcome(measured, [])
    assert found.meets is not None and found.misses is not None
    assert found.meets <= 1234.0 < found.misses <= found.meets * 1.1
    assert len(measured) <= 12


def test_the_cap_still_meeting_is_a_lower_bound_and_a_first_miss_is_none() -> None:
    capped = MaxSearch(start=8, cap=50, objective=OBJECTIVE)
    found = capped.outcome(_search(capped, 1000), [])
    assert (found.meets, found.misses, found.capped) == (50, None, True)
    assert "at least 50" in found.summary()
    early = MaxSearch(start=8, cap=50, objective=OBJECTIVE)
    missed = early.outcome(_search(early, 4), [])
    assert (missed.meets, missed.misses) == (None, 8) and "none" in missed.summary()


def _run(p99_us: float, errors: int = 0, ttft_us: float | None = None) -> RunResult:
    return RunResult(
        mode="concurrency", concurrency=4, target_rate=None, batch_size=1, duration_s=5.0,
        requests=1000, errors=errors, errors_by_kind={}, qps=200.0, infer_per_s=200.0,
        latency_us={"p50": p99_us / 2, "p99": p99_us}, server_us=None, avg_batch=None, stable=True,
        gpu=None, cpu=None, ttft_us=None if ttft_us is None else {"p99": ttft_us},
    )  # fmt: skip


def test_a_level_meets_the_slo_on_its_p99_its_token_limits_and_its_errors() -> None:
    assert OBJECTIVE.miss(_run(19_000)) is None
    assert "P99 21.00 ms over 20 ms" in (OBJECTIVE.miss(_run(21_000)) or "")
    assert "requests failed" in (OBJECTIVE.miss(_run(1_000, errors=11)) or "")  # over 1%
    llm = SloObjective(ttft_ms=100.0)
    assert llm.miss(_run(5e6, ttft_us=90_000)) is None  # an LLM load is judged on its token limits
    assert "TTFT P99" in (llm.miss(_run(5e6, ttft_us=110_000)) or "")


def test_the_bracket_is_written_and_read_back() -> None:
    search = MaxSearch(start=1, cap=256, objective=OBJECTIVE, whole=True)
    measured = _search(search, 12)
    runs = [_run(10_000 if passed else 30_000) for _, passed in measured]
    found = search.outcome(measured, runs)
    assert found.throughput_at_meets == 200.0
    assert FoundMax.from_json(found.to_json()) == found
    assert "between 12" in found.summary() and "13 (missed)" in found.summary()


@pytest.mark.parametrize(
    ("kwargs", "said"),
    [
        ({"objective": SloObjective()}, "none was given"),
        ({"start": 300.0}, "not between 0 and --max-level 256"),
        ({"precision": 1.5}, "--search-precision 1.5 is not between 0 and 1"),
    ],
)
def test_a_search_that_cannot_run_is_refused(kwargs: dict[str, object], said: str) -> None:
    settings: dict[str, object] = {"start": 1.0, "cap": 256.0, "objective": OBJECTIVE} | kwargs
    with pytest.raises(ConfigError, match=said):
        MaxSearch(**settings)  # type: ignore[arg-type]
