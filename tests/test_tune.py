"""``tritongen tune`` against the real embedded server: live reloads, results, resume, apply."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tritongen.cli.main import app
from tritongen.server.local import LocalTritonServer
from tritongen.triton.proto import parse_config_text
from tritongen.tune.control import ModelControl

pytestmark = pytest.mark.triton
runner = CliRunner()
MODEL = "mlp_onnx"
FAST = ["--duration", "1s", "--warmup", "0.5s", "--concurrency", "4"]


def _tune(server: LocalTritonServer, repo: Path, *args: str | Path) -> tuple[int, str, str]:
    result = runner.invoke(
        app, ["tune", MODEL, "--repo", str(repo), "--url", server.http_url, *FAST, *[str(a) for a in args]]
    )
    return result.exit_code, result.stdout, result.stderr


def _served_batching(server: LocalTritonServer) -> Any:
    control = ModelControl(server.http_url, MODEL)
    try:
        return control.served_config().get("dynamic_batching")
    finally:
        control.close()


def test_grid_tune_measures_every_legal_config_and_restores_the_model(
    triton_server: LocalTritonServer, served_repository: Path, tmp_path: Path
) -> None:
    before = _served_batching(triton_server)
    out = tmp_path / "tune"
    code, stdout, stderr = _tune(
        triton_server, served_repository, "--slo-p99-ms", "500", "--max-batch-size", "8,32",
        "--preferred-batch-sizes", "4,8;16", "--max-queue-delay-us", "200", "--instances", "1",
        "--strategy", "grid", "--out", out, "--json", tmp_path / "t.json", "--plot", tmp_path / "t.png",
    )  # fmt: skip
    assert code == 0, stderr
    data = json.loads((tmp_path / "t.json").read_text())
    assert data["schema"] == "tritongen.tune/1" and data["model"] == MODEL and data["strategy"] == "grid"
    keys = [t["key"] for t in data["trials"]]
    assert keys == ["mb8-pb4.8-qd200-i1", "mb32-pb4.8-qd200-i1", "mb32-pb16-qd200-i1"]
    assert [s["reason"] for s in data["skipped"]] == ["preferred batch sizes 16 exceed max_batch_size 8"]
    assert data["baseline"]["config"]["dynamic_batching"] is False
    assert all(t["feasible"] and t["infer_per_s"] > 0 and t["result"]["runs"] for t in data["trials"])
    assert data["best"]["key"] in keys and data["best"]["gain_over_baseline"] > 0
    for key in keys:
        assert "preferred_batch_size" in (out / "trials" / key / "config.pbtxt").read_text()
        assert (out / "trials" / key / "result.json").is_file()
    assert (tmp_path / "t.png").stat().st_size > 0
    assert "best: " in stdout
    assert _served_batching(triton_server) == before  # back on its config.pbtxt


def test_resume_skips_finished_trials(
    triton_server: LocalTritonServer, served_repository: Path, tmp_path: Path
) -> None:
    out = tmp_path / "tune"
    args = ["--max-batch-size", "16", "--preferred-batch-sizes", "none", "--max-queue-delay-us", "0,500"]
    args += ["--instances", "1", "--strategy", "grid"]
    code, _, stderr = _tune(triton_server, served_repository, *args, "--out", out, "--max-trials", "1")
    assert code == 0, stderr
    first = json.loads((out / "tune.json").read_text())
    assert len(first["trials"]) == 1
    code, _, stderr = _tune(triton_server, served_repository, *args, "--resume", out)
    assert code == 0, stderr
    assert stderr.count("(reused)") == 2  # the baseline and the finished trial
    second = json.loads((out / "tune.json").read_text())
    assert [t["key"] for t in second["trials"]] == ["mb16-pbauto-qd0-i1", "mb16-pbauto-qd500-i1"]
    assert second["trials"][0]["infer_per_s"] == first["trials"][0]["infer_per_s"]


def test_resume_of_another_tune_is_refused(
    triton_server: LocalTritonServer, served_repository: Path, tmp_path: Path
) -> None:
    out = tmp_path / "tune"
    out.mkdir()
    (out / "tune-request.json").write_text(json.dumps({"model": "other"}))
    code, _, stderr = _tune(triton_server, served_repository, "--resume", out, "--max-trials", "1")
    assert code == 1
    assert "holds trials of another tune" in stderr


def test_apply_writes_the_best_config_with_a_backup(
    triton_server: LocalTritonServer, served_repository: Path, tmp_path: Path
) -> None:
    config = served_repository / MODEL / "config.pbtxt"
    original = config.read_text()
    try:
        code, _, stderr = _tune(
            triton_server, served_repository, "--max-batch-size", "16", "--preferred-batch-sizes", "8",
            "--max-queue-delay-us", "300", "--instances", "1", "--out", tmp_path / "t", "--apply",
        )  # fmt: skip
        assert code == 0, stderr
        assert (served_repository / MODEL / "config.pbtxt.bak").read_text() == original
        applied = config.read_text()
        assert "max_queue_delay_microseconds: 300" in applied and "preferred_batch_size: [ 8 ]" in applied
        assert _served_batching(triton_server)["max_queue_delay_microseconds"] == 300  # served live too
    finally:
        config.write_text(original)
        (served_repository / MODEL / "config.pbtxt.bak").unlink(missing_ok=True)
        control = ModelControl(triton_server.http_url, MODEL)
        control.load(parse_config_text(original))
        control.close()


def test_bad_tune_settings_are_one_line_errors(
    triton_server: LocalTritonServer, served_repository: Path, tmp_path: Path
) -> None:
    code, _, stderr = _tune(
        triton_server, served_repository, "--preferred-batch-sizes", "8,4", "--out", tmp_path / "t"
    )
    assert code == 1 and "error:" in stderr
    code, _, stderr = _tune(triton_server, served_repository, "--strategy", "random", "--out", tmp_path / "t")
    assert code == 1 and "unknown search strategy" in stderr


@pytest.mark.slow
def test_ctrl_c_restores_the_config_and_keeps_what_was_measured(
    triton_server: LocalTritonServer, served_repository: Path, tmp_path: Path
) -> None:
    before = _served_batching(triton_server)
    out = tmp_path / "tune"
    cli = subprocess.Popen(
        [sys.executable, "-m", "tritongen", "tune", MODEL, "--repo", str(served_repository),
         "--url", triton_server.http_url, "--max-batch-size", "16", "--preferred-batch-sizes", "4,8",
         "--max-queue-delay-us", "0,100,200,300", "--instances", "1", "--strategy", "grid",
         "--duration", "20s", "--warmup", "0.5s", "--concurrency", "2", "--out", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not (out / "trials").is_dir() or len(list((out / "trials").iterdir())) < 2:
            assert time.monotonic() < deadline and cli.poll() is None, (
                "the tune never reached its second trial"
            )
            time.sleep(0.5)
        time.sleep(3)  # inside the first candidate's load test
        cli.send_signal(signal.SIGINT)
        code = cli.wait(timeout=60)
    finally:
        if cli.poll() is None:
            cli.kill()
    stderr = cli.stderr.read() if cli.stderr else ""
    assert code == 130, stderr
    assert "model config restored" in stderr
    doc = json.loads((out / "tune.json").read_text())
    assert doc["status"] == "interrupted"
    assert (out / "trials" / doc["baseline"]["key"] / "result.json").is_file()
    assert _served_batching(triton_server) == before


PICKY_MODEL_PY = """
import json

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        if int(config["max_batch_size"]) > 8:
            raise ValueError("this model cannot run batches above 8")

    def execute(self, requests):
        inputs = [pb_utils.get_input_tensor_by_name(r, "x").as_numpy() for r in requests]
        return [pb_utils.InferenceResponse([pb_utils.Tensor("y", x)]) for x in inputs]
