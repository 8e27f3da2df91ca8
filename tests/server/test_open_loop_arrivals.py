"""Bursty open-loop arrivals on the real server: the rate and the gaps' CV asked are the ones sent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tritongen.cli.main import app
from tritongen.io.loadgen_shared import ARRIVAL_GAPS
from tritongen.server.local import LocalTritonServer

runner = CliRunner()
RATE, CV = 500, 2.0


def _loadtest(server: LocalTritonServer, *args: str) -> tuple[int, str]:
    result = runner.invoke(app, ["loadtest", "mlp_onnx", "--url", server.http_url, *args])
    return result.exit_code, result.stderr


@pytest.mark.quiet  # bursts sent on time need a core: beside other tests the sends bunch and the CV grows
def test_gamma_arrivals_keep_the_rate_and_the_cv_over_twenty_seconds(
    triton_server: LocalTritonServer, tmp_path: Path
) -> None:
    out = tmp_path / "gamma.json"
    code, stderr = _loadtest(
        triton_server, "--rate", str(RATE), "--arrival", f"gamma:{CV:g}", "--seed", "7",
        "--duration", "20s", "--max-duration", "20s", "--warmup", "1s", "--json", str(out),
    )  # fmt: skip
    assert code == 0, stderr
    (run,) = json.loads(out.read_text())["runs"]
    assert run["status"] == "ok" and run["errors"] == 0 and run["processes"] == 1  # one schedule
    assert run["duration_s"] >= 20
    assert run["achieved_rate"] == pytest.approx(RATE, rel=0.05)
    assert run["arrival_cv"] == pytest.approx(CV, rel=0.05)
    assert run["counts"][ARRIVAL_GAPS[0]] >= 0.9 * RATE * 20
    assert not any("CV of" in warning for warning in run["warnings"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--rate", "50", "--arrival", "gamma"], "--arrival gamma needs its CV"),
        (["--concurrency", "2", "--arrival", "poisson"], "applies to open-loop runs (--rate)"),
        (["--rate", "50", "--arrival", "gamma:2", "--processes", "2"], "sends from one process"),
    ],
)
def test_an_arrival_that_cannot_apply_is_refused_in_one_line(
    triton_server: LocalTritonServer, args: list[str], message: str
) -> None:
    code, stderr = _loadtest(triton_server, *args)
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert code == 1 and len(lines) == 1 and message in lines[0], stderr
