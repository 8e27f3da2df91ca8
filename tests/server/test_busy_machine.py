"""A busy machine is noticed: a CPU burner beside a load test flags the run; a quiet run is not flagged."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tritongen.cli.main import app
from tritongen.client.address import ServerAddress
from tritongen.loadtest.rounds import Contender, measure_rounds
from tritongen.loadtest.spec import LoadSpec
from tritongen.server.local import LocalTritonServer

from support.cli_output import error_line
from support.machine import ATTEMPTS, cpu_use

runner = CliRunner()
QUICK = ["--duration", "2s", "--warmup", "0.5s", "--window", "0.5s", "--max-duration", "2s"]
BURNER = "while True: pass"


def _run(server: LocalTritonServer, tmp_path: Path, *args: str) -> tuple[dict[str, Any], str, str]:
    out = tmp_path / "run.json"
    result = runner.invoke(
        app,
        ["loadtest", "mlp_onnx", "--url", server.http_url, "--metrics-url", server.metrics_url,
         *(args or ("--concurrency", "1")), *QUICK, "--json", str(out)],
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr + result.stdout
    (run,) = json.loads(out.read_text())["runs"]
    return run, result.stdout, result.stderr


def _burner() -> int:
    """A CPU burner outside this process's tree, at the lowest priority; its pid."""
    started = subprocess.run(
        ["sh", "-c", f'nice -n 19 {sys.executable} -c "{BURNER}" >/dev/null 2>&1 & echo $!'],
        capture_output=True, text=True, check=True, timeout=30,
    )  # fmt: skip
    return int(started.stdout.strip())


def test_rounds_flagged_busy_are_measured_again_up_to_the_limit(triton_server: LocalTritonServer) -> None:
    # Two identical one-instance models at a light load, a burner beside every round: each round
    # is flagged, so the first two are measured again (the limit), and then rounds count as they are.
    spec = LoadSpec(
        model="sleep_const",
        address=ServerAddress.parse(triton_server.http_url, metrics_url=triton_server.metrics_url),
        duration_s=1.0, warmup_s=0.3, window_s=0.5, max_duration_s=1.0,
    )  # fmt: skip
    contenders = [Contender(name, replace(spec, model=name)) for name in ("sleep_const", "sleep_const_copy")]
    starts: list[int] = []
    burner = _burner()
    try:
        rounds = measure_rounds(
            contenders, 2, on_start=lambda number, _total, _name: starts.append(number), busy_repeats=2
        )
    finally:
        os.kill(burner, signal.SIGKILL)
    assert rounds.status == "ok" and rounds.completed == 2
    assert [entry["round"] for entry in rounds.repeated] == [1, 1]  # round 1 twice more, then it counts
    assert all(entry["busy"] and entry["other_cpu"] > 0.25 for entry in rounds.repeated)
    assert starts == [1, 1, 1, 1, 1, 1, 2, 2]  # each measurement of a round: both contenders
    assert [len(runs) for runs in rounds.runs.values()] == [2, 2]  # the repeated runs are not kept


def test_a_cpu_burner_beside_the_run_is_flagged(triton_server: LocalTritonServer, tmp_path: Path) -> None:
    # Outside this process's tree (a burner started by the test would be one of "our" processes):
    # the shell that starts it exits at once, and it runs at the lowest priority, taking only CPU
    # nobody else wants, so the tests beside this one keep theirs.
    started = subprocess.run(
        ["sh", "-c", f'nice -n 19 {sys.executable} -c "{BURNER}" >/dev/null 2>&1 & echo $!'],
        capture_output=True, text=True, check=True, timeout=30,
    )  # fmt: skip
    burner = int(started.stdout.strip())
    try:
        run, _, stderr = _run(triton_server, tmp_path, "--rate", "20")  # a light load leaves it a core
    finally:
        os.kill(burner, signal.SIGKILL)
    # One process spinning beside a light load gets most of a core (and where other tests run
    # beside this one, they are other processes too): well above a quarter of one, on average.
    assert run["other_cpu"] is not None and run["other_cpu"] > 0.25 and run["busy"] is True
    assert "other processes used" in stderr and "the machine was busy" in stderr


@pytest.mark.quiet
def test_a_quiet_run_is_not_flagged(triton_server: LocalTritonServer, tmp_path: Path) -> None:
    seen = []
    for _ in range(ATTEMPTS):
        with cpu_use() as use:
            run, _, stderr = _run(triton_server, tmp_path)
        if not run["busy"]:
            assert run["other_cpu"] is not None and run["other_cpu"] <= 0.25
            assert "other processes used" not in stderr
            return
        seen.append(f"{run['other_cpu']:.2f} cores (machine {use.busy:.0%} busy)")
    pytest.skip(
        f"other processes were busy in every attempt ({', '.join(seen)}): other tests run beside this one"
    )


def test_the_limit_must_be_a_share_of_one_core(triton_server: LocalTritonServer) -> None:
    result = runner.invoke(
        app, ["loadtest", "mlp_onnx", "--url", triton_server.http_url, "--other-cpu-limit", "150%"]
    )
    assert result.exit_code != 0 and "--other-cpu-limit '150%' is not a share of one core" in error_line(
        result.stderr
    )
