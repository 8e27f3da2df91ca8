"""Models whose config Triton completes: lint says so, serve, loadtest and tune use the server's config."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from tritongen.cli.main import app
from tritongen.client.control import ModelControl
from tritongen.errors import ModelLoadError
from tritongen.lint.findings import Finding
from tritongen.lint.repository import lint_paths
from tritongen.server.local import LocalTritonServer
from tritongen.triton.autofill import server_completes
from tritongen.triton.proto import config_from_served, parse_model_config

from support.autocomplete_models import (
    AUTO_MODEL,
    EXECUTION_S,
    FAILING_MODEL_PY,
    MINIMAL_CONFIG,
    write_auto_model,
    write_ensemble,
    write_refused_and_doubtful,
)

runner = CliRunner()


def _by_severity(findings: list[Finding]) -> dict[str, list[Finding]]:
    grouped: dict[str, list[Finding]] = {"error": [], "warning": [], "info": []}
    for finding in findings:
        grouped[finding.severity].append(finding)
    return grouped


def _served(url: str, model: str) -> dict[str, Any]:
    control = ModelControl(url, model)
    try:
        return control.served_config()
    finally:
        control.close()


def test_lint_notes_that_triton_fills_in_a_python_config(served_repository: Path, tmp_path: Path) -> None:
    found = _by_severity(lint_paths([served_repository / AUTO_MODEL]).findings)
    assert not found["error"] and not found["warning"], [f.text() for f in found["error"] + found["warning"]]
    (note,) = found["info"]
    assert note.rule == "autocomplete.filled" and note.model == AUTO_MODEL
    assert note.message.startswith("no config.pbtxt: Triton fills it in: backend 'python' from 1/model.py")
    assert "TritonPythonModel.auto_complete_config in 1/model.py" in note.message

    # The usual partial config (the backend only) is completed the same way.
    partial = write_auto_model(tmp_path / "repo" / "partial", config=MINIMAL_CONFIG)
    found = _by_severity(lint_paths([partial]).findings)
    assert not found["error"] and not found["warning"]
    assert [f.message.split(":")[0] for f in found["info"]] == ["the config declares no inputs or outputs"]

    result = runner.invoke(app, ["lint", str(served_repository / AUTO_MODEL)])
    assert result.exit_code == 0 and "1 model(s) checked: clean (1 note(s))" in result.stdout
    assert "info: auto_sleep: no config.pbtxt: Triton fills it in" in result.stdout
    doc = json.loads(runner.invoke(app, ["lint", str(partial), "--format", "json"]).stdout)
    assert (doc["errors"], doc["warnings"], doc["notes"]) == (0, 0, 1)
    assert runner.invoke(app, ["lint", str(partial), "--strict"]).exit_code == 0  # a note is no warning


@pytest.mark.slow
def test_lint_agrees_with_the_server_on_directories_without_config(tmp_path: Path) -> None:
    """Lint errors exactly where the real server refuses, config-less Python models load, reasons are told."""
    repo = tmp_path / "repo"
    expected = write_refused_and_doubtful(repo)
    write_auto_model(repo / "auto_none")
    write_auto_model(repo / "auto_minimal", config=MINIMAL_CONFIG)
    write_auto_model(repo / "auto_raises", model_py=FAILING_MODEL_PY)  # lint cannot run it: only Triton knows
    linted = {f.model for f in lint_paths([repo]).findings if f.severity == "error"}
    assert linted == {model for model, rule in expected.items() if model != "plain_py"}
    with pytest.raises(ModelLoadError) as refused:
        LocalTritonServer(repo, http_port=0, grpc_port=0, metrics_port=0).start()
    reasons = refused.value.reasons
    assert set(reasons) == linted | {"auto_raises"}, reasons
    assert "no shapes known" in reasons["auto_raises"]
    for model in ("empty_dir", "unknown_file", "no_version"):  # the server lists them without a state
        assert "Could not determine backend" in reasons[model], reasons[model]
    assert "invalid syntax" in reasons["broken_py"] or "expected ':'" in reasons["broken_py"], reasons


def test_the_server_completes_the_config(triton_server: LocalTritonServer, served_repository: Path) -> None:
    assert not (served_repository / AUTO_MODEL / "config.pbtxt").exists()
    served = _served(triton_server.http_url, AUTO_MODEL)
    assert served["backend"] == "python" and int(served["max_batch_size"]) == 8
    assert [(t["name"], t["data_type"], [int(d) for d in t["dims"]]) for t in served["input"]] == [
        ("x", "TYPE_FP32", [4])
    ]
    assert "dynamic_batching" not in served
    assert server_completes(served_repository / AUTO_MODEL) == "no config.pbtxt"
    control = ModelControl(triton_server.http_url, AUTO_MODEL)
    try:
        config = config_from_served(control.loaded_config())
    finally:
        control.close()
    assert config.max_batch_size == 8 and config.dynamic_batching is None
    assert [(t.name, t.dims) for t in config.input] == [("x", [4])]
    assert [t.name for t in config.output] == ["y"]


def test_loadtest_drives_the_auto_completed_model(triton_server: LocalTritonServer, tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    result = runner.invoke(
        app,
        ["loadtest", AUTO_MODEL, "--url", triton_server.http_url, "--metrics-url", triton_server.metrics_url,
         "--concurrency", "2", "--duration", "2s", "--warmup", "0.5s", "--json", str(out)],
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    (run,) = json.loads(out.read_text())["runs"]
    assert run["status"] == "ok" and run["errors"] == 0
    # One instance, no dynamic batching, one request per 30 ms execution: at most 1/30 ms (10% margin).
    assert 5 < run["qps"] < 1 / EXECUTION_S * 1.1, run["qps"]
    assert run["latency_us"]["p50"] >= EXECUTION_S * 1e6


@pytest.mark.slow
def test_tune_starts_from_the_servers_config_and_apply_writes_it_out(
    triton_server: LocalTritonServer, served_repository: Path, tmp_path: Path
) -> None:
    model_dir = served_repository / AUTO_MODEL
    config_file = model_dir / "config.pbtxt"
    try:
        result = runner.invoke(
            app,
            # Three rounds: with two, the t interval of the gain is ±9 standard deviations of the
            # per-round log ratio, and a busy machine can widen even a 5× gain's interval past 1.
            ["tune", AUTO_MODEL, "--repo", str(served_repository), "--url", triton_server.http_url,
             "--duration", "1s", "--warmup", "0.5s", "--window", "0.5s", "--max-duration", "1s",
             "--concurrency", "8", "--max-batch-size", "8",
             "--preferred-batch-sizes", "none", "--max-queue-delay-us", "1000", "--instances", "1,2",
             "--strategy", "grid", "--rounds", "3", "--finalists", "1",
             "--out", str(tmp_path / "t"), "--json", str(tmp_path / "t.json"), "--apply"],
        )  # fmt: skip
        assert result.exit_code == 0, result.stderr
        assert (
            f"{AUTO_MODEL}: no config.pbtxt: using the config the server reports "
            "(max batch 8, 1 input(s), 1 output(s), 1 instance(s))"
        ) in result.stdout
        doc = json.loads((tmp_path / "t.json").read_text())
        assert doc["baseline"]["key"] == "current-mb8-nodb-i1"
        assert [t["key"] for t in doc["trials"]] == ["mb8-pbauto-qd1000-i1", "mb8-pbauto-qd1000-i2"]
        winner = doc["best"]["key"]
        assert doc["decision"] == "apply" and winner.startswith("mb8-pbauto-qd1000-"), doc["verdict"]
        assert f"applied {winner}: wrote {config_file} (there was none): " in result.stdout  # no .bak
        assert not (model_dir / "config.pbtxt.bak").exists()

        # A complete config, in Triton's schema, that the server loads from the file.
        written = parse_model_config(config_file.read_text())
        assert written.backend == "python" and written.max_batch_size == 8
        assert [i.name for i in written.input] == ["x"] and [o.name for o in written.output] == ["y"]
        assert written.dynamic_batching.max_queue_delay_microseconds == 1000
        control = ModelControl(triton_server.http_url, AUTO_MODEL)
        try:
            control.load()  # from config.pbtxt, not from a JSON override
            served = control.served_config()
        finally:
            control.close()
        assert int(served["dynamic_batching"]["max_queue_delay_microseconds"]) == 1000
        assert sum(int(g["count"]) for g in served["instance_group"]) == int(winner[-1])
    finally:
        config_file.unlink(missing_ok=True)
        (model_dir / "config.pbtxt.bak").unlink(missing_ok=True)
        control = ModelControl(triton_server.http_url, AUTO_MODEL)
        control.load()  # back to the auto-completed config
        control.close()
    assert "dynamic_batching" not in _served(triton_server.http_url, AUTO_MODEL)


@pytest.mark.slow
def test_tune_on_the_embedded_server_starts_from_the_config_that_server_completes(tmp_path: Path) -> None:
    """Without --url the config comes from the tune's own embedded server, which then runs the trials."""
    repo = tmp_path / "repo"
    write_auto_model(repo / AUTO_MODEL)
    result = runner.invoke(
        app,
        ["tune", AUTO_MODEL, "--repo", str(repo),
         "--duration", "1s", "--warmup", "0.5s", "--window", "0.5s", "--max-duration", "1s",
         "--concurrency", "2", "--max-queue-delay-us", "0", "--instances", "1",
         "--strategy", "grid", "--rounds", "1", "--finalists", "1",
         "--out", str(tmp_path / "t"), "--json", str(tmp_path / "t.json")],
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    note = f"{AUTO_MODEL}: no config.pbtxt: using the config the server reports (max batch 8,"
    assert note in result.stdout
    assert result.stdout.index(note) < result.stdout.index(f"tuning {AUTO_MODEL}: 1 legal configs")
    doc = json.loads((tmp_path / "t.json").read_text())
    baseline = doc["baseline"]
    assert baseline["key"] == "current-mb8-nodb-i1" and baseline["status"] == "ok"
    assert baseline["infer_per_s"] > 0
    assert not (repo / AUTO_MODEL / "config.pbtxt").exists()  # nothing applied


@pytest.mark.slow
def test_serve_copes_with_a_repository_it_did_not_write(tmp_path: Path) -> None:
    """No tritongen metadata, a model without config, a partial config, an ensemble over both."""
    repo = tmp_path / "theirs"
    write_auto_model(repo / "auto_none")
    write_auto_model(repo / "auto_minimal", config=MINIMAL_CONFIG)
    write_ensemble(repo / "chain", "auto_none", "auto_minimal")
    assert not list(repo.rglob("tritongen.json"))
    process = subprocess.Popen(
        [sys.executable, "-m", "tritongen", "serve", str(repo),
         "--http-port", "0", "--grpc-port", "0", "--metrics-port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    try:
        lines = _lines_until(process, "Ctrl-C to stop")
        assert any("models ready: auto_minimal, auto_none, chain" in line for line in lines), lines
        url = next(m[1] for line in lines if (m := re.search(r"http://(127\.0\.0\.1:\d+)", line)))
        x = np.arange(8, dtype=np.float32).reshape(2, 4)
        assert np.array_equal(_infer(url, "chain", x), x * 4)  # two doublers
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=60) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.stderr is not None
    # lint ran first and said what Triton fills in, once per model without a full config
    notes = [line for line in process.stderr.read().splitlines() if "[autocomplete.filled]" in line]
    assert len(notes) == 2, notes


def _lines_until(process: subprocess.Popen[str], needle: str, timeout_s: float = 120) -> list[str]:
    assert process.stdout is not None
    seen: list[str] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        seen.append(line)
        if needle in line:
            return seen
    raise AssertionError(f"{needle!r} never printed; got {seen!r}")


def _infer(url: str, model: str, x: np.ndarray) -> np.ndarray:
    import tritonclient.http as httpclient

    client = httpclient.InferenceServerClient(url)
    try:
        tensor = httpclient.InferInput("x", list(x.shape), "FP32")
        tensor.set_data_from_numpy(x)
        result = client.infer(model, [tensor])
        output: np.ndarray = result.as_numpy("y")
        return output
    finally:
        client.close()
