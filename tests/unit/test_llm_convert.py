"""``tritongen convert MODEL_DIR``: a Hugging Face causal LM to vLLM and TensorRT-LLM model directories.

The folder is a Llama's config, a tokenizer trained in code and a stand-in weights file
(nothing here loads weights). The local vLLM model's environment is a stand-in ``python3``
that answers the probe as the environment would. What is checked: the settings derived and
refused as the engines refuse them, the directories written and linted clean, and each bad
input refused in one line with nothing written.
"""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tritongen.cli.main import app
from tritongen.convert.llm.settings import EngineOptions, resolve_settings
from tritongen.errors import ConfigError, SourceError
from tritongen.examples.tiny_llama import write_tokenizer
from tritongen.sources.llm_source import load_llm_source

from support.cli_output import error_line

runner = CliRunner()
ENGINE = "llama_tensorrtllm_engine"
LLAMA = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "max_position_embeddings": 512,
    "vocab_size": 300,
    "torch_dtype": "float32",
}


def _folder(path: Path, config: dict[str, Any] | None = None, tokenizer: bool = True) -> Path:
    path.mkdir(parents=True)
    (path / "config.json").write_text(json.dumps(config or LLAMA))
    (path / "model.safetensors").write_bytes(b"\0" * 64)
    if tokenizer:
        write_tokenizer(path)
        (path / "tokenizer_config.json").write_text(json.dumps({"bos_token": "<s>", "eos_token": "</s>"}))
    return path


@pytest.fixture
def llama(tmp_path: Path) -> Path:
    return _folder(tmp_path / "llama")


def _env(path: Path, numpy: str = "1.26.4", vllm: bool = True) -> Path:
    """A stand-in environment: its ``python3`` answers the probe with these facts."""
    import sys

    (path / "bin").mkdir(parents=True)
    facts = json.dumps({"vllm": vllm, "numpy": numpy, "python": list(sys.version_info[:2])})
    python = path / "bin" / "python3"
    python.write_text(f"#!/bin/sh\necho '{facts}'\n")
    python.chmod(python.stat().st_mode | stat.S_IXUSR)
    return path


def _convert(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, ["convert", *args], env={"COLUMNS": "200"})
    return result.exit_code, result.stdout, result.stderr


def test_the_folder_is_read_as_a_causal_lm(llama: Path) -> None:
    source = load_llm_source(llama)
    assert source.architecture == "LlamaForCausalLM" and source.max_positions == 512
    assert source.head_dim == 32 and source.kv_bytes_per_token == 2 * 2 * 4 * 32 * 4
    assert source.weight_files == ("model.safetensors",) and "tokenizer.json" in source.tokenizer_files


@pytest.mark.parametrize(
    ("config", "tokenizer", "weights", "expected"),
    [
        ({**LLAMA, "architectures": ["BertModel"]}, True, True, "not a causal language model"),
        ({**LLAMA, "is_encoder_decoder": True}, True, True, "encoder-decoder"),
        (LLAMA, False, True, "has no tokenizer"),
        (LLAMA, True, False, "has no weights"),
    ],
)
def test_a_folder_that_is_no_servable_llm_is_refused(
    tmp_path: Path, config: dict[str, Any], tokenizer: bool, weights: bool, expected: str
) -> None:
    folder = _folder(tmp_path / "m", config, tokenizer)
    if not weights:
        (folder / "model.safetensors").unlink()
    with pytest.raises(SourceError, match=expected):
        load_llm_source(folder)


def test_settings_are_derived_from_the_model_and_the_target(llama: Path) -> None:
    source = load_llm_source(llama)
    local = resolve_settings(EngineOptions(), source, "local")
    assert (local.max_model_len, local.max_num_seqs, local.max_num_batched_tokens) == (512, 16, 2048)
    assert local.kv_cache_bytes == 2**30 and local.kv_cache_fraction is None
    assert local.chunked_prefill and local.prefix_caching
    container = resolve_settings(EngineOptions(chunked_prefill=False), source, "container")
    assert container.kv_cache_fraction == 0.9 and container.kv_cache_bytes is None
    assert container.max_num_seqs == 256 and container.max_num_batched_tokens >= container.max_model_len
    small = resolve_settings(EngineOptions(kv_cache_gib=2 * 512 * 1024 / 2**30), source, "local")
    assert small.max_model_len == 2 * 512 * 1024 // source.kv_bytes_per_token  # cut to what the cache holds


