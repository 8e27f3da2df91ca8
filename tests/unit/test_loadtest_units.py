"""Load-test building blocks without a server: windows, stability, parsing, metrics text."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from tritongen.client.address import ServerAddress
from tritongen.errors import ConfigError
from tritongen.loadtest.spec import LoadSpec, auto_processes, parse_duration
from tritongen.loadtest.windows import Window, WindowLog, is_stable, latency_summary, merge, new_histogram
from tritongen.metrics.prometheus import parse_metrics
from tritongen.metrics.statistics import StatsSnapshot, breakdown


def _report(
    index: int, worker: str, latencies_us: list[int], errors: dict[str, int] | None = None
) -> dict[str, object]:
    hist = new_histogram()
    for value in latencies_us:
        hist.record_value(value)
    return {
        "index": index,
        "worker": worker,
        "ok": len(latencies_us),
        "errors": errors or {},
        "sent": 0,
        "hist": base64.b64encode(hist.encode()).decode() if latencies_us else "",
        "late": 0,
        "max_lag_us": 0.0,
    }


def test_window_log_merges_workers_and_reads_incrementally(tmp_path: Path) -> None:
    path = tmp_path / "windows.jsonl"
    log = WindowLog(path)
    log.poll()  # no file yet
    with path.open("w") as out:
        out.write(json.dumps(_report(3, "a", [100, 200, 300])) + "\n")
        out.write(json.dumps(_report(3, "b", [400], {"http_503": 2})) + "\n")
        out.write('{"index": 4, "worker": "a", "ok"')  # a line still being written
    log.poll()
    assert sorted(log.windows) == [3]
    window = log.windows[3]
    assert window.ok == 4 and window.errors == {"http_503": 2} and window.workers == {"a", "b"}
    assert window.histogram.get_max_value() == pytest.approx(400, rel=0.001)
    with path.open("a") as out:
        out.write(': 1, "errors": {}, "sent": 0, "hist": ""}\n')
    log.poll()
    assert sorted(log.windows) == [3, 4]
    assert log.first_active() == 3
    assert [w.index for w in log.span(3, 6)] == [3, 4, 5]


def test_merge_and_summary_keep_microseconds() -> None:
    a, b = Window(0), Window(1)
    a.add(_report(0, "a", [1234] * 99 + [9876]))
    b.add(_report(1, "a", [1234] * 100))
    total = merge([a, b])
    assert total.ok == 200
    summary = latency_summary(total.histogram)
    assert summary["p50"] == pytest.approx(1234, abs=1)
    assert summary["max"] == pytest.approx(9876, rel=0.001)
    assert summary["mean"] == pytest.approx((1234 * 199 + 9876) / 200, rel=0.001)


def test_held_back_sends_add_up_across_workers_and_windows() -> None:
    """Sends the open loop held at the in-flight cap are counted, never lost in a merge."""
    a, b = Window(0), Window(1)
    a.add({**_report(0, "a", [1000] * 5), "held_back": 3, "max_hold_us": 250_000.0})
    a.add({**_report(0, "b", [1000] * 5), "held_back": 2, "max_hold_us": 900_000.0})
    b.add(_report(1, "a", [1000] * 5))  # an older worker's report without the keys: zero
    assert (a.held_back, a.max_hold_us, b.held_back, b.max_hold_us) == (5, 900_000.0, 0, 0.0)
    total = merge([a, b])
    assert total.held_back == 5 and total.max_hold_us == 900_000.0 and total.ok == 15


def _steady(index: int, count: int, latency: int) -> Window:
    window = Window(index)
    window.add(_report(index, "a", [latency] * count))
    return window


def test_stability_rule() -> None:
    stable = [_steady(0, 50, 900), _steady(1, 100, 1000), _steady(2, 104, 1040), _steady(3, 98, 980)]
    assert is_stable(stable, 1.0)
    assert not is_stable(stable[:2], 1.0)  # fewer than three windows
    jumpy_rate = [_steady(0, 100, 1000), _steady(1, 130, 1000), _steady(2, 100, 1000)]
    assert not is_stable(jumpy_rate, 1.0)
    jumpy_p99 = [_steady(0, 100, 1000), _steady(1, 100, 1300), _steady(2, 100, 1000)]
    assert not is_stable(jumpy_p99, 1.0)
    assert not is_stable([Window(0), Window(1), Window(2)], 1.0)


@pytest.mark.parametrize(
    ("text", "seconds"), [("30s", 30), ("2m", 120), ("500ms", 0.5), ("10", 10), ("1.5s", 1.5)]
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text, "--duration") == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "soon", "5 minutes", "-3s"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(ConfigError, match="not a duration"):
        parse_duration(text, "--duration")


def test_spec_defaults_and_checks() -> None:
    spec = LoadSpec(model="m", address=ServerAddress.parse("u"), duration_s=30)
    assert spec.effective_window_s == 5 and spec.effective_max_duration_s == 90
    assert LoadSpec(model="m", address=ServerAddress.parse("u"), duration_s=3).effective_window_s == 1
    with pytest.raises(ConfigError, match="whole numbers"):
        LoadSpec(model="m", address=ServerAddress.parse("u"), levels=(1.5,))
    with pytest.raises(ConfigError, match="--processes"):
        LoadSpec(model="m", address=ServerAddress.parse("u"), processes=0)


def test_auto_processes() -> None:
    assert auto_processes("concurrency", 1, cpus=8) == 1
    assert auto_processes("concurrency", 64, cpus=8) == 1
    assert auto_processes("concurrency", 256, cpus=8) == 4
    assert auto_processes("concurrency", 4096, cpus=2) == 2
    assert auto_processes("rate", 500, cpus=8) == 1
    assert auto_processes("rate", 10000, cpus=8) == 4


METRICS = """\
# HELP nv_gpu_utilization GPU utilization rate [0.0 - 1.0)
# TYPE nv_gpu_utilization gauge
nv_gpu_utilization{gpu_uuid="GPU-a"} 0.5
nv_gpu_utilization{gpu_uuid="GPU-b"} 0.25
# TYPE nv_gpu_memory_used_bytes gauge
nv_gpu_memory_used_bytes{gpu_uuid="GPU-a"} 1000
nv_gpu_memory_used_bytes{gpu_uuid="GPU-b"} 500
# TYPE nv_cpu_utilization gauge
nv_cpu_utilization 0.75
# TYPE nv_cpu_memory_used_bytes gauge
nv_cpu_memory_used_bytes 123456
# TYPE nv_inference_count counter
nv_inference_count{model="m",version="1"} 42
"""


def test_metrics_parsing_averages_utilisation_and_sums_memory() -> None:
    assert parse_metrics(METRICS) == {
        "gpu_util": 0.375,
        "gpu_mem_bytes": 1500,
        "cpu_util": 0.75,
        "cpu_mem_bytes": 123456,
    }
    assert "gpu_util" not in parse_metrics("nv_cpu_utilization 0.1\n")


def _stats(inferences: int, executions: int, queue_ns: int, count: int) -> StatsSnapshot:
    phase = {"count": count, "ns": queue_ns}
    return StatsSnapshot.from_json(
        {
            "inference_count": inferences,
            "execution_count": executions,
            "inference_stats": {
                "success": {"count": count},
                "queue": phase,
                "compute_input": {"count": count, "ns": count * 1000},
                "compute_infer": {"count": str(count), "ns": str(count * 5000)},  # gRPC JSON: strings
                "compute_output": {"count": count, "ns": 0},
            },
        }
    )


def test_statistics_deltas() -> None:
    result = breakdown(_stats(10, 10, 0, 10), _stats(110, 35, 50_000_000, 110))
    assert result.requests == 100
    assert result.avg_batch == pytest.approx(4.0)
    assert result.queue_us == pytest.approx(500.0)
    assert result.compute_infer_us == pytest.approx(5.0)
    none = breakdown(_stats(10, 10, 0, 10), _stats(10, 10, 0, 10))
    assert none.avg_batch is None and none.queue_us is None
    # A snapshot caught between Triton's execution and inference counter updates.
    torn = breakdown(_stats(0, 0, 0, 0), _stats(4839, 4840, 0, 4839))
    assert torn.avg_batch == 1.0


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_histogram_moments_are_hdrh_s_mean_and_deviation(seed: int) -> None:
    """One pass over the counted indexes gives what hdrh's iterators give, to the last digits."""
    import numpy as np

    from tritongen.io.loadgen_shared import histogram_moments

    hist = new_histogram()
    assert histogram_moments(hist) == (0.0, 0.0)
    rng = np.random.default_rng(seed)
    for value in rng.lognormal(7.0, 1.5, 5000).astype(int) + 1:
        hist.record_value(int(min(value, 50_000_000)))
    mean, deviation = histogram_moments(hist)
    assert mean == pytest.approx(hist.get_mean_value(), rel=1e-12)
    assert deviation == pytest.approx(hist.get_stddev(), rel=1e-9)
