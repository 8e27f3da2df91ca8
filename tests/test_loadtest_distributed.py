"""Distributed load on the real embedded server: ``loadtest --master`` and ``loadtest --worker`` processes.

The workers are real ``tritongen loadtest --worker`` processes of this machine that join
each run's Locust master over its port, as they would from other machines.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hdrh.histogram import HdrHistogram
from typer.testing import CliRunner

from tritongen.cli.main import app
from tritongen.loadtest.distributed import WORKER_FAILURE, Distributed, lost_reason, worker_argv
from tritongen.loadtest.locust_process import LocustArgs
from tritongen.loadtest.windows import LOWEST_US, PERCENTILES, Window, WindowLog
from tritongen.server.local import LocalTritonServer

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()
MODEL = "sleep_const"
"""12 ms per request: slow enough that few requests are in flight at a window edge."""
SHORT = ["--warmup", "1s", "--window", "2s"]
KILL_AFTER_S = 10.0
"""From a worker joining to its kill: Locust's start (~2 s), the first window and the warm-up (~6 s,
when measuring starts), then a measured window or two (a run of 12 s measured ends at ~20 s)."""
HEARTBEAT_LOSS_S = (3.0, 6.0)
"""Locust marks a worker missing 3-4 s after its last heartbeat; the master notes it within 0.5 s."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Worker:
    """A ``tritongen loadtest --worker`` process, its stderr in a file."""

    def __init__(self, workdir: Path, name: str, port: int, wait: str, cwd: Path | None = None) -> None:
        self.stderr_path = workdir / f"{name}.err"
        with self.stderr_path.open("wb") as err:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "tritongen", "loadtest", "--worker", "--master-host", "127.0.0.1",
                 "--master-port", str(port), "--worker-wait", wait],
                stdout=subprocess.DEVNULL, stderr=err, stdin=subprocess.DEVNULL, cwd=cwd,
                env={**os.environ, "COLUMNS": "200"},
            )  # fmt: skip

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)


def _master(server: LocalTritonServer, port: int, workers: int, *args: str) -> tuple[int, str]:
    result = runner.invoke(
        app,
        ["loadtest", MODEL, "--url", server.http_url, "--metrics-url", server.metrics_url, "--master",
         "--workers", str(workers), "--master-port", str(port), "--worker-wait", "30s", *SHORT, *args],
    )  # fmt: skip
    return result.exit_code, result.stdout + result.stderr


def _merged(workers: dict[str, dict[str, Any]]) -> HdrHistogram:
    """The workers' histograms merged here, independently of the run's own per-window merge."""
    total = HdrHistogram(LOWEST_US, 120_000_000, 3)
    for figures in workers.values():
        if figures["histogram"]:
            total.add(HdrHistogram.decode(base64.b64decode(figures["histogram"])))
    return total


def _check_merge(run: dict[str, Any]) -> None:
    """Requests are the sum of the workers'; percentiles are those of the merged worker histograms."""
    workers = run["workers"]
    assert run["requests"] == sum(w["requests"] for w in workers.values())
    assert run["errors"] == sum(w["errors"] for w in workers.values())
    merged = _merged(workers)
    assert merged.get_total_count() == run["requests"] - run["errors"]
    for name, percentile in PERCENTILES.items():
        assert run["latency_us"][name] == float(merged.get_value_at_percentile(percentile)), name
    assert run["latency_us"]["max"] == float(merged.get_max_value())


def _check_server_count(run: dict[str, Any]) -> None:
    """The server counted the same requests, but for those finishing near the window edges.

    The server's counts are read at the first poll of each edge's window (within ~0.1 s,
    plus the statistics call): at each of the two edges the counts can differ by the
    requests in flight (the concurrency) plus those finishing in that gap; 0.3 s of
    throughput per edge bounds the gap with a margin of about 2x on a loaded 2-core machine.
    """
    server = run["server_models"][MODEL]["requests"]
    bound = 2 * (run["concurrency"] + 0.3 * run["qps"])
    assert abs(server - run["requests"]) <= bound, (server, run["requests"], bound)


