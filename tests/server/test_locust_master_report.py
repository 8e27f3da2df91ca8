"""The report of Locust's own master (or a lone Locust) running the shipped locustfile.

The Locust processes run here as a user runs them by hand, in a compose service or in a
cluster: ``locust -f loadtests/locustfile.py`` with ``--triton-*`` options, against the real
embedded server. At the end of the test the master prints its report, writes the
``tritongen.loadtest/1`` document (``--triton-json``) and a ``summary`` line of the results file.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import time
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from tritongen.cli.main import app
from tritongen.loadtest.locust_process import locust_binary
from tritongen.loadtest.result import LoadTestReport, RunResult
from tritongen.loadtest.windows import WindowLog
from tritongen.server.local import LocalTritonServer

from support.network import free_port
from support.paths import ROOT

LOCUSTFILE = ROOT / "loadtests" / "locustfile.py"
MODEL = "sleep_const"
"""12 ms per request: few requests are in flight when the users stop."""
REPORT_LINES = (
    "tritongen report: ", "  requests ", "  throughput ", "  latency µs ", "  server µs ", "  cpu ", "  gpu ",
    "  workers ", "  stable ",
)  # fmt: skip
"""The beginnings of the report's lines after its first (the summary line)."""
runner = CliRunner()


def _locust(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as sink:
        return subprocess.Popen(
            [str(locust_binary()), "-f", str(LOCUSTFILE), *args], stdout=sink, stderr=subprocess.STDOUT
        )


def _load_options(host: str, *extra: str) -> list[str]:
    return ["--host", host, "--triton-model", MODEL, "--loglevel", "WARNING", *extra]


def _windows_total(results: Path) -> int:
    """Requests (ok and failed) over the windows of a results file."""
    lines = [json.loads(line) for line in results.read_text().splitlines() if line.strip()]
    return sum(int(e["ok"]) + sum(e["errors"].values()) for e in lines if "index" in e)


def _summary_lines(results: Path) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in results.read_text().splitlines() if line.strip()]
    return [e["summary"] for e in lines if "summary" in e]


def _check_document(path: Path, workers: int, status: str = "ok") -> dict[str, Any]:
    """The document loads as the package reads it, with every field of a run; its one run's JSON."""
    document = json.loads(path.read_text())
    report = LoadTestReport.from_json(document)
    (run,) = report.runs
    assert document["schema"] == "tritongen.loadtest/1" and report.model == MODEL
    assert set(document["runs"][0]) == {f.name for f in fields(RunResult)}
    assert document["levels"] == report.to_json()["levels"]  # its level summary, as the package makes it
    assert run.status == status and run.requests > 0 and run.errors == 0
    assert run.mode == "concurrency" and run.batch_size == 1 and run.duration_s > 1.0
    assert run.qps > 0 and run.infer_per_s == pytest.approx(run.qps)
    assert run.latency_us is not None and 12_000 <= run.latency_us["p50"] <= run.latency_us["max"]
    assert len(run.workers) == workers and sum(w["requests"] for w in run.workers.values()) == run.requests
    return document["runs"][0]  # type: ignore[no-any-return]


def _printed_report(log: Path) -> list[str]:
    """The report's lines in a Locust log: the summary line and those after it."""
    lines = log.read_text(errors="replace").splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("tritongen report: ")]
    assert len(starts) == 1, log.read_text()[-3000:]
    report = lines[starts[0] - 1 : starts[0] + len(REPORT_LINES)]
    assert report[0].startswith("tritongen: ") and " requests in " in report[0], report
    assert [line.startswith(prefix) for line, prefix in zip(report[1:], REPORT_LINES, strict=True)] == [
        True
    ] * len(REPORT_LINES), report
    return report


