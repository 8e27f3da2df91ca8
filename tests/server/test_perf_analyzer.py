"""``tritongen perf-analyzer`` on the real server: perf_analyzer's documented command lines, report, CSV."""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from tritongen.cli.main import app
from tritongen.client.endpoint import TritonEndpoint
from tritongen.perfanalyzer.csv_file import BASE, CPU_METRICS, GPU_METRICS, VERBOSE
from tritongen.server.local import LocalTritonServer

from support.pa_csv import ma_gpu_records
from support.streaming_model import STREAMING_MODEL
from support.versioned_model import SLOW_MS, VERSIONED_MODEL

runner = CliRunner()
QUICK = ["-p", "500", "-r", "4", "-s", "100"]
"""Half-second measurement windows, at most four of them per level, stable within 100% (a busy test
machine is not what these tests judge; ``test_a_level_that_does_not_stabilise_stops_the_sweep`` is)."""


def _pa(server: LocalTritonServer, *args: str | Path, protocol: str = "http") -> tuple[int, str, str]:
    url = (server.http_url if protocol == "http" else server.grpc_url).split("://")[-1]
    result = runner.invoke(
        app,
        ["perf-analyzer", "-u", url, "-i", protocol, "--metrics-url", server.metrics_url, *map(str, args)],
    )
    return result.exit_code, result.stdout, result.stderr


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def _summary(stdout: str) -> dict[float, tuple[float, int]]:
    """The closing lines: level → (throughput, latency µs)."""
    line = r"^(?:Concurrency|Request Rate): ([\d.]+), throughput: ([\d.]+) infer/sec, latency (\d+) usec$"
    found = re.findall(line, stdout, flags=re.M)
    return {float(level): (float(qps), int(us)) for level, qps, us in found}


def test_a_concurrency_range_reports_and_writes_perf_analyzers_csv(
    triton_server: LocalTritonServer, tmp_path: Path
) -> None:
    out = tmp_path / "perf.csv"
    code, stdout, stderr = _pa(
        triton_server, "-m", "mlp_onnx", "--concurrency-range", "1:3:2", *QUICK, "-f", out
    )
    assert code == 0, stderr + stdout
    for text in ("*** Measurement Settings ***", "  Measurement window: 500 msec", "Request concurrency: 1",
                 "Request concurrency: 3", "  Client: ", "  Server: ", "    Avg request latency: ",
                 "Inferences/Second vs. Client Average Batch Latency"):  # fmt: skip
        assert text in stdout, text
    assert re.search(r"Avg HTTP time: \d+ usec \(send/recv \d+ usec \+ response wait \d+ usec\)", stdout)
    rows = _rows(out)
    assert list(rows[0]) == ["Concurrency", *BASE]
    assert sorted(int(r["Concurrency"]) for r in rows) == [1, 3]
    rates = [float(r["Inferences/Second"]) for r in rows]
    assert rates == sorted(rates) and min(rates) > 0  # perf_analyzer sorts the rows by throughput
    summary = _summary(stdout)
    for row in rows:
        assert int(row["p50 latency"]) <= int(row["p90 latency"]) <= int(row["p99 latency"])
        parts = ["Client Send", "Network+Server Send/Recv", "Server Queue", "Server Compute Input",
                 "Server Compute Infer", "Server Compute Output", "Client Recv"]  # fmt: skip
        average = summary[float(row["Concurrency"])][1]  # the average latency, to the microsecond
        if int(row["Network+Server Send/Recv"]) > 0:  # what the server's parts leave of it
            assert abs(sum(int(row[p]) for p in parts) - average) <= len(parts)  # the columns add up to it


def test_a_request_rate_range_and_poisson(triton_server: LocalTritonServer, tmp_path: Path) -> None:
    out = tmp_path / "rate.csv"
    code, stdout, stderr = _pa(
        triton_server, "-m", "mlp_onnx", "--request-rate-range", "100:200:100",
        "--request-distribution", "poisson", *QUICK, "-r", "10", "-f", out,
    )  # fmt: skip  # a Poisson schedule's half-second windows vary more: more of them to settle in
    assert code == 0, stderr + stdout
    assert "Using poisson distribution on request generation" in stdout
    assert sorted(float(r["Request Rate"]) for r in _rows(out)) == [100.0, 200.0]
    assert set(_summary(stdout)) == {100.0, 200.0}


