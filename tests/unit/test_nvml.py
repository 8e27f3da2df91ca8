"""GPU figures through NVML where Triton's metrics endpoint has none: attribution, absence, failure."""

from __future__ import annotations

import pytest

from tritongen.loadtest.result import CSV_COLUMNS, LoadTestReport, csv_cells
from tritongen.metrics.nvml import GpuReading, attribute, is_local_url, open_nvml, visible_devices
from tritongen.metrics.prometheus import MetricsSampler, Sample
from tritongen.report.loadtest_tables import loadtest_table

GIB = 1 << 30


def _gpus() -> list[GpuReading]:
    return [
        GpuReading(0, "GPU-aaaa-0000", "NVIDIA A100", 0.2, 10 * GIB, 80 * GIB, {}),
        GpuReading(1, "GPU-bbbb-1111", "NVIDIA H100", 0.8, 30 * GIB, 80 * GIB, {}),
    ]


def _with_processes(processes: dict[int, dict[int, int | None]]) -> list[GpuReading]:
    return [
        GpuReading(
            g.index, g.uuid, g.name, g.util, g.mem_used_bytes, g.mem_total_bytes, processes.get(g.index, {})
        )
        for g in _gpus()
    ]


def test_server_processes_on_one_of_two_gpus_count_that_gpu_and_their_own_memory() -> None:
    readings = _with_processes({1: {100: 2 * GIB, 101: 1 * GIB, 555: 20 * GIB}, 0: {777: 5 * GIB}})
    figures = attribute(readings, {100, 101, 102})
    assert figures is not None
    assert figures.indices == (1,) and figures.devices == ("NVIDIA H100",)
    assert figures.memory_scope == "server-processes"
    assert figures.mem_bytes == 3 * GIB  # another process's 20 GiB on the same GPU is not the server's
    assert figures.util == pytest.approx(0.8)


def test_server_processes_on_both_gpus_sum_memory_and_average_utilisation() -> None:
    readings = _with_processes({0: {100: 1 * GIB}, 1: {101: 2 * GIB}})
    figures = attribute(readings, {100, 101})
    assert figures is not None and figures.indices == (0, 1)
    assert figures.mem_bytes == 3 * GIB and figures.util == pytest.approx(0.5)


def test_no_process_memory_reported_falls_back_to_the_used_gpus_device_memory() -> None:
    readings = _with_processes({1: {100: None}})  # e.g. NVML_VALUE_NOT_AVAILABLE
    figures = attribute(readings, {100})
    assert figures is not None and figures.indices == (1,)
    assert figures.memory_scope == "device" and figures.mem_bytes == 30 * GIB


def test_no_server_pid_counts_every_gpu_device_wide() -> None:
    figures = attribute(_with_processes({1: {100: GIB}}), server_pids=None)
    assert figures is not None and figures.indices == (0, 1)
    assert figures.memory_scope == "device" and figures.mem_bytes == 40 * GIB
    assert figures.util == pytest.approx(0.5)


def test_server_not_on_any_gpu_uses_cuda_visible_devices_by_index_and_by_uuid() -> None:
    readings = _gpus()
    by_index = attribute(readings, {100}, "1")
    by_uuid = attribute(readings, {100}, "GPU-bbbb-1111")
    by_prefix = attribute(readings, {100}, "GPU-bbbb")
    for figures in (by_index, by_uuid, by_prefix):
        assert figures is not None and figures.indices == (1,) and figures.memory_scope == "device"
        assert figures.mem_bytes == 30 * GIB
    both = attribute(readings, {100}, "1,0")
    assert both is not None and both.indices == (1, 0)
    fallback = attribute(readings, {100}, cuda_visible=None)  # nothing says: every GPU
    assert fallback is not None and fallback.indices == (0, 1)
    assert attribute(readings, {100}, "") is None  # the server sees no GPU
    assert attribute(readings, {100}, "-1") is None


def test_visible_devices_stops_at_the_first_unknown_entry_and_ignores_unknown_ids() -> None:
    readings = _gpus()
    assert [g.index for g in visible_devices(readings, "0,7,1") or []] == [0]
    assert visible_devices(readings, "MIG-1234") is None  # nothing NVML knows: not a selection
    assert visible_devices(readings, cuda_visible=None) is None
    assert attribute([], server_pids=None) is None


def test_loopback_urls_are_local_and_other_hosts_are_not() -> None:
    assert is_local_url("127.0.0.1:8000") and is_local_url("http://localhost:8002/metrics")
    assert is_local_url("http://[::1]:8002/metrics")
    assert not is_local_url("http://gpu-box.example:8002/metrics")
    reason = open_nvml(server_pid=None, server_url="http://gpu-box.example:8002/metrics")
    assert isinstance(reason, str) and "another host" in reason


def test_summary_says_where_the_gpu_figures_came_from() -> None:
    sampler = MetricsSampler("http://127.0.0.1:1/metrics", nvml=False)
    cpu = {"cpu_util": 0.5, "cpu_mem_bytes": 1e9}
    sampler.samples = [
        Sample(
            10.0, cpu | {"gpu_util": 0.2, "gpu_mem_bytes": 3e9}, "nvml", "server-processes", ("NVIDIA H100",)
        ),
        Sample(
            11.0, cpu | {"gpu_util": 0.6, "gpu_mem_bytes": 4e9}, "nvml", "server-processes", ("NVIDIA H100",)
        ),
    ]
    gpu = sampler.summary("gpu", 0, 100)
    assert gpu is not None
    assert gpu.as_dict() == {
        "util_mean": pytest.approx(0.4),
        "util_max": 0.6,
        "mem_max_bytes": 4_000_000_000,
        "source": "nvml",
        "memory_scope": "server-processes",
        "devices": ["NVIDIA H100"],
    }
    cpu_summary = sampler.summary("cpu", 0, 100)
    assert cpu_summary is not None and cpu_summary.as_dict()["source"] == "triton"
    assert "devices" not in cpu_summary.as_dict()
    # Where the metrics endpoint has GPU figures (DCGM), those are the figures.
    sampler.samples.append(Sample(12.0, cpu | {"gpu_util": 0.9, "gpu_mem_bytes": 9e9}, "triton", "device"))
    dcgm = sampler.summary("gpu", 0, 100)
    assert dcgm is not None and dcgm.source == "triton" and dcgm.util_mean == 0.9 and dcgm.devices == []


def test_a_run_with_nvml_figures_has_its_source_in_the_csv() -> None:
    document = {
        "schema": "tritongen.loadtest/1", "model": "m", "protocol": "http", "url": "127.0.0.1:8000",
        "runs": [{
            "mode": "concurrency", "concurrency": 1, "target_rate": None, "batch_size": 1, "duration_s": 3.0,
            "requests": 10, "errors": 0, "errors_by_kind": {}, "qps": 3.3, "infer_per_s": 3.3,
            "latency_us": None, "server_us": None, "avg_batch": None, "stable": True,
            "gpu": {"util_mean": 0.5, "util_max": 0.7, "mem_max_bytes": 10, "source": "nvml",
                    "memory_scope": "device", "devices": ["NVIDIA H100"]},
            "cpu": None,
        }],
    }  # fmt: skip
    (run,) = LoadTestReport.from_json(document).runs
    assert "gpu_source" in CSV_COLUMNS and csv_cells(run)["gpu_source"] == "nvml"
    assert "GPU figures from NVML, whole device" in loadtest_table(LoadTestReport.from_json(document)).notes
