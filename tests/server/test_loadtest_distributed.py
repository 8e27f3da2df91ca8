"""Distributed load on the real server: workers join run after run, get lost and come back; figures merge."""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
import subprocess
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hdrh.histogram import HdrHistogram
from typer.testing import CliRunner

from tritongen.cli.main import app
from tritongen.io.loadgen_shared import LOWEST_US, PERCENTILES
from tritongen.loadtest.distributed import Distributed
from tritongen.loadtest.locust_process import LocustArgs
from tritongen.loadtest.windows import WindowLog
from tritongen.server.local import LocalTritonServer

from support.load_workers import Worker
from support.network import free_port

runner = CliRunner()


MODEL = "sleep_const"
"""12 ms per request: slow enough that few requests are in flight at a window edge."""


SHORT = ["--warmup", "1s", "--window", "2s"]


RATE_PER_S = 1000 / 12
"""The model's throughput (one instance, 12 ms a request) whatever the concurrency."""


MEASURING_AFTER_S = 8.0
"""Load served before a worker is killed: the first active window (2 s) and the warm-up (1 s, a
window) are over by then, so the kill falls in the measurement."""


HEARTBEAT_LOSS_S = (3.0, 6.0)
"""Locust marks a worker missing 3-4 s after its last heartbeat; the master notes it within 0.5 s."""


def _master(server: LocalTritonServer, port: int, workers: int, *args: str) -> tuple[int, str]:
    result = runner.invoke(
        app,
        ["loadtest", MODEL, "--url", server.http_url, "--metrics-url", server.metrics_url, "--master",
         "--workers", str(workers), "--master-port", str(port), "--worker-wait", "30s", *SHORT, *args],
    )  # fmt: skip
    return result.exit_code, result.stdout + result.stderr


def _served(server: LocalTritonServer) -> int:
    """Requests the server has finished for the model (ok and failed), by its own statistics."""
    with urllib.request.urlopen(f"http://{server.http_url}/v2/models/{MODEL}/stats", timeout=10) as reply:
        stats = json.load(reply)["model_stats"]
    return sum(
        int(s["inference_stats"]["success"]["count"]) + int(s["inference_stats"]["fail"]["count"])
        for s in stats
    )


class Later(threading.Thread):
    """Do ``action`` once ``condition`` holds (within ``timeout_s``); an error is kept for the test."""

    def __init__(
        self, condition: Callable[[], bool], action: Callable[[], None], timeout_s: float = 90
    ) -> None:
        super().__init__(daemon=True)
        self.condition, self.action, self.timeout_s = condition, action, timeout_s
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            deadline = time.monotonic() + self.timeout_s
            while not self.condition():
                assert time.monotonic() < deadline, "the condition never held"
                time.sleep(0.2)
            self.action()
        except BaseException as e:
            self.error = e

    def finish(self) -> None:
        self.join(timeout=self.timeout_s + 30)
        if self.error is not None:
            raise self.error


def _after_load(server: LocalTritonServer, seconds: float) -> Callable[[], bool]:
    """Whether the server has served ``seconds`` of this model's throughput since now."""
    baseline = _served(server)
    return lambda: _served(server) >= baseline + seconds * RATE_PER_S


def _merged(workers: dict[str, dict[str, Any]]) -> HdrHistogram:
    """The workers' histograms merged here, independently of the run's own per-window merge."""
    total = HdrHistogram(LOWEST_US, 120_000_000, 3)
    for figures in workers.values():
        if figures["histogram"]:
            total.add(HdrHistogram.decode(base64.b64decode(figures["histogram"])))
    return total


def _check_merge(run: dict[str, Any]) -> None:
    """The run's figures are consistent with its workers' (same windows: a check of the bookkeeping;
    the independent counts are checked by ``_check_worker_totals`` and ``_check_server_count``)."""
    workers = run["workers"]
    assert run["requests"] == sum(w["requests"] for w in workers.values())
    assert run["errors"] == sum(w["errors"] for w in workers.values())
    merged = _merged(workers)
    assert merged.get_total_count() == run["requests"] - run["errors"]
    for name, percentile in PERCENTILES.items():
        assert run["latency_us"][name] == float(merged.get_value_at_percentile(percentile)), name
    assert run["latency_us"]["max"] == float(merged.get_max_value())


def _check_worker_totals(run: dict[str, Any], totals: dict[str, int]) -> None:
    """Each worker's measured requests against its own count of every request it reported in the run.

    The worker counted its requests itself before sending them; the run measured a part of them:
    not the first active window, the warm-up nor the stop. With 2 s windows, a 1 s warm-up and 4 s
    measured, the whole run is at most ~13 s of load (two partial windows, the warm-up window, the
    measured span, the report grace and the stop): 3.3x the measured span, so 5x leaves a margin.
    """
    assert set(totals) == set(run["workers"]), (totals, run["workers"])
    for worker, figures in run["workers"].items():
        assert 0 < figures["requests"] <= totals[worker] <= 5 * figures["requests"], (worker, figures, totals)


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