def test_batch_and_shape_with_a_percentile(triton_server: LocalTritonServer, tmp_path: Path) -> None:
    out = tmp_path / "batch.csv"
    code, stdout, stderr = _pa(
        triton_server, "-m", "text_onnx", "-b", "4", "--shape", "input_ids:8", "--shape", "attention_mask:8",
        "--percentile", "95", *QUICK, "-f", out,
    )  # fmt: skip
    assert code == 0, stderr + stdout
    assert "Batch size: 4" in stdout and "Stabilizing using p95 latency" in stdout
    assert "Inferences/Second vs. Client p95 Batch Latency" in stdout
    (row,) = _rows(out)
    (throughput, latency) = _summary(stdout)[1.0]
    assert int(row["p95 latency"]) == latency  # the summary reports the percentile it stabilised on
    assert float(row["Inferences/Second"]) == pytest.approx(throughput, rel=1e-3)


def test_grpc_and_a_streaming_model(triton_server: LocalTritonServer, tmp_path: Path) -> None:
    code, stdout, stderr = _pa(triton_server, "-m", "mlp_onnx", *QUICK, protocol="grpc")
    assert code == 0, stderr + stdout
    assert "Avg gRPC time" in stdout
    code, _, stderr = _pa(triton_server, "-m", "mlp_onnx", "--async", *QUICK, protocol="grpc")
    assert code == 2 and "--async: with a concurrency every level keeps N requests in flight" in stderr
    data = tmp_path / "plan.json"
    data.write_text(json.dumps({"data": [{"plan": [2, 1, 1, 1]}]}))  # 2 responses 1 ms apart, then the final
    code, stdout, stderr = _pa(
        triton_server,
        "-m",
        STREAMING_MODEL,
        "--streaming",
        "--input-data",
        data,
        *QUICK,
        "--stability-percentage",
        "100",
        protocol="grpc",  # what is tested is the stream, not the stability rule
    )
    assert code == 0, stderr + stdout
    assert "Detected decoupled model" in stdout and 1.0 in _summary(stdout)
    code, _, stderr = _pa(triton_server, "-m", "mlp_onnx", "--streaming", *QUICK, protocol="grpc")
    assert code != 0 and "'mlp_onnx' is not decoupled" in stderr
    code, _, stderr = _pa(triton_server, "-m", "mlp_onnx", "--sequence-length", "4", *QUICK)
    assert code != 0 and "'mlp_onnx' is not a sequence model" in stderr


@pytest.fixture(scope="module")
def mlp_document(triton_server: LocalTritonServer) -> dict[str, Any]:
    rng = np.random.default_rng(3)
    endpoint = TritonEndpoint(triton_server.http_url, "http", timeout_s=10)
    data, expected = [], []
    try:
        for _ in range(3):
            x = rng.standard_normal((1, 16)).astype(np.float32)
            result = endpoint.infer("mlp_onnx", {"input": x}, ("logits",))
            data.append({"input": x[0].tolist()})
            expected.append({"logits": np.asarray(result.outputs["logits"])[0].tolist()})
    finally:
        endpoint.close()
    return {"data": data, "validation_data": expected}


def test_input_data_with_validation(
    triton_server: LocalTritonServer, tmp_path: Path, mlp_document: dict[str, Any]
) -> None:
    good = tmp_path / "good.json"
    good.write_text(json.dumps(mlp_document))
    code, stdout, stderr = _pa(triton_server, "-m", "mlp_onnx", "--input-data", good, *QUICK)
    assert code == 0, stderr + stdout
    assert re.search(r"validated [\d,]+ responses: all match", stdout)
    mlp_document["validation_data"][1]["logits"][0] += 1.0
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(mlp_document))
    code, stdout, stderr = _pa(triton_server, "-m", "mlp_onnx", "--input-data", bad, *QUICK)
    assert code == 1 and "did not match the expected outputs" in stderr
    assert "first at data[1], element 0" in stdout


