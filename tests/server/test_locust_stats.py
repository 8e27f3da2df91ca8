"""Locust's own statistics count every request: standalone CSV, a master with workers, the web UI."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tritongen.server.local import LocalTritonServer

from support.machine import ATTEMPTS
from support.network import free_port
from support.paths import ROOT

LOCUSTFILE = ROOT / "loadtests" / "locustfile.py"


LOCUST = str(Path(sys.executable).with_name("locust"))


MODEL = "mlp_onnx"


def _locust(host: str, results: Path, *args: str) -> list[str]:
    return [
        LOCUST, "-f", str(LOCUSTFILE), "--loglevel", "WARNING", "--host", host,
        "--triton-model", MODEL, "--triton-results", str(results), *args,
    ]  # fmt: skip


def _half_bad(tmp_path: Path) -> Path:
    """Request steps that alternate a good request and one of the wrong shape (refused at once).

    Errors made this way leave the server alone; client deadlines that cancel gRPC calls in
    flight by the thousand are not something a shared test server should have to survive.
    """
    from tritongen.io.arrays import write_steps

    path = tmp_path / "half_bad.npz"
    good = np.zeros((1, 16), np.float32)
    write_steps(path, [{"input": good}, {"input": np.zeros((1, 15), np.float32)}])
    return path


def _tritongen_counts(results: Path) -> tuple[int, int]:
    """Requests (ok and failed) and errors over every window of the results file."""
    requests = errors = 0
    for line in (results.read_text() if results.exists() else "").splitlines():
        window = json.loads(line)
        if "ok" not in window:  # not a window (the master's other lines)
            continue
        failed = sum(window["errors"].values())
        requests += window["ok"] + failed
        errors += failed
    return requests, errors


ENOUGH_REQUESTS = 50
"""Requests a run needs for its counts to be compared."""


def _csv_rows(prefix: Path) -> dict[str, dict[str, str]]:
    with open(f"{prefix}_stats.csv") as stats:
        return {f"{row['Type']} {row['Name']}".strip(): row for row in csv.DictReader(stats)}


def _check_csv(prefix: Path, results: Path, method: str) -> int:
    """Locust's CSV counts what tritongen counted, in the model's row and the aggregate; returns errors."""
    requests, errors = _tritongen_counts(results)
    rows = _csv_rows(prefix)
    assert requests > ENOUGH_REQUESTS
    for key in (f"{method} {MODEL}", "Aggregated"):
        assert (int(rows[key]["Request Count"]), int(rows[key]["Failure Count"])) == (requests, errors), rows
    if errors:
        with open(f"{prefix}_failures.csv") as failures:
            assert sum(int(row["Occurrences"]) for row in csv.DictReader(failures)) == errors
    return errors


@pytest.mark.parametrize(
    ("protocol", "method", "extra"),
    [
        ("http", "POST", []),  # the closed-loop HTTP engine (an OS thread)
        ("http", "POST", ["--triton-user-rate", "300"]),  # the open loop
        ("http", "POST", ["--processes", "2"]),  # a master with two forked workers
        ("grpc", "grpc", ["--triton-inputs", "HALF_BAD"]),  # every other request refused by the server
    ],
    ids=["http-engine", "http-open-loop", "http-processes", "grpc-with-errors"],
)
def test_standalone_csv_counts_every_request(
    triton_server: LocalTritonServer, tmp_path: Path, protocol: str, method: str, extra: list[str]
) -> None:
    host = triton_server.http_url if protocol == "http" else triton_server.grpc_url
    extra = [str(_half_bad(tmp_path)) if arg == "HALF_BAD" else arg for arg in extra]
    # A 2 s run on a starved machine may spend it starting its users: run again, then skip.
    for attempt in range(ATTEMPTS):
        results, prefix = tmp_path / f"windows{attempt}.jsonl", tmp_path / f"run{attempt}"
        argv = _locust(host, results, "--headless", "--only-summary", "-u", "3", "-r", "3", "-t", "2s")
        argv += ["--csv", str(prefix), "--triton-protocol", protocol, *extra]
        done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=60)
        assert done.returncode in (0, 1), done.stderr[-2000:]  # 1: Locust's exit code when requests failed
        if _tritongen_counts(results)[0] > ENOUGH_REQUESTS:
            break
    else:
        pytest.skip(f"busy machine: {ATTEMPTS} runs of 2 s sent {ENOUGH_REQUESTS} requests or fewer each")
    errors = _check_csv(prefix, results, method)
    assert (errors > 0) == (protocol == "grpc")
    assert f"{method}     {MODEL}" in done.stderr  # the final console table has the model's row


def test_master_and_two_workers_report_every_request(
    triton_server: LocalTritonServer, tmp_path: Path
) -> None:
    results, prefix, port = tmp_path / "windows.jsonl", tmp_path / "run", free_port()
    master = _locust(
        triton_server.grpc_url, results, "--master", "--headless", "--only-summary", "--expect-workers", "2",
        "--master-bind-port", str(port), "-u", "4", "-r", "4", "-t", "3s", "--csv", str(prefix),
        "--stop-timeout", "2",  # as tritongen runs it: stopped workers still report, then quit
        "--triton-protocol", "grpc", "--triton-inputs", str(_half_bad(tmp_path)),
    )  # fmt: skip
    worker = [LOCUST, "-f", str(LOCUSTFILE), "--worker", "--master-port", str(port), "--loglevel", "WARNING"]
    with (tmp_path / "master.log").open("w") as log:
        master_process = subprocess.Popen(master, cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT)
        workers = [subprocess.Popen(worker, cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT) for _ in "ab"]
        try:
            assert master_process.wait(timeout=90) in (0, 1), (tmp_path / "master.log").read_text()[-3000:]
            for process in workers:  # quit by the master, not by missing its heartbeats a minute later
                process.wait(timeout=20)
        finally:
            for process in (master_process, *workers):
                if process.poll() is None:
                    process.kill()
                    process.wait(timeout=10)
    lines = [json.loads(line) for line in results.read_text().splitlines()]
    workers_seen = {line["worker"] for line in lines if "ok" in line}
    assert len(workers_seen) == 2
    assert _check_csv(prefix, results, "grpc") > 0


def _requests_row(port: int) -> dict[str, Any] | None:
    """The model's row and the total rate from the web UI's statistics, None before it answers."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/stats/requests", timeout=2) as response:
            doc = json.load(response)
    except OSError:
        return None
    row = next((r for r in doc["stats"] if r["name"] == MODEL and r["method"] == "POST"), None)
    return None if row is None else {**row, "total_rps": doc["total_rps"]}


def test_web_ui_shows_the_requests_during_a_run(triton_server: LocalTritonServer, tmp_path: Path) -> None:
    port, out = free_port(), tmp_path / "run.json"
    argv = [
        sys.executable, "-m", "tritongen", "loadtest", MODEL, "--url", triton_server.http_url,
        "--metrics-url", triton_server.metrics_url, "--web", "--web-port", str(port), "--concurrency", "2",
        "--duration", "3s", "--warmup", "1s", "--window", "1s", "--max-duration", "6s", "--json", str(out),
    ]  # fmt: skip
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        seen = None
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline and process.poll() is None:
            row = _requests_row(port)
            if row and row["num_requests"] > 0 and row["total_rps"] > 0:
                seen = row
                break
            time.sleep(0.3)
        _, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
    assert process.returncode == 0, stderr
    assert seen is not None, stderr
    assert stderr.count(f"Locust web UI: http://127.0.0.1:{port}") == 1
    doc = json.loads(out.read_text())
    assert doc["runs"][0]["requests"] > 0 and doc["runs"][0]["status"] == "ok"