"""


def test_a_config_the_server_refuses_is_a_failed_trial_and_the_sweep_goes_on(tmp_path: Path) -> None:
    from tritongen.triton.model_config import (
        DynamicBatching,
        InstanceGroup,
        ModelConfig,
        ModelInput,
        ModelOutput,
    )
    from tritongen.triton.render import render_config

    repo = tmp_path / "repo"
    model = repo / "picky"
    (model / "1").mkdir(parents=True)
    (model / "1" / "model.py").write_text(PICKY_MODEL_PY)
    config = ModelConfig(
        name="picky", backend="python", max_batch_size=8,
        input=[ModelInput(name="x", data_type="TYPE_FP32", dims=[4])],
        output=[ModelOutput(name="y", data_type="TYPE_FP32", dims=[4])],
        dynamic_batching=DynamicBatching(), instance_group=[InstanceGroup(count=1, kind="KIND_CPU")],
    )  # fmt: skip
    (model / "config.pbtxt").write_text(render_config(config))
    with LocalTritonServer(repo, http_port=0, grpc_port=0, metrics_port=0) as server:
        result = runner.invoke(
            app,
            ["tune", "picky", "--repo", str(repo), "--url", server.http_url, *FAST,
             "--max-batch-size", "8,16", "--max-queue-delay-us", "0", "--instances", "1",
             "--strategy", "grid", "--out", str(tmp_path / "t")],
        )  # fmt: skip
        assert result.exit_code == 0, result.stderr
        doc = json.loads((tmp_path / "t" / "tune.json").read_text())
        by_key = {t["key"]: t for t in doc["trials"]}
        assert by_key["mb16-pbauto-qd0-i1"]["status"] == "failed"
        assert "cannot run batches above 8" in by_key["mb16-pbauto-qd0-i1"]["reason"]
        assert (tmp_path / "t" / "trials" / "mb16-pbauto-qd0-i1" / "failed.json").is_file()
        assert by_key["mb8-pbauto-qd0-i1"]["status"] == "ok" and doc["best"]["key"] == "mb8-pbauto-qd0-i1"
        control = ModelControl(server.http_url, "picky")
        assert int(control.served_config()["max_batch_size"]) == 8  # back on its own config
        control.close()