def test_collect_metrics_and_verbose_csv(triton_server: LocalTritonServer, tmp_path: Path) -> None:
    out, export = tmp_path / "verbose.csv", tmp_path / "profile.json"
    code, stdout, stderr = _pa(
        triton_server, "-m", "mlp_onnx", "--collect-metrics", "--verbose-csv", "-v", *QUICK, "-f", out,
        "--profile-export-file", export,
    )  # fmt: skip
    assert code == 0, stderr + stdout
    (row,) = _rows(out)
    assert list(row) == ["Concurrency", *BASE, *VERBOSE, *GPU_METRICS, *CPU_METRICS]
    # No GPU here: perf_analyzer's GPU cells are empty, and Model Analyzer's rules read no GPU records
    assert [row[column] for column in GPU_METRICS] == ["", "", "", ""] and ma_gpu_records(row) == {}
    # The client's parts over HTTP: writing and reading, and the wait between, add up to the average.
    assert abs(int(row["response wait"]) + int(row["request/response"]) - int(row["Avg latency"])) <= 1
    assert (
        0 < float(row["Avg CPU Utilization (tritongen)"]) <= 1.0
        and int(row["Max CPU Memory Usage (tritongen)"]) > 0
    )
    assert re.search(r"^  Pass \[1\] throughput: ", stdout, flags=re.M)  # -v: each window
    (run,) = json.loads(export.read_text())["runs"]  # tritongen's own JSON of the same run
    assert run["requests"] > 0 and run["latency_stddev_us"] is not None


def test_latency_threshold_stops_the_sweep(triton_server: LocalTritonServer) -> None:
    code, stdout, stderr = _pa(
        triton_server, "-m", "mlp_onnx", "--concurrency-range", "1:4", "-l", "0.001", *QUICK
    )
    assert code == 0, stderr + stdout
    assert list(_summary(stdout)) == [1.0]
    assert "Measured latency went over the set limit of 0.001 msec." in stderr


def test_a_level_that_does_not_stabilise_stops_the_sweep(
    triton_server: LocalTritonServer, tmp_path: Path
) -> None:
    out = tmp_path / "unstable.csv"
    code, stdout, stderr = _pa(
        triton_server, "-m", "mlp_onnx", "--concurrency-range", "1:2", "-p", "500", "-r", "3", "-s", "0.0001",
        "-f", out,
    )  # fmt: skip
    assert code == 1
    assert (
        "Failed to obtain stable measurement within 3 measurement windows for concurrency 1. "
        "Please try to increase the --measurement-interval." in stderr
    )
    assert "error: Failed to obtain stable measurement at concurrency 1" in stderr
    assert list(_summary(stdout)) == [1.0] and [r["Concurrency"] for r in _rows(out)] == ["1"]


def test_count_windows(triton_server: LocalTritonServer) -> None:
    args = ["-m", "mlp_onnx", "--measurement-mode", "count_windows", "--measurement-request-count", "200"]
    args += ["-r", "5", "-s", "100"]  # stable within 100%: the busy test machine is not judged here
    code, stdout, stderr = _pa(triton_server, *args)
    assert code == 0, stderr + stdout
    assert (
        'Using "count_windows" mode' in stdout and "Minimum number of samples in each window: 200" in stdout
    )
    assert 1.0 in _summary(stdout)


def test_an_unknown_model_is_one_line(triton_server: LocalTritonServer) -> None:
    code, stdout, stderr = _pa(triton_server, "-m", "ghost", *QUICK)
    assert code != 0 and "ghost" in stderr and stdout == ""
    assert len([line for line in stderr.splitlines() if line.strip()]) == 1


def test_an_input_directory_and_the_model_version(triton_server: LocalTritonServer, tmp_path: Path) -> None:
    folder = tmp_path / "inputs"
    folder.mkdir()
    np.arange(16, dtype=np.float32).tofile(
        folder / "input"
    )  # one request's raw values, named after the input
    code, stdout, stderr = _pa(triton_server, "-m", "mlp_onnx", "-x", "1", "--input-data", folder, *QUICK)
    assert code == 0, stderr + stdout
    assert 1.0 in _summary(stdout)
    code, _, stderr = _pa(triton_server, "-m", "mlp_onnx", "-x", "7", *QUICK)
    assert code != 0 and "-x 7: 'mlp_onnx' has no version 7 ready (ready: 1)" in stderr
    (folder / "input").write_bytes(bytes(12))
    code, _, stderr = _pa(triton_server, "-m", "mlp_onnx", "--input-data", folder, *QUICK)
    assert code != 0 and "file 'input' holds 3 values, but input 'input' takes 16" in stderr


