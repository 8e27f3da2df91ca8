"""Locust processes that stay up across runs, on the real server.

A multi-level load test, and several load tests inside one ``load_processes()`` (as a
compare's or a tune's rounds run them), send every run through one Locust process; each run
records only its own requests. A process that dies between runs is replaced at the next run;
one that dies during a run fails that run, as a process of its own would.
"""

from __future__ import annotations

import os
import signal
import time

import psutil
import pytest

from tritongen.client.address import ServerAddress
from tritongen.loadtest.load_processes import load_processes
from tritongen.loadtest.runner import Progress, run_load_test
from tritongen.loadtest.spec import LoadSpec
from tritongen.server.local import LocalTritonServer

pytestmark = pytest.mark.slow
MODEL = "mlp_onnx"


def _spec(server: LocalTritonServer, **settings: object) -> LoadSpec:
    base: dict[str, object] = {
        "model": MODEL,
        "address": ServerAddress.parse(server.http_url, metrics_url=server.metrics_url),
        "levels": (1.0,),
        "duration_s": 1.0,
        "max_duration_s": 1.0,
        "warmup_s": 0.3,
        "window_s": 0.25,
    }
    return LoadSpec(**{**base, **settings})  # type: ignore[arg-type]


def test_every_run_of_a_multi_level_test_goes_through_one_process(triton_server: LocalTritonServer) -> None:
    with load_processes() as pool:
        report = run_load_test(_spec(triton_server, levels=(1.0, 2.0), rounds=2))
        assert (pool.started, pool.runs) == (1, 4)
        (pid,) = pool.service_pids()
        assert psutil.pid_exists(pid)
    assert report.status == "ok", [r.reason for r in report.runs]
    assert [r.concurrency for r in report.runs] == [1, 2, 1, 2]
    for run in report.runs:
        assert run.status == "ok" and run.requests > 0 and run.errors == 0
        # only the run's own requests: its measured time at its own rate, nothing carried over
        assert run.requests <= run.qps * run.duration_s * 1.05 + 1
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_rate_and_concurrency_runs_share_a_process_without_leftover_settings(
    triton_server: LocalTritonServer,
) -> None:
    """A rate run, then a concurrency run in the same process: the second is closed-loop again."""
    with load_processes() as pool:
        rate = run_load_test(_spec(triton_server, mode="rate", levels=(40.0,), seed=3))
        closed = run_load_test(_spec(triton_server, levels=(2.0,)))
        assert (pool.started, pool.runs) == (1, 2)
    (rate_run,) = rate.runs
    (closed_run,) = closed.runs
    assert rate_run.status == closed_run.status == "ok"
    assert rate_run.target_rate == 40.0 and 30 <= rate_run.qps <= 50, rate_run.qps
    assert closed_run.target_rate is None and closed_run.achieved_rate is None


def test_a_process_dead_between_runs_is_replaced(triton_server: LocalTritonServer) -> None:
    with load_processes() as pool:
        first = run_load_test(_spec(triton_server))
        (pid,) = pool.service_pids()
        os.killpg(pid, signal.SIGKILL)
        psutil.wait_procs([psutil.Process(pid)], timeout=10)
        second = run_load_test(_spec(triton_server))
        assert pool.started == 2 and pool.service_pids() != [pid]
    assert first.status == second.status == "ok"
    assert second.runs[0].requests > 0


def test_a_process_dying_during_a_run_fails_that_run_and_the_next_starts_afresh(
    triton_server: LocalTritonServer,
) -> None:
    killed: list[int] = []

    def kill_once_measuring(progress: Progress) -> None:
        if not killed and progress.phase == "measuring":
            (pid,) = pool.service_pids()
            killed.append(pid)
            os.killpg(pid, signal.SIGKILL)

    with load_processes() as pool:
        failed = run_load_test(_spec(triton_server, duration_s=3.0, max_duration_s=3.0), kill_once_measuring)
        again = run_load_test(_spec(triton_server))
        assert pool.started == 2
    assert killed, "the run never reached its measured windows"
    assert failed.status == "aborted" and "Locust exited early" in (failed.runs[0].reason or "")
    assert again.status == "ok" and again.runs[0].requests > 0


def test_forked_workers_stay_up_across_runs(triton_server: LocalTritonServer) -> None:
    with load_processes() as pool:
        began = time.monotonic()
        report = run_load_test(_spec(triton_server, levels=(2.0,), rounds=2, processes=2))
        elapsed = time.monotonic() - began
        assert (pool.started, pool.runs) == (1, 2)
        (pid,) = pool.service_pids()
        workers = psutil.Process(pid).children()
        assert len(workers) == 2
    assert report.status == "ok", [r.reason for r in report.runs]
    for run in report.runs:
        assert run.status == "ok" and run.requests > 0
        assert run.processes == 2
    assert elapsed < 60


def test_a_kept_process_refuses_its_web_api_without_the_secret(triton_server: LocalTritonServer) -> None:
    """Another user of the machine cannot start or stop a test in it; tritongen's calls carry the secret."""
    import urllib.error
    import urllib.request

    from tritongen.io.loadgen_shared import WEB_TOKEN_HEADER

    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with load_processes() as pool:
        report = run_load_test(_spec(triton_server))
        (service,) = pool._services.values()
        assert service.url.startswith("http://127.0.0.1:")
        for path, data in (
            ("/stats/requests", None),
            ("/swarm", b"user_count=1&spawn_rate=1"),
            ("/stop", b""),
        ):
            with pytest.raises(urllib.error.HTTPError) as refused:
                opener.open(urllib.request.Request(service.url + path, data=data), timeout=5)
            assert refused.value.code == 401, path
        wrong = urllib.request.Request(service.url + "/stats/requests", headers={WEB_TOKEN_HEADER: "guess"})
        with pytest.raises(urllib.error.HTTPError) as refused:
            opener.open(wrong, timeout=5)
        assert refused.value.code == 401
        right = urllib.request.Request(
            service.url + "/stats/requests", headers={WEB_TOKEN_HEADER: service.token}
        )
        with opener.open(right, timeout=5) as answer:
            assert answer.status == 200
        assert run_load_test(_spec(triton_server)).status == "ok"  # the next run still goes through it
        assert pool.started == 1
    assert report.status == "ok" and report.runs[0].requests > 0
