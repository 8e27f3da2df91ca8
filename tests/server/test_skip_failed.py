"""``--skip-failed`` for loadtest --serve and tune: the whole repository served, less what fails."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tritongen.cli.main import app

from support.cli_output import error_line
from support.paths import ROOT

runner = CliRunner()
QUICK = ["--duration", "1s", "--warmup", "0.5s", "--window", "0.5s", "--max-duration", "1s"]
pytestmark = pytest.mark.slow


@pytest.fixture
def broken_repository(tmp_path: Path) -> Path:
    """The example MLP, a copy Triton cannot load (corrupt weights) and one lint refuses."""
    repo = tmp_path / "broken"
    shutil.copytree(
        ROOT / "model_repository" / "mlp_onnx",
        repo / "mlp_onnx",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    for name in ("corrupt_onnx", "misfit"):
        shutil.copytree(repo / "mlp_onnx", repo / name)
        config = repo / name / "config.pbtxt"
        config.write_text(config.read_text().replace('name: "mlp_onnx"', f'name: "{name}"'))
    (repo / "corrupt_onnx" / "1" / "model.onnx").write_bytes(b"definitely not onnx")
    config = repo / "misfit" / "config.pbtxt"
    config.write_text(
        re.sub(r"preferred_batch_size: \[[^\]]*\]", "preferred_batch_size: [ 4096 ]", config.read_text())
    )
    return repo


def _left_out(stderr: str) -> list[str]:
    return sorted(line for line in stderr.splitlines() if line.startswith("left out "))


def test_loadtest_serve_skip_failed_measures_the_model_and_names_the_others(
    broken_repository: Path, tmp_path: Path
) -> None:
    out = tmp_path / "run.json"
    result = runner.invoke(
        app,
        ["loadtest", "mlp_onnx", "--serve", str(broken_repository), "--skip-failed", "--concurrency", "1",
         *QUICK, "--json", str(out)],
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr + result.stdout
    left_out = _left_out(result.stderr)
    assert [line.split(":")[0] for line in left_out] == ["left out corrupt_onnx", "left out misfit"]
    assert "Protobuf parsing failed" in left_out[0] and "(lint: dynamic-batching." in left_out[1]
    (run,) = json.loads(out.read_text())["runs"]
    assert run["errors"] == 0 and run["requests"] > 0


def test_the_model_under_load_must_load(broken_repository: Path) -> None:
    result = runner.invoke(
        app, ["loadtest", "corrupt_onnx", "--serve", str(broken_repository), "--skip-failed", *QUICK]
    )
    assert result.exit_code != 0
    line = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(line) == 1 and "corrupt_onnx" in line[0] and "the models under load must load" in line[0]


def test_skip_failed_needs_a_server_it_starts(broken_repository: Path) -> None:
    result = runner.invoke(app, ["loadtest", "mlp_onnx", "--skip-failed", *QUICK])
    assert result.exit_code != 0 and "--skip-failed needs --serve REPO" in error_line(result.stderr)
    result = runner.invoke(
        app, ["tune", "mlp_onnx", "--repo", str(broken_repository), "--skip-failed", "--url", "localhost:1"]
    )
    assert result.exit_code != 0 and "--skip-failed and --url exclude each other" in error_line(result.stderr)


def test_tune_skip_failed_serves_the_repository_less_what_fails(
    broken_repository: Path, tmp_path: Path
) -> None:
    result = runner.invoke(
        app,
        ["tune", "mlp_onnx", "--repo", str(broken_repository), "--skip-failed", "--max-queue-delay-us", "0",
         "--preferred-batch-sizes", "none", "--instances", "1", "--max-batch-size", "8", "--rounds", "2",
         "--concurrency", "2", "--duration", "1s", "--warmup", "0.5s", "--out", str(tmp_path / "trials")],
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr + result.stdout
    assert [line.split(":")[0] for line in _left_out(result.stderr)] == [
        "left out corrupt_onnx",
        "left out misfit",
    ]
