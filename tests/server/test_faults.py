"""Faults with the real embedded server: what the CLI says, exits with, and leaves behind.

Each test runs the CLI as its own process, breaks something under it (a model unloaded,
Ctrl-C, SIGKILL, a server too slow to start), then checks the exit code, the one error
line, the results on disk, and that no process and no shared-memory region is left.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from tritongen.client.repository import RepositoryControl
from tritongen.server.local import LocalTritonServer

from support.loads import QUICK_RUNS
from support.processes import (
    descendants,
    gone,
    named,
    servers_started_by,
    shm_regions,
    start_cli,
    wait_until,
    windows_with_requests,
)

pytestmark = pytest.mark.slow


MODEL = "mlp_onnx"


WINDOWS = ["--warmup", "1s", "--window", "1s"]


def _json(path: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(path.read_text())
    return doc


def test_model_unloaded_during_loadtest_stops_with_the_errors_counted(
    triton_server: LocalTritonServer, tmp_path: Path
) -> None:
    out = tmp_path / "unloaded.json"
    cli = start_cli(
        tmp_path / "cli", "loadtest", MODEL, "--url", triton_server.http_url,
        "--metrics-url", triton_server.metrics_url, "--concurrency", "2", "--duration", "60s", *WINDOWS,
        "--json", out,
    )  # fmt: skip
    control = RepositoryControl(triton_server.http_url)
    try:
        # Past the first partial window and the warm-up, and two measured windows in.
        wait_until(lambda: windows_with_requests(cli.tmp) >= 4, cli, 120, "measured windows")
        locust = named(descendants(cli.pid), "locust")
        control.unload(MODEL)
        unloaded_at = time.monotonic()
        code = cli.wait(45)
        stopped_after = time.monotonic() - unloaded_at
    finally:
        cli.kill()
        control.load(MODEL)
        control.close()
    assert code == 1, cli.stderr()
    assert stopped_after < 45, stopped_after  # when the unload is noticed, long before its 60 s
    (line,) = cli.error_lines()
    assert f"model '{MODEL}' is no longer ready" in line
    doc = _json(out)
    assert doc["status"] == "aborted"
    (run,) = doc["runs"]
    assert run["status"] == "aborted" and run["requests"] > run["errors"] > 0
    assert sum(run["errors_by_kind"].values()) == run["errors"]
    assert gone(locust) == []


@pytest.mark.parametrize("command", ["loadtest", "tune"])
def test_ctrl_c_keeps_results_and_leaves_nothing_running(
    served_repository: Path, tmp_path: Path, command: str
) -> None:
    """SIGINT to a command that started its own server: partial results, then nothing left."""
    if command == "loadtest":
        result = tmp_path / "loadtest.json"
        args = ["loadtest", MODEL, "--serve", served_repository, "--concurrency", "2", "--duration", "60s",
                *WINDOWS, "--json", result]  # fmt: skip

        def busy() -> bool:  # warm-up over and a measured window done (partial + warm-up + 2 windows)
            return windows_with_requests(cli.tmp) >= 4
    else:
        result = tmp_path / "tune" / "tune.json"
        args = ["tune", MODEL, "--repo", served_repository, "--max-batch-size", "16",
                "--preferred-batch-sizes", "none", "--max-queue-delay-us", "0,200", "--instances", "1",
                "--strategy", "grid", "--duration", "6s", "--warmup", "0.5s", "--concurrency", "2",
                "--out", result.parent]  # fmt: skip

        def busy() -> bool:  # the baseline is measured, the first candidate is running
            trials = result.parent / "trials"
            return trials.is_dir() and len(list(trials.iterdir())) >= 2

    cli = start_cli(tmp_path / "cli", *args)
    try:
        wait_until(busy, cli, 180, "the work started")
        wait_until(lambda: bool(shm_regions(cli.pid)), cli, 60, "the Python backend held shared memory")
        family = descendants(cli.pid)
        assert named(family, "tritonserver"), "the command should run its own server"
        assert shm_regions(cli.pid), "the Python backend should hold shared memory"
        cli.process.send_signal(signal.SIGINT)
        code = cli.wait(60)
    finally:
        cli.kill()
    assert code == 130, cli.stderr()
    doc = _json(result)
    assert doc["status"] == "interrupted"
    if command == "loadtest":
        assert doc["runs"][0]["requests"] > 0
    else:
        assert (result.parent / "trials" / doc["baseline"]["key"] / "result.json").is_file()
    assert gone(family) == []
    assert shm_regions(cli.pid) == []


def test_tune_killed_is_finished_by_resume_without_redoing_trials(
    served_repository: Path, tmp_path: Path
) -> None:
    out = tmp_path / "tune"
    args = ["tune", MODEL, "--repo", served_repository, "--max-batch-size", "16",
            "--preferred-batch-sizes", "none", "--max-queue-delay-us", "0,200,400", "--instances", "1",
            "--strategy", "grid", *QUICK_RUNS, "--concurrency", "2", "--rounds", "1",
            "--finalists", "1"]  # fmt: skip
    cli = start_cli(tmp_path / "first", *args, "--out", out)
    try:
        wait_until(lambda: len(list(out.glob("trials/*/result.json"))) >= 2, cli, 180, "two trials finished")
        family = descendants(cli.pid)
        cli.process.send_signal(signal.SIGKILL)
        cli.wait(10)
    finally:
        cli.kill()
    assert gone(family) == [], "the server and Locust die with the killed command"
    assert servers_started_by(cli.pid) == []
    finished = {p.parent.name: _json(p) for p in out.glob("trials/*/result.json")}
    assert 2 <= len(finished) <= 3

    resumed = start_cli(tmp_path / "second", *args, "--resume", out)
    try:
        assert resumed.wait(300) == 0, resumed.stderr()
    finally:
        resumed.kill()
    assert resumed.stderr().count("(reused)") == len(finished)
    doc = _json(out / "tune.json")
    assert doc["status"] == "ok"
    assert [t["key"] for t in doc["trials"]] == [f"mb16-pbauto-qd{d}-i1" for d in (0, 200, 400)]
    for key, before in finished.items():  # what was measured before the kill is kept as it was
        assert _json(out / "trials" / key / "result.json") == before
    assert shm_regions(cli.pid) == [], "the resumed run reclaims what the killed one left"


def test_server_not_ready_in_time_is_one_line_and_leaves_nothing(
    served_repository: Path, tmp_path: Path
) -> None:
    cli = start_cli(
        tmp_path / "cli", "serve", served_repository, "--models", MODEL, "--http-port", "0",
        "--grpc-port", "0", "--metrics-port", "0", "--ready-timeout", "0.2",
    )  # fmt: skip
    try:
        code = cli.wait(60)
    finally:
        cli.kill()
    assert code == 1
    (line,) = cli.error_lines()
    assert "within 0 s" in line or "not ready" in line
    assert servers_started_by(cli.pid) == [] and shm_regions(cli.pid) == []


CRASHING_MODEL = """
import os
import signal


