"""``--cpus server=…,load=…`` on the real server: both trees run on their cores during the run, and after it
the server has its cores back; a bad plan is refused before anything is measured."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import psutil
import pytest
from typer.testing import CliRunner

from tritongen.cli.main import app
from tritongen.client.address import ServerAddress
from tritongen.server.affinity import machine_cores
from tritongen.server.local import LocalTritonServer

from support.cli_output import error_line

pytestmark = pytest.mark.slow
runner = CliRunner()
QUICK = ["--duration", "1s", "--warmup", "0.3s", "--window", "0.5s", "--max-duration", "1s"]


class _Watcher(threading.Thread):
    """Every core set the server's threads and the Locust processes' threads had, polled meanwhile."""

    def __init__(self, server_pid: int) -> None:
        super().__init__(daemon=True)
        self.server_pid = server_pid
        self.server: set[frozenset[int]] = set()
        self.locust: set[frozenset[int]] = set()
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.05):
            self.server |= _thread_cores(self.server_pid)
            for child in psutil.Process().children(recursive=True):
                try:
                    if "locust" in " ".join(child.cmdline()):
                        self.locust |= _thread_cores(child.pid)
                except psutil.Error:
                    pass


def _thread_cores(pid: int) -> set[frozenset[int]]:
    found = set()
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            found.add(frozenset(os.sched_getaffinity(int(tid))))
    except OSError:
        pass
    return found


@pytest.mark.skipif(len(machine_cores()) < 2, reason="pinning apart needs two cores")
def test_the_server_and_the_load_run_on_their_own_cores(
    triton_server: LocalTritonServer, tmp_path: Path
) -> None:
    server_pid = ServerAddress.parse(triton_server.http_url).listening_pid()
    assert server_pid is not None
    before = _thread_cores(server_pid)
    server_core, load_core = sorted(machine_cores())[:2]
    watcher = _Watcher(server_pid)
    watcher.start()
    out = tmp_path / "run.json"
    try:
        result = runner.invoke(
            app,
            ["loadtest", "mlp_onnx", "--url", triton_server.http_url,
             "--metrics-url", triton_server.metrics_url, "--concurrency", "2", *QUICK,
             "--cpus", f"server={server_core},load={load_core}", "--json", str(out)],
        )  # fmt: skip
    finally:
        watcher.done.set()
        watcher.join()
    assert result.exit_code == 0, result.stderr + result.stdout
    assert json.loads(out.read_text())["cpus"] == {"server": [server_core], "load": [load_core]}
    assert frozenset({server_core}) in watcher.server  # every thread of the server, pinned meanwhile
    assert watcher.locust == {frozenset({load_core})}  # Locust ran on the load core from its start
    assert _thread_cores(server_pid) == before  # and the server has its cores back


@pytest.mark.parametrize(
    ("plan", "message"),
    [
        ("server=0,load=0", "puts core 0 in both server and load"),
        ("server=0,load=4096", "names core 4096, which this machine does not have"),
        ("load=1", "must give server=LIST and load=LIST"),
    ],
)
def test_a_bad_plan_is_refused_before_anything_runs(
    triton_server: LocalTritonServer, tmp_path: Path, plan: str, message: str
) -> None:
    out = tmp_path / "run.json"
    result = runner.invoke(
        app, ["loadtest", "mlp_onnx", "--url", triton_server.http_url, "--cpus", plan, "--json", str(out)]
    )
    assert result.exit_code == 1 and message in error_line(result.stderr) and not out.exists()


@pytest.mark.skipif(len(machine_cores()) < 2, reason="needs two cores to tell one from all")
def test_the_server_starts_on_every_core_though_the_calling_thread_was_pinned(
    served_repository: Path,
) -> None:
    # A parallel runtime may leave the calling thread bound to one core (a model verified in this
    # process before it is served); the server it starts must not inherit that.
    every, before = machine_cores(), os.sched_getaffinity(0)
    done = threading.Event()
    pool = threading.Thread(target=done.wait)  # a pool's thread, on every core
    pool.start()
    try:
        os.sched_setaffinity(0, {min(every)})
        with LocalTritonServer(
            served_repository, models=["mlp_onnx"], http_port=0, grpc_port=0, metrics_port=0
        ) as server:
            pid = ServerAddress.parse(server.http_url).listening_pid()
            assert pid is not None and frozenset(os.sched_getaffinity(pid)) == every
    finally:
        os.sched_setaffinity(0, before)
        done.set()
        pool.join()
