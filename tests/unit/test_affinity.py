"""``--cpus server=LIST,load=LIST``: parsed and checked against the machine; trees pinned and given back."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tritongen.errors import ConfigError
from tritongen.server.affinity import (
    CpuPlan,
    cores_text,
    machine_cores,
    parse_core_list,
    parse_cpus,
    pin_tree,
    pinned_server,
    pinned_start,
)

EIGHT = frozenset(range(8))
TWO_CORES = pytest.mark.skipif(len(machine_cores()) < 2, reason="pinning apart needs two cores")


@pytest.mark.parametrize(
    ("text", "server", "load"),
    [
        ("server=0,load=1", {0}, {1}),
        ("server=0-5,load=6,7", set(range(6)), {6, 7}),
        ("server=0-3;load=6-7", set(range(4)), {6, 7}),
        ("load=7, server=0-2,5", {0, 1, 2, 5}, {7}),
    ],
)
def test_plans_are_read(text: str, server: set[int], load: set[int]) -> None:
    assert parse_cpus(text, EIGHT) == CpuPlan(frozenset(server), frozenset(load))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("server=0", "must give server=LIST and load=LIST"),
        ("server=0,load=1,gpu=2", "not a list of cores"),
        ("0,1", "must give server=LIST and load=LIST"),
        ("server=0,load=9", "names core 9, which this machine does not have (cores 0-7)"),
        ("server=0-2,load=2-3", "puts core 2 in both server and load"),
        ("server=3-1,load=5", "'3-1' is not a list of cores"),
        ("server=x,load=5", "'x' is not a list of cores"),
    ],
)
def test_bad_plans_are_refused_in_one_line(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_cpus(text, EIGHT)
    assert message in str(raised.value) and "\n" not in str(raised.value)


def test_core_lists_and_their_text() -> None:
    assert parse_core_list("0-2,5,7-8") == frozenset({0, 1, 2, 5, 7, 8})
    assert cores_text({0, 1, 2, 5, 7, 8}) == "0-2,5,7-8"
    assert CpuPlan(frozenset({0}), frozenset({1})).text() == "server on cores 0, load on cores 1"


def _sleeper(*extra: str) -> subprocess.Popen[bytes]:
    """A Python child with a second thread, which starts a grandchild: a small tree to pin."""
    code = (
        "import subprocess, sys, threading, time; threading.Thread(target=time.sleep, args=(30,)).start(); "
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)']); time.sleep(30)"
    )
    return subprocess.Popen([sys.executable, "-c", code, *extra])


def _tree_cores(pid: int) -> set[frozenset[int]]:
    import psutil

    pids = [pid, *(p.pid for p in psutil.Process(pid).children(recursive=True))]
    return {frozenset(os.sched_getaffinity(int(t))) for p in pids for t in os.listdir(f"/proc/{p}/task")}


def _wait_for_tree(pid: int) -> None:
    import psutil

    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if psutil.Process(pid).children() and len(os.listdir(f"/proc/{pid}/task")) >= 2:
            return
        time.sleep(0.05)
    raise AssertionError("the test tree did not start")


@TWO_CORES
def test_the_machine_cores_are_every_thread_s_not_the_calling_one_s() -> None:
    # A parallel runtime may bind the calling thread to one core: the process may still use all.
    import threading

    every = machine_cores()
    before = os.sched_getaffinity(0)
    done = threading.Event()
    worker = threading.Thread(target=done.wait)  # started on every core, as a pool's threads are
    worker.start()
    try:
        os.sched_setaffinity(0, {min(every)})
        assert len(os.sched_getaffinity(0)) == 1 and machine_cores() == every
    finally:
        os.sched_setaffinity(0, before)
        done.set()
        worker.join()


@TWO_CORES
def test_a_tree_is_pinned_thread_by_thread_and_given_its_cores_back() -> None:
    core = min(machine_cores())
    child = _sleeper()
    try:
        _wait_for_tree(child.pid)
        assert pin_tree(child.pid, frozenset({core})) >= 3  # two threads of the child, the grandchild
        assert _tree_cores(child.pid) == {frozenset({core})}
        load = frozenset(machine_cores() - {core})
        before_self = os.sched_getaffinity(0)
        with pinned_server(child.pid, CpuPlan(frozenset({core}), load)):
            assert _tree_cores(child.pid) == {frozenset({core})}
            assert os.sched_getaffinity(0) == load  # this process drives the load
        assert os.sched_getaffinity(0) == before_self
        assert _tree_cores(child.pid) == {frozenset({core})}  # what it had when the load test began
    finally:
        child.kill()
        child.wait()


@TWO_CORES
def test_a_child_started_pinned_runs_on_its_cores_from_the_start() -> None:
    core = max(machine_cores())
    child = subprocess.Popen(
        [sys.executable, "-c", "import os; print(sorted(os.sched_getaffinity(0)))"],
        stdout=subprocess.PIPE,
        preexec_fn=pinned_start(frozenset({core}), lambda: None),
    )
    out, _ = child.communicate(timeout=30)
    assert out.decode().strip() == f"[{core}]"


def test_pinning_needs_a_server_process_here() -> None:
    plan = CpuPlan(frozenset({0}), frozenset({1}))
    with (
        pytest.raises(ConfigError, match="no server process was found on this machine"),
        pinned_server(None, plan),
    ):
        pass
    with pinned_server(None, None):  # no plan: nothing to pin
        pass


def test_compare_records_the_plan_and_refuses_a_bad_one_before_building(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from tritongen.cli.main import app
    from tritongen.compare.measure import MeasureSettings

    plan = CpuPlan(frozenset({0}), frozenset({1}))
    assert MeasureSettings(cpus=plan).to_json()["cpus"] == {"server": [0], "load": [1]}
    assert "cpus" not in MeasureSettings().to_json()
    source = tmp_path / "m.onnx"
    source.write_bytes(b"not read: the options are checked first")
    result = CliRunner().invoke(
        app, ["compare", str(source), "--cpus", "server=0,load=0", "--out", str(tmp_path / "o")]
    )
    assert result.exit_code == 1 and "puts core 0 in both server and load" in result.stderr
    assert not (tmp_path / "o").exists()
