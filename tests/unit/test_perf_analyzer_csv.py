"""perf_analyzer's CSV as its readers read it: the per-GPU `UUID:value;` cells, Model Analyzer's rules."""

from __future__ import annotations

import csv
import io
from dataclasses import replace
from pathlib import Path

import pytest

from tritongen.loadtest.result import RunResult
from tritongen.metrics.prometheus import gpu_device_summary, parse_gpu_devices
from tritongen.perfanalyzer.csv_file import (
    BASE,
    CPU_METRICS,
    GPU_METRICS,
    VERBOSE,
    csv_header,
    csv_row,
    gpu_cells,
    write_pa_csv,
)
from tritongen.perfanalyzer.options import parse_pa_args

from support.pa_csv import ma_gpu_records

GPUS = {
    "GPU-b171660f-ffab-27bf-aa6a-6c1d0eaa8f49": {
        "util_mean": 0.373684,
        "power_mean_w": 50.879,
        "mem_max_bytes": 1132462080,
        "mem_total_bytes": 16106127360,
    },
    "GPU-0a1b2c3d-0000-1111-2222-333344445555": {
        "util_mean": 0.5,
        "power_mean_w": 70.0,
        "mem_max_bytes": 2000000000,
        "mem_total_bytes": 16106127360,
    },
}


def _run(**figures: object) -> RunResult:
    base = RunResult(
        mode="concurrency", concurrency=2, target_rate=None, batch_size=1, duration_s=1.5, requests=300,
        errors=0, errors_by_kind={}, qps=200.0, infer_per_s=200.0,
        latency_us={"mean": 5000.0, "p50": 4900.0, "p90": 5500.0, "p95": 5800.0, "p99": 6100.0},
        server_us=None, avg_batch=None, stable=True, gpu=None,
        cpu={"util_mean": 0.42, "util_max": 0.5, "mem_max_bytes": 123456, "source": "triton"},
        stability_latency_us=5000.0,
    )  # fmt: skip
    return replace(base, **figures)  # type: ignore[arg-type]


def test_gpu_cells_are_perf_analyzers_uuid_value_pairs() -> None:
    cells = gpu_cells(GPUS)
    first, second = sorted(GPUS)
    assert list(cells) == GPU_METRICS
    assert cells["Avg GPU Utilization"] == f"{first}:0.5;{second}:0.373684;"  # by UUID, a trailing ';'
    assert cells["Total GPU Memory"] == f"{first}:16106127360;{second}:16106127360;"
    assert gpu_cells({}) == dict.fromkeys(GPU_METRICS, "")  # no GPU: empty cells, as perf_analyzer writes
    partial = gpu_cells({first: {"util_mean": 0.25, "power_mean_w": None}})
    assert partial["Avg GPU Utilization"] == f"{first}:0.25;" and partial["Avg GPU Power Usage"] == ""


def test_model_analyzer_reads_tritongens_csv(tmp_path: Path) -> None:
    options = parse_pa_args(["-m", "m", "--collect-metrics", "--verbose-csv", "-f", "x.csv"])
    out = tmp_path / "perf.csv"
    write_pa_csv(out, [_run(gpu={"util_mean": 0.43, "by_uuid": GPUS})], options)
    (row,) = list(csv.DictReader(io.StringIO(out.read_text())))
    records = ma_gpu_records(row)
    uuid = "GPU-b171660f-ffab-27bf-aa6a-6c1d0eaa8f49"
    assert records["Avg GPU Utilization"][uuid] == pytest.approx(37.3684)  # percent
    assert records["Avg GPU Power Usage"][uuid] == pytest.approx(50.879)
    assert records["Max GPU Memory Usage"][uuid] == pytest.approx(1132.46208)  # MB
    assert set(records["Total GPU Memory"]) == set(GPUS)
    # Model Analyzer's latency and throughput columns, by name, in its units
    assert float(row["Avg latency"]) / 1000 == 5.0 and float(row["Inferences/Second"]) == 200.0
    assert float(row["Avg CPU Utilization (tritongen)"]) == 0.42  # tritongen's own, after perf_analyzer's


def test_the_columns_in_perf_analyzers_order() -> None:
    header = csv_header(parse_pa_args(["-m", "m", "--collect-metrics", "--verbose-csv"]))
    assert header == ["Concurrency", *BASE, *VERBOSE, *GPU_METRICS, *CPU_METRICS]
    assert csv_header(parse_pa_args(["-m", "m", "--collect-metrics"])) == ["Concurrency", *BASE, *CPU_METRICS]
    percentile = csv_header(parse_pa_args(["-m", "m", "--percentile", "97", "--verbose-csv"]))
    # p97 among the others, and no Avg latency: perf_analyzer's columns when it stabilises on a percentile
    assert percentile[9:] == ["p50 latency", "p90 latency", "p95 latency", "p97 latency", "p99 latency",
                              "request/response", "response wait"]  # fmt: skip
    row = csv_row(_run(), parse_pa_args(["-m", "m", "--percentile", "97"]))
    assert row["p97 latency"] == 5000  # the latency it stabilised on


def test_per_gpu_figures_from_tritons_metrics() -> None:
    text = """# TYPE nv_gpu_utilization gauge
nv_gpu_utilization{gpu_uuid="GPU-a"} 0.5
nv_gpu_utilization{gpu_uuid="GPU-b"} 0.25
# TYPE nv_gpu_power_usage gauge
nv_gpu_power_usage{gpu_uuid="GPU-a"} 60.5
# TYPE nv_gpu_memory_used_bytes gauge
nv_gpu_memory_used_bytes{gpu_uuid="GPU-a"} 1000
# TYPE nv_gpu_memory_total_bytes gauge
nv_gpu_memory_total_bytes{gpu_uuid="GPU-a"} 8000
# TYPE nv_cpu_utilization gauge
nv_cpu_utilization 0.75
"""
    devices = parse_gpu_devices(text)
    assert devices == {
        "GPU-a": {"util": 0.5, "power_w": 60.5, "mem_used_bytes": 1000, "mem_total_bytes": 8000},
        "GPU-b": {"util": 0.25},
    }
    later = {"util": 0.7, "power_w": 80.5, "mem_used_bytes": 3000, "mem_total_bytes": 8000}
    summary = gpu_device_summary([devices["GPU-a"], later])
    assert summary == {"util_mean": 0.6, "power_mean_w": 70.5, "mem_max_bytes": 3000, "mem_total_bytes": 8000}
    assert parse_gpu_devices("nv_cpu_utilization 0.1\n") == {}
