"""bench/gpu_check.py's dry run on this machine's CPU: every step of the GPU proof, for real."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from support.paths import ROOT


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"bench_{name}", ROOT / "bench" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


gpu_check = _load("gpu_check")


@pytest.mark.slow
def test_dry_run_of_the_mlp_runs_every_step_and_writes_the_results(tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="the example MLP is a PyTorch factory (tritongen[torch])")
    argv = [sys.executable, str(ROOT / "bench" / "gpu_check.py"), "--dry-run", "--models", "mlp"]
    done = subprocess.run(
        [*argv, "--out", str(tmp_path), "--duration", "2"], capture_output=True, text=True, timeout=420
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads((tmp_path / gpu_check.JSON_NAME).read_text())
    assert result["schema"] == gpu_check.SCHEMA and result["dry_run"] is True and result["status"] == "ok"
    names = [s["name"] for s in result["steps"]]
    assert names[0] == "preflight" and "serve" in names and names[-1] == "stop server"
    assert all(s["status"] == "ok" for s in result["steps"]), result["steps"]
    assert result["skipped"] == []
    mlp = result["models"]["mlp"]
    for fmt in ("torchscript", "onnx"):
        assert mlp["convert"][fmt]["verified"] is True and mlp["convert"][fmt]["kind"] == "cpu"
    for batch in ("b1", "b32"):
        assert mlp["loads"][batch]["p99_us"] > 0 and mlp["loads"][batch]["infer_per_s"] > 0
        assert mlp["loads"][batch]["req_per_s"] > 0
    assert mlp["loads"]["b32"]["infer_per_s"] == pytest.approx(32 * mlp["loads"]["b32"]["req_per_s"])
    assert [(r["model"], r["batch_size"]) for r in result["summary"]] == [
        ("mlp_torchscript", 1),
        ("mlp_torchscript", 32),
    ]
    rows = {row["format"]: row for row in mlp["compare"]["rows"]}
    assert set(rows) == {"onnx", "torchscript"}
    assert all(r["status"] == "ok" and r["p99_ms_b1"] > 0 and r["infer_per_s_b32"] > 0 for r in rows.values())
    assert result["versions"]["tritongen"] and result["preflight"]["stub"]["missing"] == []
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == sorted([gpu_check.JSON_NAME, gpu_check.STEPS_LOG, gpu_check.SERVER_LOG])
    assert "convert mlp torchscript" in (tmp_path / gpu_check.STEPS_LOG).read_text()
    assert "loading: mlp_torchscript" in (tmp_path / gpu_check.SERVER_LOG).read_text()
