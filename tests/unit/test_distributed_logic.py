"""Distributed load on the real embedded server: ``loadtest --master`` and ``loadtest --worker`` processes.

The workers are real ``tritongen loadtest --worker`` processes of this machine that join
each run's Locust master over its port, as they would from other machines.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tritongen.cli.main import app
from tritongen.loadtest.distributed import Distributed, WorkerArgs, lost_reason
from tritongen.loadtest.windows import Window, WindowLog

from support.load_workers import Worker
from support.network import free_port
from support.paths import ROOT

runner = CliRunner()


MODEL = "sleep_const"
"""12 ms per request: slow enough that few requests are in flight at a window edge."""


def test_a_worker_whose_locust_keeps_crashing_stops_after_three_tries(tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "sitecustomize.py").write_text(
        "import sys\n"
        "if sys.argv and sys.argv[0].endswith('locust'):\n"
        "    raise SystemExit('locust: broken install')\n"
    )
    with socket.socket() as listener:  # a port that accepts connections, but no Locust master
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        port = int(listener.getsockname()[1])
        worker = Worker(tmp_path, "w", port, wait="5s", env={"PYTHONPATH": str(broken)})
        try:
            assert worker.process.wait(timeout=60) == 1, worker.stderr()
        finally:
            worker.stop()
    lines = [line for line in worker.stderr().splitlines() if line.strip()]
    assert lines == [
        "error: the Locust worker failed 3 times in a row within 5 s of its start: SystemExit: locust: "
        "broken install. "
        "check the worker's install (`make install`) and that the master runs the same tritongen."
    ], worker.stderr()


def test_a_worker_without_master_stops_after_its_wait(tmp_path: Path) -> None:
    port = free_port()
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
        (["m", "--master", "--workers", "0"], "--workers 0: a master needs at least 1"),
        (["m", "--master", "--sequences", "4"], "--master does not load sequence models"),
        (["m", "--master", "--serve", "repo"], "--master and --serve exclude each other"),
        (["m", "--master", "--worker-wait", "0s"], "--worker-wait must be positive"),
        (["m", "--workers", "2"], "--workers goes with --master"),
        (["m", "--master-host", "h"], "--master-host goes with --worker"),
        (["--worker"], "--worker needs --master-host"),
        (["--worker", "--master-host", "h", "--worker-wait", "0s"], "--worker-wait must be positive"),
        (["m", "--worker", "--master-host", "h"], "--worker takes no MODEL"),
        (["--worker", "--master-host", "h", "--concurrency", "4"], "no load options (--concurrency)"),
        (["--worker", "--master-host", "h", "--url", "x:1"], "--worker takes no load options (--url)"),
        (["--worker", "--master-host", "h", "--max-error-rate", "0.5"], "no load options (--max-error-rate)"),
        (["--worker", "--master-host", "h", "--metrics-url", "x:2"], "no load options (--metrics-url)"),
        (["--worker", "--master", "--master-host", "h"], "no load options (--master)"),
        ([], "MODEL is missing"),
    ],
)
def test_bad_combinations_are_refused_in_one_line(args: list[str], message: str) -> None:
    result = runner.invoke(app, ["loadtest", *args])
    assert result.exit_code == 1
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], result.stderr


def _window_log(tmp_path: Path, lines: list[dict[str, Any]], keep_reports: bool = False) -> WindowLog:
    path = tmp_path / "windows.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    log = WindowLog(path, keep_reports=keep_reports)
    log.poll()
    return log


def test_lost_lines_are_read_and_all_lost_ends_the_run(tmp_path: Path) -> None:
    log = _window_log(
        tmp_path,
        [
            {
                "worker": "a",
                "index": 3,
                "ok": 2,
                "errors": {"http_503": 1},
                "sent": 3,
                "hist": "",
                "users": 2,
            },
            {"worker": "b", "lost": True, "at": 105.0},
            {"worker": "a", "index": 4, "ok": 0, "errors": {}, "sent": 0, "hist": "", "users": 3},
        ],
    )
    assert log.lost == {"b": 105.0} and sorted(log.windows) == [3, 4]
    assert isinstance(log.windows[3], Window) and log.windows[3].workers == {"a"}
    assert log.windows[3].users == {"a": 2} and log.windows[4].users == {"a": 3}
    assert log.windows[3].reports == []  # kept only when asked (distributed runs)
    assert lost_reason(log.lost, expected=2, t0=100.0) is None
    assert lost_reason({"a": 104.0, "b": 105.0}, expected=2, t0=100.0) == (
        "all 2 load worker(s) were lost (the last 5.0 s into the run)"
    )


def test_a_worker_back_after_missed_heartbeats_is_no_longer_lost(tmp_path: Path) -> None:
    log = _window_log(
        tmp_path,
        [
            {"worker": "a", "lost": True, "at": 104.0},
            {"worker": "b", "lost": True, "at": 105.0},
            {"worker": "a", "lost": False, "at": 108.0},
        ],
    )
    assert log.lost == {"b": 105.0} and log.back == {"a": 108.0}
    assert lost_reason(log.lost, expected=2, t0=100.0) is None  # "a" is back: the run goes on


def test_the_measurement_starts_once_every_worker_sends(tmp_path: Path) -> None:
    def line(worker: str, index: int, ok: int) -> dict[str, Any]:
        return {"worker": worker, "index": index, "ok": ok, "errors": {}, "sent": ok, "hist": ""}

    log = _window_log(tmp_path, [line("a", 2, 5), line("b", 2, 0), line("a", 3, 5), line("b", 4, 1)], True)
    assert log.first_active() == 2  # local processes: the first window in which any request finished
    assert log.first_active(workers=2) == 4  # distributed: "b" sent its first in window 4
    assert log.first_active(workers=3) is None
    assert [r["worker"] for r in log.windows[2].reports] == ["a", "b"]


def test_worker_command_line_and_master_options() -> None:
    argv = WorkerArgs("10.0.0.5", 5557).argv()
    assert argv[1:] == [
        "-f", argv[2], "--worker", "--master-host", "10.0.0.5", "--master-port", "5557",
        "--loglevel", "WARNING",
    ]  # fmt: skip
    assert argv[2].endswith("locustfile.py")
    assert Distributed(workers=3, port=6000, wait_s=12.5).master_args() == [
        "--master", "--expect-workers", "3", "--expect-workers-max-wait", "13",
        "--master-bind-host", "*", "--master-bind-port", "6000", "--enable-rebalancing",
    ]  # fmt: skip


def test_a_master_without_workers_or_without_its_port_says_which() -> None:
    master = Distributed(workers=2, port=6000, wait_s=30)
    assert master.exit_reason(["x", "[..] ERROR/locust.main: Gave up waiting for workers to connect"]) == (
        master.no_workers_reason()
    )
    busy = "The Locust master port (6000) was busy. Close any applications using that port"
    assert master.exit_reason([busy]).startswith("port 6000 is in use")
    bind = "locust.exception.RPCError: Socket bind failure: Address already in use (addr='tcp://*:6000')"
    assert master.exit_reason([bind]).startswith("port 6000 is in use")
    assert master.exit_reason(["Traceback", "ValueError: boom", ""]) == (
        "the Locust master exited early: ValueError: boom"
    )


LEFTOVER_PROBE = r"""
import sys, types