@pytest.mark.parametrize(
    ("options", "target", "expected"),
    [
        (
            EngineOptions(max_num_batched_tokens=256, chunked_prefill=False),
            "local",
            "without chunked prefill",
        ),
        (EngineOptions(max_num_batched_tokens=8, max_num_seqs=16), "local", "below --max-num-seqs"),
        (EngineOptions(max_model_len=4096), "container", "longer than the 512 positions"),
        (EngineOptions(kv_cache_fraction=0.5), "local", "runs on the CPU"),
        (EngineOptions(kv_cache_fraction=1.5), "container", r"not in \(0, 1\]"),
        (EngineOptions(kv_cache_gib=0.0001, max_model_len=512), "local", "holds no sequence"),
        (EngineOptions(kv_cache_gib=1, kv_cache_fraction=0.5), "container", "both size the KV cache"),
    ],
)
def test_settings_the_engines_refuse_are_refused(
    llama: Path, options: EngineOptions, target: str, expected: str
) -> None:
    with pytest.raises(ConfigError, match=expected):
        resolve_settings(options, load_llm_source(llama), target)  # type: ignore[arg-type]


def test_the_local_vllm_model_is_written_for_the_embedded_server(llama: Path, tmp_path: Path) -> None:
    env = _env(tmp_path / "env")
    repo = tmp_path / "repo"
    code, out, err = _convert(str(llama), "--repo", str(repo), "--vllm-env", str(env), "--max-num-seqs", "4")
    assert code == 0, out + err
    model = repo / "llama_vllm"
    text = (model / "config.pbtxt").read_text()
    assert 'backend: "python"' in text and "decoupled: true" in text
    assert f'string_value: "{env.absolute()}"' in text and 'key: "max_num_seqs"' in text
    for name in ("text_input", "max_tokens", "temperature", "ignore_eos", "stop", "stream", "prompt_tokens"):
        assert f'name: "{name}"' in text
    assert (model / "1" / "model.py").read_text().startswith('"""Triton Python-backend model running vLLM')
    assert (model / "1" / "hf" / "model.safetensors").exists() and (
        model / "1" / "hf" / "tokenizer.json"
    ).exists()
    metadata = json.loads((model / "tritongen.json").read_text())
    assert metadata["format"] == "vllm" and metadata["engine"]["settings"]["max_num_seqs"] == 4
    assert "max_num_seqs 4" in out


def test_the_container_layouts_are_written_and_lint_clean(llama: Path, tmp_path: Path) -> None:
    from tritongen.lint.repository import lint_paths

    repo = tmp_path / "repo"
    json_path = tmp_path / "convert.json"
    code, out, err = _convert(
        str(llama), "--repo", str(repo), "--target", "container", "--formats", "vllm,tensorrtllm",
        "--max-num-seqs", "8", "--kv-cache-fraction", "0.8", "--json", str(json_path),
    )  # fmt: skip
    assert code == 0, out + err
    names = sorted(p.name for p in repo.iterdir())
    assert names == [
        "llama_tensorrtllm", "llama_tensorrtllm_engine", "llama_tensorrtllm_postprocessing",
        "llama_tensorrtllm_preprocessing", "llama_vllm",
    ]  # fmt: skip
    arguments = json.loads((repo / "llama_vllm" / "1" / "model.json").read_text())
    assert arguments["model"] == "/models/llama_vllm/1/hf" and arguments["gpu_memory_utilization"] == 0.8
    engine = (repo / "llama_tensorrtllm_engine" / "config.pbtxt").read_text()
    assert 'backend: "tensorrtllm"' in engine and "max_batch_size: 8" in engine
    assert 'string_value: "inflight_fused_batching"' in engine and 'string_value: "0.8"' in engine
    script = (repo / "llama_tensorrtllm_engine" / "build_engine.sh").read_text()
    assert "--max_batch_size 8" in script and "models/core/llama/convert_checkpoint.py" in script
    assert "engine not built: TensorRT-LLM is not installed here" in out and "trtllm-python-py3" in out
    report = lint_paths([repo])
    assert [f for f in report.findings if f.severity == "error"] == []
    document = json.loads(json_path.read_text())
    assert [f["status"] for f in document["formats"]] == ["built", "built"]


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))


