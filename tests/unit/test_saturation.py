"""``--stop-at-saturation``: which level ends a sweep, by which rule, judged on the runs' own noise."""

from __future__ import annotations

import random

import pytest

from tritongen.client.address import ServerAddress
from tritongen.loadtest.result import LoadTestReport, RunResult
from tritongen.loadtest.runner import measure_levels
from tritongen.loadtest.saturation import SaturationRule, throughput_gain
from tritongen.loadtest.spec import LoadSpec
from tritongen.loadtest.sweep_stop import SweepStop


def _run(
    level: int, qps: float, p99_ms: float, spread: float = 0.03, windows: int = 6, seed: int = 0
) -> RunResult:
    """A run at concurrency ``level`` whose windows' throughput scatter by ``spread`` (seeded)."""
    rng = random.Random(f"{level}:{qps}:{seed}")
    values = [qps * (1 + rng.gauss(0, spread)) for _ in range(windows)]
    return RunResult(
        mode="concurrency", concurrency=level, target_rate=None, batch_size=1, duration_s=6.0,
        requests=int(qps * 6), errors=0, errors_by_kind={}, qps=sum(values) / len(values),
        infer_per_s=qps, latency_us={k: p99_ms * 1000 * f for k, f in LATENCY.items()}, server_us=None,
        avg_batch=None, stable=True, gpu=None, cpu=None,
        windows=[{"index": i, "qps": v, "p99_us": p99_ms * 1000, "errors": 0} for i, v in enumerate(values)],
    )  # fmt: skip


RULE = SaturationRule()
LATENCY = {"p50": 0.5, "p90": 0.8, "p95": 0.9, "p99": 1.0, "p999": 1.2, "mean": 0.55, "max": 1.3}


def test_a_clear_rise_goes_on() -> None:
    assert RULE.check(_run(1, 100, 2), _run(2, 190, 2.2), "concurrency 2") is None


def test_flat_throughput_with_rising_latency_is_saturation() -> None:
    stop = RULE.check(_run(4, 400, 10), _run(8, 405, 20), "concurrency 8")
    assert stop is not None and stop.rule == "saturation" and stop.level == 8
    assert "concurrency 8 saturated" in stop.text and "P99 rose 2.00×" in stop.text


def test_flat_throughput_with_flat_latency_is_not_saturation() -> None:
    # Nothing got worse: a level that costs no latency is not past the knee.
    assert RULE.check(_run(4, 400, 10), _run(8, 402, 9.5), "concurrency 8") is None


def test_a_rise_inside_the_noise_is_no_rise() -> None:
    # 3% more throughput, but windows that scatter by 20%: the rise cannot be told from none.
    stop = RULE.check(_run(4, 400, 10, spread=0.2), _run(8, 412, 15, spread=0.2), "concurrency 8")
    assert stop is not None and stop.rule == "saturation"
    # The same 3% over quiet windows is a real rise.
    assert RULE.check(_run(4, 400, 10, spread=0.002), _run(8, 412, 15, spread=0.002), "concurrency 8") is None


def test_the_p99_limit_stops_first_even_at_the_first_level() -> None:
    stop = SaturationRule(slo_p99_ms=5).check(None, _run(1, 100, 6), "concurrency 1")
    assert stop is not None and stop.rule == "slo"
    assert stop.text == "concurrency 1's P99 6.00 ms exceeds --slo-p99-ms 5"


def test_without_windows_a_rise_must_pass_a_fixed_margin() -> None:
    gain = throughput_gain(_run(1, 100, 2, spread=0, windows=1), _run(2, 150, 3, spread=0, windows=1))
    assert gain is not None and gain.low is None and gain.text() == "1.50×"
    assert RULE.check(_run(1, 100, 2, windows=1), _run(2, 150, 3, windows=1), "c 2") is None
    assert RULE.check(_run(1, 100, 2, windows=1), _run(2, 105, 3, windows=1), "c 2") is not None


@pytest.mark.parametrize("rounds", [1, 3])
def test_the_sweep_stops_and_later_rounds_measure_only_the_levels_up_to_the_stop(rounds: int) -> None:
    # Throughput flattens after concurrency 4 while latency doubles with each level.
    figures = {1: (100, 2), 2: (195, 2.1), 4: (380, 2.3), 8: (385, 4.6), 16: (384, 9.2), 32: (386, 18)}
    spec = LoadSpec(
        model="m", address=ServerAddress.parse("x"), levels=(1, 2, 4, 8, 16, 32), rounds=rounds, stop_at=RULE
    )
    report = LoadTestReport(model="m", protocol="http", url="x")
    measured: list[tuple[float, int]] = []

    def run(level: float, number: int) -> RunResult:
        measured.append((level, number))
        qps, p99 = figures[int(level)]
        return _run(int(level), qps, p99, spread=0.01, seed=number)

    measure_levels(spec, report, run)
    assert report.sweep_stop == SweepStop(
        "saturation", 8.0, report.sweep_stop.text if report.sweep_stop else "", skipped=(16.0, 32.0)
    )
    assert measured == [(level, n) for n in range(1, rounds + 1) for level in (1, 2, 4, 8)]
    assert report.sweep_stop is not None and report.sweep_stop.summary().startswith(
        "Sweep stopped (saturation)"
    )
    assert report.sweep_stop.summary().endswith("not measured: 16, 32")
    again = LoadTestReport.from_json(report.to_json())
    assert again.sweep_stop == report.sweep_stop


def test_without_the_flag_every_level_is_measured() -> None:
    spec = LoadSpec(model="m", address=ServerAddress.parse("x"), levels=(1, 2, 4))
    report = LoadTestReport(model="m", protocol="http", url="x")
    measure_levels(spec, report, lambda level, n: _run(int(level), 100, 2 * level))
    assert [r.concurrency for r in report.runs] == [1, 2, 4] and report.sweep_stop is None
    assert report.to_json()["sweep_stop"] is None
