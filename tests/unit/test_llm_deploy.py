"""Compose and Kubernetes files for a repository of LLM models (``--target container``), proved offline.

The repositories are written by ``tritongen convert`` from a Llama folder (a stand-in weights
file: nothing loads them). What is checked: the engine's image, readiness on the model users
call, a TensorRT-LLM engine's build service, GPU resources, autoscaling on the engine's own
queue or KV cache (not Triton's queue, which an LLM model does not use), every object valid
against the Kubernetes schemas and the compose file against the compose-spec schema; and what
cannot work refused in one line.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from tritongen.cli.main import app
from tritongen.examples.tiny_llama import write_tokenizer

from support.cli_output import error_line
from support.compose_schema import check_compose_schema

runner = CliRunner()
LLAMA = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 128, "num_hidden_layers": 2,
    "num_attention_heads": 4, "max_position_embeddings": 512, "vocab_size": 300, "torch_dtype": "float16",
}  # fmt: skip


def _repo(tmp_path: Path, formats: str) -> Path:
    folder = tmp_path / "llama"
    if not folder.exists():
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps(LLAMA))
        (folder / "model.safetensors").write_bytes(b"\0" * 64)
        write_tokenizer(folder)
        (folder / "tokenizer_config.json").write_text("{}")
    repo = tmp_path / f"repo-{formats}"
    result = runner.invoke(
        app,
        [
            "convert",
            str(folder),
            "--repo",
            str(repo),
            "--name",
            "llm",
            "--target",
            "container",
            "--formats",
            formats,
        ],
    )
    assert result.exit_code == 0, result.stdout + result.stderr
    return repo


def _docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


@pytest.mark.parametrize(
    ("formats", "flavour", "model"),
    [("vllm", "vllm-python-py3", "llm_vllm"), ("tensorrtllm", "trtllm-python-py3", "llm_tensorrtllm")],
)
def test_the_compose_file_runs_the_engine_s_image_and_waits_for_the_model(
    tmp_path: Path, formats: str, flavour: str, model: str
) -> None:
    repo = _repo(tmp_path, formats)
    out = tmp_path / "compose.yaml"
    result = runner.invoke(app, ["compose", str(repo), "-o", str(out)])
    assert result.exit_code == 0, result.stdout + result.stderr
    check_compose_schema(out)
    services = yaml.safe_load(out.read_text())["services"]
    server = services["tritonserver"]
    assert server["image"].endswith(flavour)
    assert server["healthcheck"]["test"][-1] == f"http://localhost:8000/v2/models/{model}/ready"
    assert server["healthcheck"]["start_period"] == "600s"
    assert server["deploy"]["resources"]["reservations"]["devices"][0]["capabilities"] == ["gpu"]
    if formats == "tensorrtllm":
        build = services["trtllm-build"]
        assert build["image"] == server["image"] and build["profiles"] == ["build"]
        assert build["command"] == ["bash", "/models/llm_tensorrtllm_engine/build_engine.sh"]
        assert not build["volumes"][0].endswith(":ro")  # the engine is written into the repository
    else:
        assert "trtllm-build" not in services


@pytest.mark.parametrize(
    ("formats", "args", "query"),
    [
        ("vllm", [], "sum by (<<.GroupBy>>)(vllm:num_requests_waiting{<<.LabelMatchers>>})"),
        ("tensorrtllm", ["--autoscaler", "keda", "--scale-on", "llm-kv-cache"],
         'avg(nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="fraction",namespace="default"'),
        ("vllm", ["--autoscaler", "keda", "--scale-on", "llm-kv-cache"],
         "(avg(vllm:gpu_cache_usage_perc{namespace=\"default\""),
    ],
)  # fmt: skip
def test_kubernetes_serves_the_engine_ready_on_the_model_and_scales_on_its_pressure(
    tmp_path: Path, formats: str, args: list[str], query: str
) -> None:
    repo = _repo(tmp_path, formats)
    out = tmp_path / "deploy"
    result = runner.invoke(app, ["kubernetes", str(repo), "-o", str(out), *args])
    assert result.exit_code == 0, result.stdout + result.stderr
    assert "objects valid against Kubernetes" in result.stdout
    (deployment,) = _docs(out / "base" / "deployment.yaml")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    entry = "llm_vllm" if formats == "vllm" else "llm_tensorrtllm"
    assert container["image"].endswith("vllm-python-py3" if formats == "vllm" else "trtllm-python-py3")
    assert container["readinessProbe"]["httpGet"]["path"] == f"/v2/models/{entry}/ready"
    assert container["startupProbe"]["httpGet"]["path"] == f"/v2/models/{entry}/ready"
    (patch,) = _docs(out / "gpu" / "accelerator-patch.yaml")
    assert patch["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"
    if "keda" in args:
        (scaled,) = _docs(out / "base" / "scaledobject.yaml")
        assert scaled["spec"]["triggers"][0]["metadata"]["query"].startswith(query)
        assert scaled["spec"]["triggers"][0]["metadata"]["threshold"] == "0.8"
    else:
        rules = yaml.safe_load((out / "prometheus-adapter-rules.yaml").read_text())["rules"][0]
        assert rules["metricsQuery"] == query
        (hpa,) = _docs(out / "base" / "hpa.yaml")
        assert hpa["spec"]["metrics"][0]["pods"]["metric"]["name"] == "tritongen_llm_requests_waiting"


def test_what_cannot_serve_an_llm_is_refused_in_one_line(tmp_path: Path) -> None:
    repo = _repo(tmp_path, "vllm")
    out = tmp_path / "deploy"
    result = runner.invoke(
        app, ["kubernetes", str(repo), "-o", str(out), "--model-store", "s3://bucket/models"]
    )
    assert result.exit_code != 0 and "not from a bucket" in error_line(result.stderr)
    assert not out.exists()
    plain = tmp_path / "plain"
    plain.mkdir()
    import shutil

    from support.paths import ROOT

    shutil.copytree(ROOT / "model_repository" / "mlp_onnx", plain / "mlp_onnx")
    result = runner.invoke(app, ["kubernetes", str(plain), "-o", str(out), "--scale-on", "llm-queue"])
    assert result.exit_code != 0 and "holds no LLM model" in error_line(result.stderr)
    assert not out.exists()
