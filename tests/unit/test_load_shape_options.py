"""The shape options refused where they do not apply, in one line and before anything is sent."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from tritongen.cli.main import app

runner = CliRunner()
URL = "127.0.0.1:9"  # nothing listens there: a refusal must come before any request


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--stages", "100:2s", "--concurrency", "4"],
            "--stages sets its own rate: --concurrency does not apply",
        ),
        (["--stages", "100:2s", "--rate", "50"], "--stages sets its own rate: --rate does not apply"),
        (["--stages", "100:2s", "--duration", "9s"], "--stages sets the measured time"),
        (["--stages", "100:2s", "--rate", "1..5/2s"], "a ramp and --stages exclude each other"),
        (["--trace-speed", "2"], "--trace-speed applies with --trace"),
        (["--stages", "100:2s", "--processes", "2"], "--processes does not apply"),
        (["--stages", "100:2s", "--find-max", "--slo-p99-ms", "5"], "--find-max does not apply"),
        (["--stages", "100:2s", "--max-duration", "9s"], "--max-duration does not apply"),
        (["--stages", "100:3s", "--window", "2s"], "stage 1 (3 s) is not a whole number of --window 2s"),
        (["--rate", "5..50"], "a ramp needs its length"),
        (["--trace", "TRACE", "--arrival", "poisson"], "--arrival poisson does not apply"),
        (
            ["--trace", "TRACE", "--concurrency", "2"],
            "--trace sets its own rate: --concurrency does not apply",
        ),
        (["--trace", "TRACE", "--master"], "--master does not apply"),
        (["--stages", "100:2s", "--mix", "1:1"], "--mix does not apply"),
    ],
)
def test_options_that_do_not_apply_to_a_shape_are_refused(
    tmp_path: Path, args: list[str], message: str
) -> None:
    trace = tmp_path / "trace.jsonl"
    trace.write_text('{"time_s": 0}\n{"time_s": 0.5}\n')
    args = [str(trace) if arg == "TRACE" else arg for arg in args]
    result = runner.invoke(app, ["loadtest", "mlp_onnx", "--url", URL, *args])
    assert result.exit_code == 1, result.stdout + result.stderr
    assert message in " ".join((result.stdout + result.stderr).split()) or pytest.fail(
        result.stdout + result.stderr
    )


def test_a_ramp_in_tune_sets_the_rate_so_a_search_is_refused(tmp_path: Path) -> None:
    result = runner.invoke(
        app,
        ["tune", "mlp_onnx", "--url", URL, "--rate", "10..100/10s", "--find-max", "--slo-p99-ms", "9",
         "--out", str(tmp_path / "t")],
    )  # fmt: skip
    assert result.exit_code == 1
    assert "--find-max searches the load's level: --rate FROM..TO/DURATION sets its own rate" in result.stderr
    assert not (tmp_path / "t").exists()