@pytest.mark.triton
@pytest.mark.slow
def test_two_workers_join_every_run_and_their_figures_merge(
    triton_server: LocalTritonServer, tmp_path: Path
) -> None:
    port = _free_port()
    workers = [Worker(tmp_path, f"w{i}", port, wait="8s") for i in range(2)]
    try:
        out = tmp_path / "run.json"
        code, output = _master(
            triton_server, port, 2, "--concurrency", "2,4", "--duration", "4s", "--max-duration", "4s",
            "--json", str(out),
        )  # fmt: skip
        assert code == 0, output
        runs = json.loads(out.read_text())["runs"]
        assert [r["concurrency"] for r in runs] == [2, 4]
        for run in runs:
            assert run["status"] == "ok"
            assert len(run["workers"]) == 2 and not any(w["lost"] for w in run["workers"].values())
            assert all(w["requests"] > 0 for w in run["workers"].values())
            _check_merge(run)
            _check_server_count(run)
        # The workers joined both runs' masters, then stopped on their own when no third came.
        for worker in workers:
            assert worker.process.wait(timeout=30) == 0, worker.stderr()
            lines = worker.stderr().splitlines()
            assert [line for line in lines if "joined the master" in line] == [
                f"run 1: joined the master at 127.0.0.1:{port}",
                f"run 2: joined the master at 127.0.0.1:{port}",
            ]
            assert lines[-1] == f"no master at 127.0.0.1:{port} for 8 s: stopping after 2 run(s)"
    finally:
        for worker in workers:
            worker.stop()


@pytest.mark.triton
@pytest.mark.slow
def test_a_killed_worker_is_reported_lost_and_the_run_goes_on(
    triton_server: LocalTritonServer, tmp_path: Path
) -> None:
    port = _free_port()
    workers = [Worker(tmp_path, f"w{i}", port, wait="30s") for i in range(3)]
    try:
        out = tmp_path / "run.json"
        victim = workers[0]

        def kill_mid_run() -> None:
            deadline = time.monotonic() + 60
            while "run 1: joined" not in victim.stderr() and time.monotonic() < deadline:
                time.sleep(0.2)
            time.sleep(KILL_AFTER_S)
            os.kill(victim.process.pid, signal.SIGKILL)  # its Locust worker dies with it

        killer = threading.Thread(target=kill_mid_run)
        killer.start()
        code, output = _master(
            triton_server, port, 3, "--concurrency", "6", "--duration", "12s", "--max-duration", "12s",
            "--json", str(out),
        )  # fmt: skip
        killer.join()
        assert code == 0, output
        run = json.loads(out.read_text())["runs"][0]
        assert run["status"] == "ok"
        lost = {wid: w for wid, w in run["workers"].items() if w["lost"]}
        assert len(lost) == 1, run["workers"]
        (figures,) = lost.values()
        assert figures["lost_at_s"] < (run["windows"][-1]["index"] + 1) * 2.0  # noticed mid-run
        earliest_kill_s = figures["lost_at_s"] - HEARTBEAT_LOSS_S[1]
        if earliest_kill_s > (run["windows"][0]["index"] + 1) * 2.0 + 0.5:
            assert figures["requests"] > 0  # it died after reporting a measured window: that counts
        alive = [w for w in run["workers"].values() if not w["lost"]]
        assert len(alive) == 2 and all(w["requests"] > 0 for w in alive)
        _check_merge(run)
        assert any("was lost" in warning for warning in run["warnings"])
        assert "was lost" in output
    finally:
        for worker in workers:
            worker.stop()


def _plain_master(server: LocalTritonServer, workdir: Path, port: int) -> subprocess.Popen[bytes]:
    """A Locust master with the package's locustfile whose ``--triton-inputs`` is relative to its own
    directory: a worker elsewhere cannot read it in place, as on another machine."""
    args = LocustArgs(
        host=server.http_url, model=MODEL, protocol="http", users=2, processes=1, run_time_s=6, window_s=1.0,
        t0=time.time(), results=workdir / "windows.jsonl", inputs=Path("inputs.npz"),
        master_args=tuple(Distributed(workers=1, port=port, wait_s=30).master_args()),
    )  # fmt: skip
    with (workdir / "master.log").open("wb") as log:
        return subprocess.Popen(args.argv(), cwd=workdir, stdout=log, stderr=subprocess.STDOUT)