def test_the_model_version_is_the_one_measured(triton_server: LocalTritonServer, tmp_path: Path) -> None:
    latency = {}
    for version in ("1", "2"):
        code, stdout, stderr = _pa(
            triton_server, "-m", VERSIONED_MODEL, "-x", version, *QUICK, protocol="grpc"
        )
        assert code == 0, stderr + stdout
        latency[version] = _summary(stdout)[1.0][1]
    assert latency["2"] >= SLOW_MS * 1000 > latency["1"]  # version 2 sleeps, version 1 does not
    out = tmp_path / "v1.csv"
    code, stdout, stderr = _pa(triton_server, "-m", VERSIONED_MODEL, "-x", "1", *QUICK, "-f", out)  # HTTP
    assert code == 0, stderr + stdout
    assert int(_rows(out)[0]["p50 latency"]) < SLOW_MS * 1000


def test_binary_search_finds_the_highest_concurrency_within_the_limit(
    triton_server: LocalTritonServer, tmp_path: Path
) -> None:
    # sleep_const answers one request at a time after 12 ms: concurrency c waits about 12c ms
    out = tmp_path / "search.csv"
    code, stdout, stderr = _pa(
        triton_server, "-m", "sleep_const", "--concurrency-range", "1:8", "--binary-search", "-l", "32",
        *QUICK, "-f", out,
    )  # fmt: skip
    assert code == 0, stderr + stdout
    assert "Using binary search on concurrency from 1 to 8" in stdout
    assert list(_summary(stdout)) == [1.0, 8.0, 4.0, 2.0, 3.0]  # start, end, then bisected
    assert "Binary search: the highest concurrency within 32 msec is 2" in stdout
    assert sorted(int(r["Concurrency"]) for r in _rows(out)) == [1, 2, 3, 4, 8]  # every level measured


PA_SCRIPT = """#!/bin/sh
# A script written for perf_analyzer, run unchanged.
set -e
perf_analyzer -m mlp_onnx -u "$1" --concurrency-range 1:2 -f "$2" --measurement-interval 500 \\
    --max-trials 4 --stability-percentage 100 --collect-metrics --verbose-csv
perf-analyzer -m mlp_onnx -u "$1" --no-such-option 2>"$3" || echo "exit $?" >>"$3"
"""


def test_the_installed_perf_analyzer_runs_a_perf_analyzer_script(
    triton_server: LocalTritonServer, tmp_path: Path
) -> None:
    scripts = Path(sys.executable).parent
    for name in ("perf_analyzer", "perf-analyzer"):
        assert (scripts / name).exists(), f"{name} is not installed: run make install (pip install -e .)"
    script, out, errors = tmp_path / "run_pa.sh", tmp_path / "out.csv", tmp_path / "errors.txt"
    script.write_text(PA_SCRIPT)
    env = {**os.environ, "PATH": f"{scripts}{os.pathsep}{os.environ['PATH']}"}
    url = triton_server.http_url.split("://")[-1]
    done = subprocess.run(
        ["sh", str(script), url, str(out), str(errors)], env=env, capture_output=True, text=True, timeout=240,
        cwd=tmp_path, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr + done.stdout
    assert "*** Measurement Settings ***" in done.stdout and "Request concurrency: 2" in done.stdout
    assert set(_summary(done.stdout)) == {1.0, 2.0}
    rows = _rows(out)
    assert list(rows[0]) == ["Concurrency", *BASE, *VERBOSE, *GPU_METRICS, *CPU_METRICS]
    assert sorted(int(r["Concurrency"]) for r in rows) == [1, 2]
    said = errors.read_text().splitlines()
    assert said[-1] == "exit 2" and "--no-such-option: not a perf_analyzer option" in said[0]