@pytest.mark.parametrize(
    ("model", "file", "old", "new", "rule"),
    [
        (ENGINE, "config.pbtxt", "max_batch_size: 8", "max_batch_size: 16", "llm.trtllm-batch-size"),
        (ENGINE, "config.pbtxt", "decoupled: true", "decoupled: false", "llm.layout-decoupled"),
        (ENGINE, "config.pbtxt", '"inflight_fused_batching"', '"fused"', "llm.trtllm-batching"),
        (ENGINE, "config.pbtxt", '"max_beam_width"\n  value: { string_value: "1"',
         '"max_beam_width"\n  value: { string_value: "2"', "llm.trtllm-beam-width"),
        ("llama_vllm", "1/model.json", '"enable_chunked_prefill": true', '"enable_chunked_prefill": false, '
         '"max_num_batched_tokens": 16', "llm.vllm-batched-tokens"),
        ("llama_vllm", "1/model.json", '/1/hf"', '/1/x"', "llm.vllm-weights"),
    ],
)  # fmt: skip
def test_lint_finds_what_disagrees_across_a_layout(
    llama: Path, tmp_path: Path, model: str, file: str, old: str, new: str, rule: str
) -> None:
    from tritongen.lint.repository import lint_paths

    repo = tmp_path / "repo"
    code, out, err = _convert(
        str(llama),
        "--repo",
        str(repo),
        "--target",
        "container",
        "--formats",
        "vllm,tensorrtllm",
        "--max-num-seqs",
        "8",
    )
    assert code == 0, out + err
    _edit(repo / model / file, old, new)
    errors = [f.rule for f in lint_paths([repo]).findings if f.severity == "error"]
    assert rule in errors, errors


def test_a_built_engine_is_checked_and_a_missing_tokenizer_found(llama: Path, tmp_path: Path) -> None:
    import shutil

    from tritongen.lint.repository import lint_paths

    repo = tmp_path / "repo"
    code, out, err = _convert(
        str(llama), "--repo", str(repo), "--target", "container", "--formats", "tensorrtllm"
    )
    assert code == 0, out + err
    built = {"build_config": {"max_batch_size": 256, "max_beam_width": 1, "plugin_config": {
        "paged_kv_cache": False, "remove_input_padding": True, "use_paged_context_fmha": True}}}  # fmt: skip
    (repo / "llama_tensorrtllm_engine" / "1" / "config.json").write_text(json.dumps(built))
    shutil.rmtree(repo / "llama_tensorrtllm_preprocessing" / "1" / "tokenizer")
    findings = lint_paths([repo]).findings
    errors = {f.rule: f.message for f in findings if f.severity == "error"}
    assert (
        "paged KV cache" in errors["llm.trtllm-batching"]
        and "the built engine" in errors["llm.trtllm-batching"]
    )
    assert "llm.layout-tokenizer" in errors
    assert "llm.trtllm-not-built" not in {f.rule for f in findings}


def _refused(args: list[str], expected: str, repo: Path) -> None:
    code, _, err = _convert(*args, "--repo", str(repo))
    assert code != 0
    assert expected in error_line(err), err
    assert not repo.exists() or not any(p.name.endswith(("_vllm", "_tensorrtllm")) for p in repo.iterdir())


def test_bad_input_is_one_line_and_nothing_is_written(llama: Path, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    env = str(_env(tmp_path / "env"))
    _refused([str(llama), "--vllm-env", str(tmp_path / "absent")], "make vllm-env", repo)
    _refused([str(llama), "--vllm-env", str(_env(tmp_path / "np2", numpy="2.3.5"))], "numpy 2.3.5", repo)
    _refused([str(llama), "--vllm-env", str(_env(tmp_path / "novllm", vllm=False))], "has no vLLM", repo)
    _refused(
        [str(llama), "--vllm-env", env, "--max-batch-size", "8"], "--max-batch-size does not apply", repo
    )
    _refused([str(llama), "--vllm-env", env, "--formats", "onnx"], "does not serve a language model", repo)
    _refused([str(llama), "--vllm-env", env, "--no-chunked-prefill", "--max-num-batched-tokens", "64"],
             "without chunked prefill", repo)  # fmt: skip
    bert = _folder(tmp_path / "bert", {**LLAMA, "architectures": ["BertForMaskedLM"]})
    _refused([str(bert), "--vllm-env", env], "not a causal language model", repo)
    onnx = tmp_path / "model.onnx"
    onnx.write_bytes(b"")
    _refused([str(onnx), "--max-num-seqs", "4"], "--max-num-seqs sets a language model's engine", repo)


def test_tensorrtllm_is_refused_on_the_local_target_and_an_existing_model_kept(
    llama: Path, tmp_path: Path
) -> None:
    repo = tmp_path / "repo"
    env = str(_env(tmp_path / "env"))
    both = "vllm,tensorrtllm"
    code, _, err = _convert(str(llama), "--repo", str(repo), "--vllm-env", env, "--formats", both)
    assert code == 1
    assert "tensorrtllm unavailable: TensorRT-LLM serves only in Triton's TensorRT-LLM image" in err
    assert (repo / "llama_vllm" / "config.pbtxt").exists() and not (repo / "llama_tensorrtllm").exists()
    before = (repo / "llama_vllm" / "config.pbtxt").read_text()
    code, _, err = _convert(str(llama), "--repo", str(repo), "--vllm-env", env, "--max-num-seqs", "2")
    assert code == 1 and "already exists" in error_line(err)
    assert (repo / "llama_vllm" / "config.pbtxt").read_text() == before
