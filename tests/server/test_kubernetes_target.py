"""The HPA target of ``tritongen kubernetes --from tune.json`` comes from a real tune's measurement."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from tritongen.cli.main import app
from tritongen.deploy.kubernetes.scaling import SIGNALS, quantity, scaling_target
from tritongen.server.local import LocalTritonServer

from support.loads import QUICK_RUNS

pytestmark = pytest.mark.slow
runner = CliRunner()
MODEL = "mlp_onnx"


def test_hpa_target_is_the_tuned_queue_time(
    triton_server: LocalTritonServer, served_repository: Path, tmp_path: Path
) -> None:
    tune_json = tmp_path / "tune.json"
    tuned = runner.invoke(
        app,
        ["tune", MODEL, "--repo", str(served_repository), "--url", triton_server.http_url,
         *QUICK_RUNS, "--concurrency", "8", "--slo-p99-ms", "500",
         "--max-batch-size", "8", "--max-queue-delay-us", "200", "--instances", "1", "--strategy", "grid",
         "--rounds", "1", "--finalists", "1", "--out", str(tmp_path / "tune"), "--json", str(tune_json)],
    )  # fmt: skip
    assert tuned.exit_code == 0, tuned.stderr
    doc = json.loads(tune_json.read_text())
    expected = scaling_target(SIGNALS["queue-time"], doc)
    assert expected.source.startswith(f"tune of {MODEL}")  # a measured queue time, not the default
    out = tmp_path / "deploy"
    result = runner.invoke(
        app, ["kubernetes", str(served_repository), "-o", str(out), "--from", str(tune_json)]
    )
    assert result.exit_code == 0, result.stderr
    hpa = yaml.safe_load((out / "base" / "hpa.yaml").read_text())
    target = hpa["spec"]["metrics"][0]["pods"]["target"]
    assert target["averageValue"] == quantity(expected.value)
    source = hpa["metadata"]["annotations"]["tritongen.io/scale-target-from"]
    # The repository serves several models: the replica's signal covers them all, the target one.
    assert source.startswith(expected.source) and "models it serves together" in source
    assert f"from: {source}" in result.stdout