@pytest.mark.triton
@pytest.mark.slow
@pytest.mark.parametrize("has_data", [True, False])
def test_a_remote_worker_gets_the_request_data_from_the_master(
    triton_server: LocalTritonServer, tmp_path: Path, has_data: bool
) -> None:
    master_dir, worker_dir = tmp_path / "master", tmp_path / "worker"
    master_dir.mkdir()
    worker_dir.mkdir()
    if has_data:
        np.savez(master_dir / "inputs.npz", x=np.arange(4, dtype=np.float32))
    port = _free_port()
    master = _plain_master(triton_server, master_dir, port)
    worker = Worker(tmp_path, "remote", port, wait="2s", cwd=worker_dir)
    try:
        code = worker.process.wait(timeout=60)
        lines = worker.stderr().splitlines()
        if has_data:
            assert code == 0, worker.stderr()
            log = WindowLog(master_dir / "windows.jsonl")
            log.poll()
            assert sum(w.ok for w in log.windows.values()) > 0
            assert sum(w.error_count for w in log.windows.values()) == 0
        else:  # the worker says in one line that there is no data, and stops
            assert code == 1
            errors = [line for line in lines if line.startswith("error:")]
            assert errors == [
                "error: the master cannot read --triton-inputs inputs.npz: No such file or directory. "
                "check the master's options and data, then start the worker again."
            ], worker.stderr()
    finally:
        worker.stop()
        master.kill()
        master.wait(timeout=10)


def test_a_worker_without_master_stops_after_its_wait(tmp_path: Path) -> None:
    port = _free_port()
    worker = Worker(tmp_path, "alone", port, wait="1s")
    try:
        assert worker.process.wait(timeout=30) == 0
        assert worker.stderr().strip() == f"no master at 127.0.0.1:{port} for 1 s: stopping after 0 run(s)"
    finally:
        worker.stop()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["m", "--master", "--mix", "1:1"], "--master does not run --mix"),
        (["m", "--master", "--shared-memory", "system"], "--master and --shared-memory exclude"),
        (["m", "--master", "--processes", "2"], "--master and --processes exclude"),
        (["m", "--master", "--workers", "3", "--concurrency", "2"], "--concurrency 2 is below --workers 3"),
        (["m", "--master", "--sequences", "4"], "--master does not load sequence models"),
        (["m", "--workers", "2"], "--workers goes with --master"),
        (["m", "--master-host", "h"], "--master-host goes with --worker"),
        (["--worker"], "--worker needs --master-host"),
        (["m", "--worker", "--master-host", "h"], "--worker takes no MODEL"),
        (["--worker", "--master-host", "h", "--concurrency", "4"], "no load options (--concurrency)"),
        (["--worker", "--master-host", "h", "--url", "x:1"], "--worker takes no load options (--url)"),
        ([], "MODEL is missing"),
    ],
)
def test_bad_combinations_are_refused_in_one_line(args: list[str], message: str) -> None:
    result = runner.invoke(app, ["loadtest", *args])
    assert result.exit_code == 1
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], result.stderr


def test_lost_lines_are_read_and_all_lost_ends_the_run(tmp_path: Path) -> None:
    path = tmp_path / "windows.jsonl"
    lines = [
        {"worker": "a", "index": 3, "ok": 2, "errors": {"http_503": 1}, "sent": 3, "hist": ""},
        {"worker": "b", "lost": True, "at": 105.0},
        {"worker": "a", "index": 4, "ok": 0, "errors": {}, "sent": 0, "hist": ""},
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    log = WindowLog(path)
    log.poll()
    assert log.lost == {"b": 105.0} and sorted(log.windows) == [3, 4]
    assert isinstance(log.windows[3], Window) and log.windows[3].workers == {"a"}
    assert lost_reason(log.lost, expected=2, t0=100.0) is None
    assert lost_reason({"a": 104.0, "b": 105.0}, expected=2, t0=100.0) == (
        "all 2 load worker(s) were lost (the last 5.0 s into the run)"
    )


def test_worker_command_line_and_shared_constant() -> None:
    argv = worker_argv("10.0.0.5", 5557)
    assert argv[1:] == [
        "-f", argv[2], "--worker", "--master-host", "10.0.0.5", "--master-port", "5557",
        "--loglevel", "WARNING",
    ]  # fmt: skip
    assert argv[2].endswith("locustfile.py")
    assert f'WORKER_FAILURE = "{WORKER_FAILURE}"' in (ROOT / "loadtests" / "locustfile.py").read_text()
    assert Distributed(workers=3, port=6000, wait_s=12.5).master_args() == [
        "--master", "--expect-workers", "3", "--expect-workers-max-wait", "13",
        "--master-bind-host", "*", "--master-bind-port", "6000",
    ]  # fmt: skip