@pytest.mark.slow
def test_a_headless_master_with_two_workers_reports_the_run(
    triton_server: LocalTritonServer, tmp_path: Path
) -> None:
    port = free_port()
    results, document = tmp_path / "windows.jsonl", tmp_path / "run.json"
    master_args = _load_options(
        triton_server.http_url, "--master", "--headless", "--expect-workers", "2", "--master-bind-host",
        "127.0.0.1", "--master-bind-port", str(port), "-u", "4", "-r", "4", "--run-time", "3s",
        "--triton-results", str(results), "--triton-json", str(document),
        "--triton-metrics-url", triton_server.metrics_url,
    )  # fmt: skip
    worker_args = _load_options(
        triton_server.http_url, "--worker", "--master-host", "127.0.0.1", "--master-port", str(port)
    )
    logs = [tmp_path / name for name in ("master.log", "worker0.log", "worker1.log")]
    commands = [master_args, worker_args, worker_args]
    processes = [_locust(args, log) for args, log in zip(commands, logs, strict=True)]
    try:
        assert processes[0].wait(timeout=90) == 0, logs[0].read_text()[-3000:]
    finally:
        for process in processes:
            process.kill()
            process.wait(timeout=10)
    run = _check_document(document, workers=2)
    assert run["requests"] == _windows_total(results)  # every window's requests are in the report
    (summary,) = _summary_lines(results)
    assert summary["requests"] == run["requests"] and summary["workers"] == run["workers"]
    log = WindowLog(results)
    log.poll()  # the reader of tritongen loadtest --master skips the summary line
    assert sum(w.ok + w.error_count for w in log.windows.values()) == run["requests"]
    assert run["server_us"] is not None and run["server_us"]["compute_infer"] >= 10_000
    assert run["avg_batch"] is not None and run["avg_batch"] >= 1.0
    assert run["cpu"] is not None and run["cpu"]["source"] == "triton"
    assert run["cpu"]["util_mean"] is not None or run["cpu"]["mem_max_bytes"] is not None
    assert run["gpu"] is None  # no GPU here, and no nv_gpu_* metrics
    report = _printed_report(logs[0])
    assert f"{run['requests']} requests in " in report[0]
    assert "no statistics" not in report[5] and "avg batch" in report[5]
    assert report[7] == "  gpu         no figures"
    rendered = runner.invoke(app, ["report", str(document), "-o", str(tmp_path / "report.html")])
    assert rendered.exit_code == 0, rendered.stdout + rendered.stderr
    assert MODEL in (tmp_path / "report.html").read_text()


@pytest.mark.slow
def test_a_lone_locust_over_grpc_reports_the_run(triton_server: LocalTritonServer, tmp_path: Path) -> None:
    results, document, log = tmp_path / "windows.jsonl", tmp_path / "run.json", tmp_path / "locust.log"
    args = _load_options(
        triton_server.grpc_url, "--triton-protocol", "grpc", "--headless", "-u", "2", "-r", "2",
        "--run-time", "2s", "--triton-results", str(results), "--triton-json", str(document),
        "--triton-metrics-url", triton_server.metrics_url,
    )  # fmt: skip
    locust = _locust(args, log)
    try:
        assert locust.wait(timeout=60) == 0, log.read_text()[-3000:]
    finally:
        locust.kill()
        locust.wait(timeout=10)
    run = _check_document(document, workers=1)
    assert run["requests"] == _windows_total(results)
    # the run time counts from the first request, not from the spawn (users start slowly when busy)
    assert 1.9 <= run["duration_s"] < 3.0, run["duration_s"]
    assert [s["requests"] for s in _summary_lines(results)] == [run["requests"]]
    assert run["server_us"] is not None and run["server_us"]["compute_infer"] >= 10_000  # over gRPC
    assert run["avg_batch"] is not None and run["cpu"] is not None and run["gpu"] is None
    report = _printed_report(log)
    assert "(grpc)" in report[1]


@pytest.mark.slow
def test_an_unreachable_metrics_endpoint_leaves_its_figures_null_in_one_line(
    triton_server: LocalTritonServer, tmp_path: Path
) -> None:
    document, log = tmp_path / "run.json", tmp_path / "locust.log"
    closed = f"http://127.0.0.1:{free_port()}/metrics"
    args = _load_options(
        triton_server.http_url, "--headless", "-u", "2", "-r", "2", "--run-time", "2s",
        "--triton-json", str(document), "--triton-metrics-url", closed,
    )  # fmt: skip
    locust = _locust(args, log)
    try:
        assert locust.wait(timeout=60) == 0, log.read_text()[-3000:]  # the closed endpoint holds nothing up
    finally:
        locust.kill()
        locust.wait(timeout=10)
    run = _check_document(document, workers=1)
    assert run["cpu"] is None and run["gpu"] is None
    assert run["server_us"] is not None  # the statistics API still answers
    said = [line for line in log.read_text().splitlines() if "metrics endpoint" in line]
    assert said == [f"tritongen: no CPU/GPU figures from the metrics endpoint {closed}: [Errno 111] "
                    "Connection refused"], said  # fmt: skip
    report = _printed_report(log)
    assert report[6:8] == ["  cpu         no figures", "  gpu         no figures"]