@pytest.mark.slow
def test_two_workers_join_every_run_and_their_figures_merge(
    triton_server: LocalTritonServer, tmp_path: Path
) -> None:
    port = free_port()
    served_before = _served(triton_server)
    workers = [Worker(tmp_path, f"w{i}", port, wait="8s") for i in range(2)]
    try:
        out = tmp_path / "run.json"
        code, output = _master(
            triton_server, port, 2, "--concurrency", "2,4", "--duration", "4s", "--max-duration", "4s",
            "--json", str(out),
        )  # fmt: skip
        assert code == 0, output
        assert (
            "warning: --url 127.0.0.1:" in output
            and "workers on other machines would load their own" in output
        )
        runs = json.loads(out.read_text())["runs"]
        assert [r["concurrency"] for r in runs] == [2, 4]
        # The workers joined both runs' masters, then stopped on their own when no third came.
        for worker in workers:
            assert worker.process.wait(timeout=30) == 0, worker.stderr()
            lines = worker.stderr().splitlines()
            assert [line for line in lines if "joined the master" in line] == [
                f"run 1: joined the master at 127.0.0.1:{port}",
                f"run 2: joined the master at 127.0.0.1:{port}",
            ]
            assert lines[-1] == f"no master at 127.0.0.1:{port} for 8 s: stopping after 2 run(s)"
        reported = 0
        for number, run in enumerate(runs, start=1):
            assert run["status"] == "ok"
            assert len(run["workers"]) == 2 and not any(w["lost"] for w in run["workers"].values())
            assert all(window["users"] == run["concurrency"] for window in run["windows"])
            _check_merge(run)
            totals = dict(worker.totals()[number] for worker in workers)
            _check_worker_totals(run, totals)
            reported += sum(totals.values())
            _check_server_count(run)
        # Every request the workers reported reached the server; the server also finished those
        # in flight when each run's users stopped (at most its concurrency, 2 + 4).
        served = _served(triton_server) - served_before
        assert 0 <= served - reported <= 6, (served, reported)
    finally:
        for worker in workers:
            worker.stop()


@pytest.mark.slow
def test_a_killed_worker_is_reported_lost_and_the_others_take_its_users(
    triton_server: LocalTritonServer, tmp_path: Path
) -> None:
    port = free_port()
    workers = [Worker(tmp_path, f"w{i}", port, wait="30s") for i in range(3)]
    victim = workers[0]
    killer = Later(
        _after_load(triton_server, MEASURING_AFTER_S), lambda: os.kill(victim.process.pid, signal.SIGKILL)
    )
    try:
        out = tmp_path / "run.json"
        killer.start()  # its Locust worker dies with it (no quit message: a lost machine)
        code, output = _master(
            triton_server, port, 3, "--concurrency", "6", "--duration", "12s", "--max-duration", "12s",
            "--json", str(out),
        )  # fmt: skip
        killer.finish()
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
        # The two left took over its users: the last window (> 4 s after the loss) ran all 6.
        assert run["windows"][-1]["users"] == 6, run["windows"]
        if any(window["users"] < 6 for window in run["windows"]):
            assert any("the load dropped" in warning for warning in run["warnings"]), run["warnings"]
    finally:
        for worker in workers:
            worker.stop()


@pytest.mark.slow
def test_losing_the_last_worker_ends_the_run_with_its_partial_results(
    triton_server: LocalTritonServer, tmp_path: Path
) -> None:
    port = free_port()
    worker = Worker(tmp_path, "only", port, wait="30s")
    killer = Later(
        _after_load(triton_server, MEASURING_AFTER_S), lambda: os.kill(worker.process.pid, signal.SIGKILL)
    )
    try:
        out = tmp_path / "run.json"
        killer.start()
        code, output = _master(
            triton_server, port, 1, "--concurrency", "2", "--duration", "30s", "--max-duration", "30s",
            "--json", str(out),
        )  # fmt: skip
        killer.finish()
        assert code != 0, output
        run = json.loads(out.read_text())["runs"][0]
        assert run["status"] == "aborted"
        assert run["reason"].startswith("all 1 load worker(s) were lost"), run["reason"]
        assert run["requests"] > 0 and run["windows"]
        (figures,) = run["workers"].values()
        assert figures["lost"] and figures["requests"] == run["requests"]
    finally:
        worker.stop()


@pytest.mark.slow
def test_a_stalled_worker_that_comes_back_is_not_lost(
    triton_server: LocalTritonServer, tmp_path: Path
) -> None:
    port = free_port()
    workers = [Worker(tmp_path, f"w{i}", port, wait="30s") for i in range(2)]

    def stall() -> None:  # its Locust worker misses ~6 heartbeats: missing after 3-4, back before 8
        pid = workers[0].locust_pid()
        os.kill(pid, signal.SIGSTOP)
        time.sleep(6.0)
        os.kill(pid, signal.SIGCONT)

    staller = Later(_after_load(triton_server, 4.0), stall)
    try:
        out = tmp_path / "run.json"
        staller.start()
        code, output = _master(
            triton_server, port, 2, "--concurrency", "2", "--duration", "12s", "--max-duration", "12s",
            "--json", str(out),
        )  # fmt: skip
        staller.finish()
        assert code == 0, output
        run = json.loads(out.read_text())["runs"][0]
        assert run["status"] == "ok"
        assert len(run["workers"]) == 2 and not any(w["lost"] for w in run["workers"].values()), run[
            "workers"
        ]
        assert all(w["requests"] > 0 for w in run["workers"].values())
        assert any("came back" in warning for warning in run["warnings"]), run["warnings"]
    finally:
        for worker in workers:
            worker.stop()


