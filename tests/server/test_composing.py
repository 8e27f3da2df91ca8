"""Ensembles and BLS against the real embedded server: the per-model tree, and tuning a composing model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tritongen.cli.main import app
from tritongen.client.control import ModelControl
from tritongen.server.local import LocalTritonServer

from support.composing_models import BLS_MODEL, ENSEMBLE_MODEL, PRE_MODEL, STEP_MODEL
from support.loads import QUICK_RUNS

runner = CliRunner()
SHORT = ["--duration", "2s", "--warmup", "1s", "--window", "1s", "--max-duration", "3s"]
CONCURRENCY = 2


def _loadtest(server: LocalTritonServer, *args: str | Path) -> tuple[int, str, str]:
    result = runner.invoke(
        app,
        ["loadtest", *[str(a) for a in args], "--url", server.http_url, "--metrics-url", server.metrics_url,
         "--concurrency", str(CONCURRENCY), *SHORT],
    )  # fmt: skip
    return result.exit_code, result.stdout, result.stderr + repr(result.exception)


def _models(path: Path) -> dict[str, dict[str, Any]]:
    (run,) = json.loads(path.read_text())["runs"]
    assert run["status"] == "ok" and run["errors"] == 0
    models: dict[str, dict[str, Any]] = run["server_models"]
    return models


def _within_window(step: int, top: int) -> bool:
    """Whether a step's request count matches its caller's over one measured span.

    The counters are read at the span's two boundaries; at each, up to ``CONCURRENCY``
    requests are in flight (they may have passed a step but not yet the top model), and
    the statistics call reads one model after another, so requests that finish during
    the read (under 1% of a 2 s span's count: the read takes milliseconds) can be counted
    in one model and not yet in the next.
    """
    return abs(step - top) <= 2 * CONCURRENCY + 0.01 * top


def test_loadtest_of_an_ensemble_reports_each_step_under_it(
    triton_server: LocalTritonServer, tmp_path: Path
) -> None:
    out, html = tmp_path / "ens.json", tmp_path / "ens.html"
    code, stdout, stderr = _loadtest(triton_server, ENSEMBLE_MODEL, "--json", out, "--html", html)
    assert code == 0, stderr
    models = _models(out)
    assert list(models) == [ENSEMBLE_MODEL, PRE_MODEL, STEP_MODEL]  # the top model, then its steps in order
    assert models[ENSEMBLE_MODEL]["parent"] is None
    top = models[ENSEMBLE_MODEL]
    assert isinstance(top["requests"], int) and top["requests"] > 50
    for step in (PRE_MODEL, STEP_MODEL):
        entry = models[step]
        assert entry["parent"] == ENSEMBLE_MODEL
        assert 0 < entry["executions"] <= entry["inferences"]
        assert _within_window(entry["requests"], top["requests"]), (step, entry["requests"], top["requests"])
        assert entry["avg_batch"] >= 1.0 and entry["compute_infer_us"] > 0
    # The step models ran in the ensemble's requests: their compute is part of the ensemble's.
    assert top["compute_infer_us"] > models[STEP_MODEL]["compute_infer_us"]
    shown = stdout.replace("\u00a0", " ")
    assert "Server per model" in shown and f"├─ {PRE_MODEL}" in shown and f"└─ {STEP_MODEL}" in shown
    page = html.read_text()
    assert "Server per model" in page and f"└─\u00a0{STEP_MODEL}" in page


def test_loadtest_of_a_bls_model_reports_the_model_it_called(
    triton_server: LocalTritonServer, tmp_path: Path
) -> None:
    out = tmp_path / "bls.json"
    code, _, stderr = _loadtest(triton_server, BLS_MODEL, "--input-value", f"MODEL_NAME={ENSEMBLE_MODEL}",
                                "--json", out)  # fmt: skip
    assert code == 0, stderr
    models = _models(out)
    # The BLS model calls the ensemble (a "called" child), whose steps sit under it.
    assert {name: entry["parent"] for name, entry in models.items()} == {
        BLS_MODEL: None, ENSEMBLE_MODEL: BLS_MODEL, PRE_MODEL: ENSEMBLE_MODEL, STEP_MODEL: ENSEMBLE_MODEL,
    }  # fmt: skip
    top = models[BLS_MODEL]["requests"]
    for name in (ENSEMBLE_MODEL, PRE_MODEL, STEP_MODEL):
        assert _within_window(models[name]["requests"], top), (name, models[name]["requests"], top)


def _loads(server: LocalTritonServer, model: str) -> int:
    """How often the server log says ``model`` was (re)loaded."""
    return server.log_path.read_text(errors="replace").count(f"successfully loaded '{model}'")


@pytest.mark.slow
def test_tune_a_step_of_an_ensemble_under_the_ensembles_load(
    triton_server: LocalTritonServer, served_repository: Path, tmp_path: Path
) -> None:
    control = ModelControl(triton_server.http_url, PRE_MODEL)
    before = control.served_config()
    loads_before = _loads(triton_server, PRE_MODEL)
    ensemble_text = (served_repository / ENSEMBLE_MODEL / "config.pbtxt").read_text()
    out = tmp_path / "tune"
    result = runner.invoke(
        app,
        ["tune", ENSEMBLE_MODEL, "--composing", PRE_MODEL, "--repo", str(served_repository),
         "--url", triton_server.http_url, *QUICK_RUNS, "--concurrency", "4",
         "--max-batch-size", "8", "--max-queue-delay-us", "0,500", "--instances", "1", "--strategy", "grid",
         "--rounds", "2", "--finalists", "1", "--out", str(out), "--json", str(tmp_path / "t.json")],
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr + "\n".join(triton_server.log_tail(60))
    data = json.loads((tmp_path / "t.json").read_text())
    assert data["model"] == PRE_MODEL and data["load_model"] == ENSEMBLE_MODEL and data["warnings"] == []
    keys = [t["key"] for t in data["trials"]]
    assert [key.rsplit("-", 2)[1:] for key in keys] == [["qd0", "i1"], ["qd500", "i1"]], keys
    for trial in [data["baseline"], *data["trials"]]:
        # What was rendered and reloaded is the step's config; what received the load is the ensemble.
        assert f'name: "{PRE_MODEL}"' in (out / "trials" / trial["key"] / "config.pbtxt").read_text()
        assert trial["result"]["model"] == ENSEMBLE_MODEL and trial["infer_per_s"] > 0
        (run,) = trial["result"]["runs"]
        assert run["server_models"][PRE_MODEL]["parent"] == ENSEMBLE_MODEL
    assert data["finalists"] and data["confirmation"]["completed_rounds"] == 2
    # Reloads: the baseline, the two search trials, 2 rounds x 2 contenders and the restore.
    assert _loads(triton_server, PRE_MODEL) - loads_before >= 1 + 2 + 4 + 1
    # Restored: the step serves its own config again; nothing was written without --apply.
    assert control.served_config()["dynamic_batching"] == before["dynamic_batching"]
    control.close()
    assert (served_repository / ENSEMBLE_MODEL / "config.pbtxt").read_text() == ensemble_text
    assert not (served_repository / PRE_MODEL / "config.pbtxt.bak").exists()


@pytest.mark.slow
def test_tune_under_a_bls_model_warns_when_the_load_never_reaches_the_tuned_model(
    triton_server: LocalTritonServer, served_repository: Path, tmp_path: Path
) -> None:
    # bls_call is told to call pre_scale: the load never reaches mlp_onnx, whose config is tuned.
    result = runner.invoke(
        app,
        ["tune", BLS_MODEL, "--composing", STEP_MODEL, "--input-value", f"MODEL_NAME={PRE_MODEL}",
         "--repo", str(served_repository), "--url", triton_server.http_url, *QUICK_RUNS, "--concurrency", "2",
         "--max-batch-size", "32", "--max-queue-delay-us", "0",
         "--instances", "1", "--strategy", "grid", "--rounds", "1", "--finalists", "1",
         "--out", str(tmp_path / "tune"), "--json", str(tmp_path / "t.json")],
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    data = json.loads((tmp_path / "t.json").read_text())
    assert data["model"] == STEP_MODEL and data["load_model"] == BLS_MODEL
    (warning,) = data["warnings"]
    assert f"did not reach '{STEP_MODEL}'" in warning
    assert f"did not reach '{STEP_MODEL}'" in " ".join(result.stderr.split())
    (run,) = data["baseline"]["result"]["runs"]
    assert set(run["server_models"]) == {BLS_MODEL, PRE_MODEL}


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ([ENSEMBLE_MODEL], f"--composing {PRE_MODEL} | {STEP_MODEL}"),
        ([ENSEMBLE_MODEL, "--composing", BLS_MODEL], f"'{BLS_MODEL}' is not a step of the ensemble"),
        ([ENSEMBLE_MODEL, "--composing", "absent"], "there is no model 'absent' in"),
        ([BLS_MODEL, "--composing", "absent"], "there is no model 'absent' in"),
    ],
)
def test_tune_refuses_bad_composing_in_one_line(
    served_repository: Path, args: list[str], expected: str
) -> None:
    result = runner.invoke(app, ["tune", *args, "--repo", str(served_repository), "--url", "127.0.0.1:1"])
    assert result.exit_code != 0
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and expected in " ".join(result.stderr.split()), result.stderr
