"""The rules that end a sweep of levels: one kind of rule, asked after each level of the first round."""

from __future__ import annotations

from tritongen.client.address import ServerAddress
from tritongen.loadtest.result import LoadTestReport, RunResult
from tritongen.loadtest.runner import measure_levels
from tritongen.loadtest.spec import LoadSpec
from tritongen.loadtest.sweep_rules import FirstOf, LatencyLimit, StableOnly


def _run(level: int, latency_us: float, stable: bool = True) -> RunResult:
    return RunResult(
        mode="concurrency", concurrency=level, target_rate=None, batch_size=1, duration_s=1.0, requests=10,
        errors=0, errors_by_kind={}, qps=10.0, infer_per_s=10.0, latency_us={"p99": latency_us},
        server_us=None, avg_batch=None, stable=stable, gpu=None, cpu=None, stability_latency_us=latency_us,
    )  # fmt: skip


def _sweep(rule: FirstOf, figures: dict[int, tuple[float, bool]]) -> tuple[list[int], LoadTestReport]:
    spec = LoadSpec(model="m", address=ServerAddress.parse("x"), levels=tuple(figures), stop_at=rule)
    report = LoadTestReport(model="m", protocol="http", url="x")
    heard: list[int] = []
    measure_levels(
        spec,
        report,
        lambda level, _n: _run(int(level), *figures[int(level)]),
        label=lambda level: f"concurrency {level:g}",
        on_run=lambda run: heard.append(int(run.concurrency or 0)),
    )
    return heard, report


def test_the_latency_limit_stops_after_the_first_level_above_it() -> None:
    heard, report = _sweep(
        FirstOf((LatencyLimit(2.0), StableOnly())), {1: (900, True), 2: (2500, True), 4: (3000, True)}
    )
    assert heard == [1, 2] and [r.concurrency for r in report.runs] == [1, 2]
    assert report.sweep_stop is not None and report.sweep_stop.rule == "latency-threshold"
    assert report.sweep_stop.skipped == (4.0,) and "concurrency 2's latency 2.50 ms" in report.sweep_stop.text


def test_a_level_that_is_not_stable_stops_the_sweep_after_it() -> None:
    heard, report = _sweep(FirstOf((StableOnly(),)), {1: (900, True), 2: (950, False), 4: (990, True)})
    assert heard == [1, 2] and report.sweep_stop is not None and report.sweep_stop.rule == "unstable"


def test_rules_are_asked_in_order_and_none_lets_every_level_run() -> None:
    _, both = _sweep(FirstOf((LatencyLimit(1.0), StableOnly())), {1: (2000, False)})
    assert both.sweep_stop is not None and both.sweep_stop.rule == "latency-threshold"
    heard, report = _sweep(FirstOf(()), {1: (2000, False), 2: (3000, False)})
    assert heard == [1, 2] and report.sweep_stop is None