class TritonPythonModel:
    def execute(self, requests):
        os.kill(os.getppid(), signal.SIGKILL)  # the stub's parent is the server: it dies mid-request
"""


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_a_server_that_dies_mid_request_is_one_line_pointing_at_its_log(
    tmp_path: Path, protocol: str
) -> None:
    repo = tmp_path / "repo"
    (repo / "crasher" / "1").mkdir(parents=True)
    (repo / "crasher" / "1" / "model.py").write_text(CRASHING_MODEL)
    (repo / "crasher" / "config.pbtxt").write_text(
        'backend: "python"\ninput [{ name: "x" data_type: TYPE_FP32 dims: [1] }]\n'
        'output [{ name: "y" data_type: TYPE_FP32 dims: [1] }]\ninstance_group [{ kind: KIND_CPU }]\n'
    )
    server = LocalTritonServer(repo, http_port=0, grpc_port=0, metrics_port=0)
    server.start()
    try:
        url = server.http_url if protocol == "http" else server.grpc_url
        cli = start_cli(tmp_path / "cli", "infer", "crasher", "--url", url, "--protocol", protocol)
        code = cli.wait(timeout_s=120)
    finally:
        server.stop()
    stderr = cli.stderr()
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert code == 1 and len(lines) == 1, stderr
    assert "closed the connection" in lines[0] and "see the server log" in lines[0], lines[0]


def test_tune_ends_at_the_trial_that_finds_its_server_gone(served_repository: Path, tmp_path: Path) -> None:
    """The embedded server killed mid-sweep: one line naming the trial and the server's log, trials kept."""
    out = tmp_path / "tune"
    cli = start_cli(
        tmp_path / "cli", "tune", MODEL, "--repo", served_repository, "--max-batch-size", "16",
        "--preferred-batch-sizes", "none", "--max-queue-delay-us", "0,200,400,600", "--instances", "1",
        "--strategy", "grid", "--duration", "2s", "--warmup", "0.5s", "--window", "0.5s",
        "--max-duration", "2s", "--concurrency", "2", "--rounds", "1", "--out", out,
    )  # fmt: skip
    try:
        wait_until(lambda: len(list(out.glob("trials/*/result.json"))) >= 1, cli, 180, "a trial finished")
        (server,) = servers_started_by(cli.pid)
        server.kill()
        code = cli.wait(120)
    finally:
        cli.kill()
    lines = cli.error_lines()
    assert code == 1 and len(lines) == 1, cli.stderr()
    assert "stopped answering during trial mb16-pbauto-qd" in lines[0] and "exited or crashed" in lines[0]
    assert "tritonserver.log" in lines[0] and f"--resume {out}" in lines[0]
    log = lines[0].split("see its log (")[1].split(")")[0]
    assert Path(log).is_file()  # kept: it says why the server died
    assert _json(out / "tune.json")["status"] == "failed"
    assert len(list(out.glob("trials/*/failed.json"))) == 1  # the sweep stopped at the trial that found it
    assert servers_started_by(cli.pid) == []