sys.path.insert(0, sys.argv[1])  # the locustfile's folder, as Locust puts it on sys.path
from tritonload.recording import Collector, Recorder
from tritonload.shared import WindowMessage

recorder = Recorder(t0=100.0, window_s=1.0)
now = 103.5 - recorder.wall_offset
recorder.record(now, now + 0.001, None)
windows = recorder.drain(everything=True)
collector = Collector(sys.argv[2])
run = types.SimpleNamespace(runner=None, parsed_options=types.SimpleNamespace(triton_t0=100.0))
for worker, t0 in (("this-run", 100.0), ("earlier-run", 90.0)):
    message = WindowMessage(worker=worker, windows=windows, t0=t0, users=1)
    collector.receive(run, types.SimpleNamespace(node_id="local", data=message))
"""


def test_windows_of_another_run_are_dropped(tmp_path: Path) -> None:
    """A worker left over from an earlier run (its ``t0``) may reach the next master: not counted."""
    results = tmp_path / "windows.jsonl"
    done = subprocess.run(
        [sys.executable, "-c", LEFTOVER_PROBE, str(ROOT / "loadtests"), str(results)],
        capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    log = WindowLog(results)
    log.poll()
    assert [sorted(w.workers) for w in log.windows.values()] == [["this-run"]]
    assert log.windows[3].users == {"this-run": 1}