def test_an_unwritable_json_path_is_one_line_and_the_run_goes_on(
    triton_server: LocalTritonServer, tmp_path: Path
) -> None:
    log = tmp_path / "locust.log"
    target = tmp_path / "missing" / "run.json"
    args = _load_options(
        triton_server.http_url, "--headless", "-u", "1", "-r", "1", "--run-time", "1s",
        "--triton-json", str(target), "--triton-metrics-url", "none",
    )  # fmt: skip
    locust = _locust(args, log)
    try:
        assert locust.wait(timeout=60) == 0, log.read_text()[-3000:]
    finally:
        locust.kill()
        locust.wait(timeout=10)
    said = [line for line in log.read_text().splitlines() if "--triton-json" in line]
    assert said == [f"tritongen: cannot write --triton-json {target}: No such file or directory"]
    assert not target.parent.exists()
    report = _printed_report(log)
    assert report[6] == "  cpu         no figures"  # --triton-metrics-url none: not sampled


def test_compose_and_kubernetes_pass_the_report_options_to_the_master(tmp_path: Path) -> None:
    compose = yaml.safe_load((ROOT / "compose.yaml").read_text())
    master = compose["services"]["locust-master"]
    pairs = dict(itertools.pairwise(master["command"]))
    assert pairs["--triton-metrics-url"] == "http://tritonserver:8002/metrics"
    assert pairs["--triton-json"] == "/mnt/results/loadtest.json"
    assert pairs["--triton-results"] == "/mnt/results/windows.jsonl"
    assert "loadtest-results:/mnt/results" in master["volumes"] and "loadtest-results" in compose["volumes"]
    assert "prometheus_client" in master["build"]["dockerfile_inline"]
    out = tmp_path / "deploy"
    repo = ROOT / "model_repository"
    written = runner.invoke(app, ["kubernetes", str(repo), "-o", str(out), "--no-validate"])
    assert written.exit_code == 0, written.stderr
    pod = next(yaml.safe_load_all((out / "loadtest" / "master.yaml").read_text()))["spec"]["template"]["spec"]
    pairs = dict(itertools.pairwise(pod["containers"][0]["args"]))
    assert pairs["--triton-metrics-url"] == "http://triton.default.svc:8002/metrics"
    assert pairs["--triton-json"] == "/mnt/results/loadtest.json"
    assert {"name": "results", "mountPath": "/mnt/results"} in pod["containers"][0]["volumeMounts"]
    assert {"name": "results", "emptyDir": {}} in pod["volumes"]
    assert "prometheus_client" in pod["initContainers"][0]["args"]
    (worker,) = yaml.safe_load_all((out / "loadtest" / "worker.yaml").read_text())
    assert "--triton-json" not in worker["spec"]["template"]["spec"]["containers"][0]["args"]


@pytest.mark.slow
def test_a_master_told_to_quit_mid_run_reports_what_its_workers_sent(
    triton_server: LocalTritonServer, tmp_path: Path
) -> None:
    """SIGTERM, as ``tritongen loadtest --master`` stops its master: what the workers sent, promptly."""
    port = free_port()
    results, document = tmp_path / "windows.jsonl", tmp_path / "run.json"
    master_args = _load_options(
        triton_server.http_url, "--master", "--headless", "--expect-workers", "1", "--master-bind-host",
        "127.0.0.1", "--master-bind-port", str(port), "-u", "2", "-r", "2", "--run-time", "120s",
        "--triton-results", str(results), "--triton-json", str(document), "--triton-metrics-url", "none",
    )  # fmt: skip
    worker_args = _load_options(
        triton_server.http_url, "--worker", "--master-host", "127.0.0.1", "--master-port", str(port)
    )
    logs = [tmp_path / "master.log", tmp_path / "worker.log"]
    processes = [_locust(args, log) for args, log in zip([master_args, worker_args], logs, strict=True)]
    try:
        deadline = time.monotonic() + 60
        while not (results.exists() and results.stat().st_size):  # the load is on
            assert time.monotonic() < deadline and processes[0].poll() is None, logs[0].read_text()[-3000:]
            time.sleep(0.2)
        time.sleep(1.0)
        processes[0].terminate()
        processes[0].wait(timeout=30)  # promptly: not the 120 s run, nor a minute's wait for workers
    finally:
        for process in processes:
            process.kill()
            process.wait(timeout=10)
    run = _check_document(document, workers=1, status="interrupted")
    assert run["reason"] == "told to quit while the test ran"
    assert 0 < run["requests"] <= _windows_total(results)  # the worker's last windows may come after
    assert [s["requests"] for s in _summary_lines(results)] == [run["requests"]]
    _printed_report(logs[0])
