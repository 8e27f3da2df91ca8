"""``loadtest --server-trace`` on the real embedded server: each measured request joined to its trace.

Over HTTP every measured request is traced (rate 1) and joined by its id; the median's and the
slowest 1%'s parts add up to their latency on the client; the server's trace settings are
as found afterwards. Over gRPC at one in five, about a fifth are. An open loop's requests are
joined too. An ensemble's time in its steps is a part of its own, each step model's parts
beside. What cannot be traced is refused in one line.

The embedded Triton (2.51) can crash while it traces requests that overlap
(:data:`tritongen.loadtest.server_trace.FIXED_IN`): these loads keep one request in flight
(the open loop's requests overlap rarely at 30/s), and the run says so where they would not.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tritongen.client.trace_settings import TraceControl
from tritongen.loadtest.server_trace import CLIENT_PARTS, STEP_PARTS
from tritongen.server.local import LocalTritonServer

from support.composing_models import ENSEMBLE_MODEL, PRE_MODEL, STEP_MODEL
from support.processes import start_cli

pytestmark = pytest.mark.slow
SHORT = ["--duration", "3s", "--warmup", "1s", "--window", "0.5s", "--max-duration", "3s"]


def _traced(tmp_path: Path, url: str, model: str, *args: str) -> tuple[dict[str, Any], str]:
    out = tmp_path / "run.json"
    cli = start_cli(tmp_path / "cli", "loadtest", model, "--url", url, *SHORT, "--server-trace", *args,
                    "--json", out)  # fmt: skip
    try:
        code = cli.wait(180)
    finally:
        cli.kill()
    assert code == 0, cli.stderr()
    (run,) = json.loads(out.read_text())["runs"]
    return run, cli.stdout()


def _check_adds_up(trace: dict[str, Any], tiles: bool = True) -> None:
    median, slowest = trace["splits"]
    assert median["label"] == "median" and slowest["label"] == "slowest 1%"
    assert median["requests"] == 1 and slowest["requests"] == max(1, trace["joined"] // 100)
    assert median["latency_us"] <= slowest["latency_us"]
    for split in (median, slowest):
        parts = split["parts_us"]
        assert list(parts) == list(CLIENT_PARTS)
        assert all(value is None or value >= 0 for value in parts.values()), parts
        # the server's clock is the client's: the parts tile the client's latency (over gRPC the
        # server stamps its send's end after the client may already hold the response: no tiling)
        if tiles:
            tiled = sum(v or 0.0 for v in parts.values())
            assert tiled == pytest.approx(split["latency_us"], rel=0.02), split


def test_every_measured_http_request_is_joined_and_its_parts_add_up(
    triton_server: LocalTritonServer, tmp_path: Path
) -> None:
    control = TraceControl(triton_server.http_url)
    try:
        before = control.read()
        run, stdout = _traced(tmp_path, triton_server.http_url, STEP_MODEL, "--concurrency", "1")
        after = control.read()
    finally:
        control.close()
    assert after == before  # tracing off again, as found
    trace = run["server_trace"]
    assert trace["rate"] == 1 and trace["recorded"] >= 100
    assert trace["joined"] == trace["recorded"]  # every request the client measured, traced
    assert trace["recorded"] == run["requests"] - run["errors"]
    _check_adds_up(trace)
    median = trace["splits"][0]["parts_us"]
    assert all(median[p] is not None for p in CLIENT_PARTS if p != "steps") and median["steps"] is None
    assert "Where the time went" in stdout and "c=1 top 1%" in stdout
    assert not any("can crash" in warning for warning in run["warnings"])  # one request in flight


def test_a_sampled_grpc_load_is_joined_in_part(triton_server: LocalTritonServer, tmp_path: Path) -> None:
    args = ["--protocol", "grpc", "--concurrency", "1", "--trace-rate", "5"]
    run, _ = _traced(tmp_path, triton_server.grpc_url, STEP_MODEL, *args)
    trace = run["server_trace"]
    assert trace["rate"] == 5 and trace["recorded"] >= 300
    assert 0.1 <= trace["joined"] / trace["recorded"] <= 0.35, (
        trace
    )  # one in five, give or take a window's edge
    _check_adds_up(trace, tiles=False)
    assert trace["splits"][0]["parts_us"]["http_recv"] == 0.0  # gRPC's read counts from the request read


def test_an_open_loop_s_requests_are_joined_and_the_crash_is_said(
    triton_server: LocalTritonServer, tmp_path: Path
) -> None:
    run, _ = _traced(tmp_path, triton_server.http_url, STEP_MODEL, "--rate", "30")
    trace = run["server_trace"]
    assert trace["joined"] == trace["recorded"] >= 60
    _check_adds_up(trace)
    (said,) = [warning for warning in run["warnings"] if "can crash" in warning]
    assert "Triton 2.51" in said and "--concurrency 1" in said


def test_an_ensemble_s_steps_are_a_part_with_each_step_s_own_beside(
    triton_server: LocalTritonServer, tmp_path: Path
) -> None:
    run, stdout = _traced(tmp_path, triton_server.http_url, ENSEMBLE_MODEL, "--concurrency", "1")
    trace = run["server_trace"]
    _check_adds_up(trace)
    median = trace["splits"][0]
    assert median["parts_us"]["steps"] is not None and median["parts_us"]["queue"] is None
    steps = median["steps_us"]
    assert set(steps) == {PRE_MODEL, STEP_MODEL} and all(step["calls"] == 1 for step in steps.values())
    assert all(steps[STEP_MODEL][part] is not None for part in STEP_PARTS)
    assert "c=1 P50 steps, µs:" in stdout


@pytest.mark.parametrize(
    ("model", "args", "said"),
    [
        (STEP_MODEL, ["--trace-rate", "5"], "--trace-rate applies with --server-trace"),
        (STEP_MODEL, ["--server-trace", "--shared-memory", "system"], "does not apply with --shared-memory"),
        (
            f"{STEP_MODEL},{PRE_MODEL}",
            ["--server-trace", "--mix", "1:1", "--concurrency", "2"],
            "--server-trace joins one model's",
        ),
    ],
)
def test_what_cannot_be_traced_is_refused_in_one_line(
    triton_server: LocalTritonServer, tmp_path: Path, model: str, args: list[str], said: str
) -> None:
    cli = start_cli(tmp_path / "cli", "loadtest", model, "--url", triton_server.http_url, *SHORT, *args)
    try:
        code = cli.wait(60)
    finally:
        cli.kill()
    assert code != 0
    (line,) = cli.error_lines()
    assert said in line, line