def test_a_master_port_in_use_is_named_in_one_line(triton_server: LocalTritonServer, tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = int(taken.getsockname()[1])
        started = time.monotonic()
        code, output = _master(triton_server, port, 1, "--concurrency", "1", "--duration", "2s")
    assert code != 0
    errors = [line for line in output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and f"port {port} is in use" in errors[0] and "--master-port" in errors[0], output
    assert time.monotonic() - started < 30  # refused at once, not after the 30 s wait for workers


def _plain_master(
    server: LocalTritonServer, workdir: Path, port: int, run_time_s: int = 6
) -> subprocess.Popen[bytes]:
    """A Locust master with the package's locustfile whose ``--triton-inputs`` is relative to its own
    directory: a worker elsewhere cannot read it in place, as on another machine."""
    args = LocustArgs(
        host=server.http_url, model=MODEL, protocol="http", users=2, processes=1, run_time_s=run_time_s,
        window_s=1.0, t0=time.time(), results=workdir / "windows.jsonl", inputs=Path("inputs.npz"),
        master_args=tuple(Distributed(workers=1, port=port, wait_s=30).master_args()),
    )  # fmt: skip
    with (workdir / "master.log").open("wb") as log:
        return subprocess.Popen(args.argv(), cwd=workdir, stdout=log, stderr=subprocess.STDOUT)


@pytest.mark.slow
@pytest.mark.parametrize("data", ["present", "missing", "too large"])
def test_a_remote_worker_gets_the_request_data_from_the_master(
    triton_server: LocalTritonServer, tmp_path: Path, data: str
) -> None:
    master_dir, worker_dir = tmp_path / "master", tmp_path / "worker"
    master_dir.mkdir()
    worker_dir.mkdir()
    if data == "present":
        np.savez(master_dir / "inputs.npz", x=np.arange(4, dtype=np.float32))
    elif data == "too large":  # sparse: 65 MiB long, nothing written
        with (master_dir / "inputs.npz").open("wb") as huge:
            huge.truncate(65 * 2**20)
    port = free_port()
    master = _plain_master(triton_server, master_dir, port)
    worker = Worker(tmp_path, "remote", port, wait="2s", cwd=worker_dir)
    try:
        code = worker.process.wait(timeout=60)
        lines = worker.stderr().splitlines()
        errors = [line for line in lines if line.startswith("error:")]
        if data == "present":
            assert code == 0, worker.stderr()
            log = WindowLog(master_dir / "windows.jsonl")
            log.poll()
            assert sum(w.ok for w in log.windows.values()) > 0
            assert sum(w.error_count for w in log.windows.values()) == 0
        elif data == "missing":  # the worker says in one line that there is no data, and stops
            assert code == 1
            assert errors == [
                "error: the master cannot read --triton-inputs inputs.npz: No such file or directory. "
                "check the master's options and data, then start the worker again."
            ], worker.stderr()
        else:
            assert code == 1
            assert len(errors) == 1 and "inputs.npz is 65 MiB, more than the 64 MiB" in errors[0], (
                worker.stderr()
            )
            assert "copy the file to the same path on each worker" in errors[0]
    finally:
        worker.stop()
        master.kill()
        master.wait(timeout=10)


@pytest.mark.slow
def test_sigterm_makes_a_worker_tell_its_master_it_quits(
    triton_server: LocalTritonServer, tmp_path: Path
) -> None:
    np.savez(tmp_path / "inputs.npz", x=np.arange(4, dtype=np.float32))
    port = free_port()
    master = _plain_master(triton_server, tmp_path, port, run_time_s=120)
    worker = Worker(tmp_path, "w", port, wait="30s")
    try:
        deadline = time.monotonic() + 60
        windows = tmp_path / "windows.jsonl"
        # Mid-run: joined, and a window of its load has reached the master.
        while "run 1: joined" not in worker.stderr() or not (windows.exists() and windows.stat().st_size):
            assert time.monotonic() < deadline and worker.process.poll() is None, worker.stderr()
            time.sleep(0.2)
        locust_pid = worker.locust_pid()
        worker.process.send_signal(signal.SIGTERM)
        assert worker.process.wait(timeout=20) == 130, worker.stderr()
        assert not Path(f"/proc/{locust_pid}").exists() or "Z" in Path(f"/proc/{locust_pid}/stat").read_text()
        # Its Locust worker said quit: the headless master, its last worker gone, quits too (a
        # worker killed without a word would leave it waiting for the rest of its 120 s).
        assert master.wait(timeout=15) is not None
    finally:
        worker.stop()
        master.kill()
        master.wait(timeout=10)
