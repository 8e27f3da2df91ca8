"""``--stop-at-saturation`` on the real server: a one-instance 12 ms model saturates at once.

``sleep_const`` serves one request at a time (one instance, no batching), so beyond
concurrency 1 or 2 a higher level only queues: throughput stays near 1 / 12 ms while latency
grows with the level. The sweep must stop there, not measure 8 and 16; and a P99 limit below
12 ms stops it at its first level.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tritongen.cli.main import app
from tritongen.server.local import LocalTritonServer

pytestmark = pytest.mark.slow
runner = CliRunner()
QUICK = ["--duration", "1s", "--warmup", "0.3s", "--window", "0.25s", "--max-duration", "1s"]


def _sweep(server: LocalTritonServer, tmp_path: Path, *args: str) -> tuple[int, dict, str]:
    out = tmp_path / "sweep.json"
    result = runner.invoke(
        app,
        ["loadtest", "sleep_const", "--url", server.http_url, "--metrics-url", server.metrics_url,
         "--concurrency", "1,2,4,8,16", "--stop-at-saturation", *QUICK, "--json", str(out), *args],
    )  # fmt: skip
    return result.exit_code, json.loads(out.read_text()), result.stdout + result.stderr


def test_a_saturated_sweep_stops_before_the_higher_levels(
    triton_server: LocalTritonServer, tmp_path: Path
) -> None:
    code, document, output = _sweep(triton_server, tmp_path)
    assert code == 0, output
    stop = document["sweep_stop"]
    assert stop["rule"] == "saturation" and stop["level"] in (2, 4), stop
    assert 8 in stop["skipped"] and 16 in stop["skipped"]
    assert [r["concurrency"] for r in document["runs"]] == [c for c in (1, 2, 4) if c <= stop["level"]]
    assert "Sweep stopped (saturation)" in output and "saturated" in output


def test_a_p99_limit_stops_the_sweep_at_its_first_level(
    triton_server: LocalTritonServer, tmp_path: Path
) -> None:
    code, document, output = _sweep(triton_server, tmp_path, "--slo-p99-ms", "5")
    assert code == 1  # the limit is also loadtest's gate
    assert document["sweep_stop"]["rule"] == "slo" and document["sweep_stop"]["skipped"] == [2, 4, 8, 16]
    assert [r["concurrency"] for r in document["runs"]] == [1]
    assert "Sweep stopped (P99 limit): concurrency 1's P99" in output
