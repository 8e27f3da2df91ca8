"""``loadtest --timeslice`` on the real server: per-slice figures in the JSON, console, CSV and plot."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tritongen.cli.main import app
from tritongen.server.local import LocalTritonServer

from support.composing_models import STEP_MODEL

pytestmark = pytest.mark.slow
runner = CliRunner()


def test_a_run_is_reported_slice_by_slice(triton_server: LocalTritonServer, tmp_path: Path) -> None:
    out, table, plot = tmp_path / "run.json", tmp_path / "run.csv", tmp_path / "run.png"
    result = runner.invoke(
        app,
        ["loadtest", STEP_MODEL, "--url", triton_server.http_url, "--metrics-url", triton_server.metrics_url,
         "--concurrency", "2", "--duration", "3s", "--max-duration", "3s", "--warmup", "0.5s",
         "--window", "0.5s", "--timeslice", "1s", "--json", str(out), "--csv", str(table),
         "--plot", str(plot)],
        env={"COLUMNS": "200"},
    )  # fmt: skip
    assert result.exit_code == 0, result.stdout + result.stderr
    (run,) = json.loads(out.read_text())["runs"]
    slices = run["timeslices"]
    assert [s["start_s"] for s in slices] == [0, 1, 2] and {s["duration_s"] for s in slices} == {1}
    assert sum(s["requests"] for s in slices) == run["requests"]  # the slices are the run, cut in three
    assert all(s["latency_us"]["p50"] <= s["latency_us"]["p99"] for s in slices)
    rows = list(csv.DictReader((tmp_path / "run.timeslices.csv").open()))
    assert [float(row["start_s"]) for row in rows] == [0, 1, 2]
    assert (tmp_path / "run.timeslices.png").stat().st_size > 1000
    assert "Over time (--timeslice" in result.stdout


def test_a_slice_that_is_not_whole_windows_is_refused(triton_server: LocalTritonServer) -> None:
    result = runner.invoke(
        app,
        ["loadtest", STEP_MODEL, "--url", triton_server.http_url, "--window", "1s", "--timeslice", "1.5s"],
    )
    assert result.exit_code != 0
    assert "--timeslice 1.5s is not a whole number of measurement windows" in result.stdout + result.stderr
