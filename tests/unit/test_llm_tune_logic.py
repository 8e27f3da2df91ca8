"""The tune of a local vLLM model without a server: its candidates, the winner's edit, what it refuses.

The model is written by ``tritongen convert`` from a Llama folder with a stand-in environment
(as in test_llm_convert.py); nothing here starts an engine (tests/vllm/test_llm_tune.py does).
"""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tritongen.cli.llm.tune import LlmTuneFlags, shared_prefix
from tritongen.cli.main import app
from tritongen.examples.tiny_llama import write_tokenizer
from tritongen.triton.proto import read_config
from tritongen.tune.llm.apply import plan_llm_apply
from tritongen.tune.llm.space import EngineCandidate, EngineSpace, current_settings, pick

from support.cli_output import error_line
from support.paths import ROOT

runner = CliRunner()
LLAMA = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 128, "num_hidden_layers": 2,
    "num_attention_heads": 4, "max_position_embeddings": 512, "vocab_size": 300,
}  # fmt: skip


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    folder = tmp_path / "llama"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(LLAMA))
    (folder / "model.safetensors").write_bytes(b"\0" * 64)
    write_tokenizer(folder)
    env = tmp_path / "env"
    (env / "bin").mkdir(parents=True)
    facts = json.dumps({"vllm": True, "numpy": "1.26.4", "python": list(sys.version_info[:2])})
    python = env / "bin" / "python3"
    python.write_text(f"#!/bin/sh\necho '{facts}'\n")
    python.chmod(python.stat().st_mode | stat.S_IXUSR)
    repo = tmp_path / "repo"
    result = runner.invoke(
        app, ["convert", str(folder), "--repo", str(repo), "--name", "tiny", "--vllm-env", str(env)]
    )
    assert result.exit_code == 0, result.stdout + result.stderr
    return repo


def test_the_search_space_leaves_out_what_vllm_refuses_and_the_baseline(repo: Path) -> None:
    base = read_config(repo / "tiny_vllm" / "config.pbtxt")
    current, max_model_len = current_settings(base.parameters)
    assert (current.max_num_seqs, current.max_num_batched_tokens, max_model_len) == (16, 2048, 512)
    space = LlmTuneFlags(max_num_batched_tokens="8,512,2048").engine_space(base.parameters, None)
    assert space.max_num_seqs == (16, 4) and space.prefix_caching == (True,)  # synthetic prompts share none
    legal, skipped = space.candidates(max_model_len, current)
    assert current not in legal
    assert EngineCandidate(16, 8, True, True) not in legal  # fewer step tokens than sequences
    assert EngineCandidate(4, 8, False, True) not in legal  # no whole prompt without chunked prefill
    assert any("below max_num_seqs 16" in s for s in skipped)
    assert any("without chunked prefill" in s for s in skipped)
    assert EngineCandidate(4, 512, False, True) in legal
    assert pick(legal, 4, seed=1) == pick(legal, 4, seed=1) and len(pick(legal, 4, seed=1)) == 4
    assert pick(legal, None, seed=1) == sorted(legal)


def test_prefix_caching_is_searched_when_the_prompts_share_a_prefix(tmp_path: Path) -> None:
    system = "You are a careful assistant who answers in one short sentence and never more. " * 2
    shared, distinct = tmp_path / "shared.jsonl", tmp_path / "distinct.jsonl"
    shared.write_text("".join(json.dumps({"text": system + q}) + "\n" for q in ("a?", "b?")))
    distinct.write_text("".join(json.dumps({"text": f"{i} " + system}) + "\n" for i in range(3)))
    assert shared_prefix(shared) and not shared_prefix(distinct) and not shared_prefix(None)
    flags = LlmTuneFlags()
    parameters = {"max_num_seqs": "8", "max_num_batched_tokens": "512", "max_model_len": "512"}
    assert flags.engine_space(parameters, shared).prefix_caching == (True, False)
    assert LlmTuneFlags(prefix_caching="off").engine_space(parameters, shared).prefix_caching == (False,)


def test_the_winner_is_written_as_an_edit_of_its_parameters(repo: Path) -> None:
    model = repo / "tiny_vllm"
    path = model / "config.pbtxt"
    path.write_text("# tuned by hand once\n" + path.read_text())
    plan = plan_llm_apply(model, EngineCandidate(4, 512, False, True))
    assert plan.changed and plan.how == "edit"
    assert plan.after.startswith("# tuned by hand once\n")
    assert plan.config.parameters["max_num_seqs"] == "4"
    assert plan.config.parameters["enable_chunked_prefill"] == "false"
    assert plan.config.parameters["EXECUTION_ENV_PATH"] == read_config(path).parameters["EXECUTION_ENV_PATH"]
    assert plan.line_counts() == (3, 3)  # seqs, tokens, chunked prefill: the rest as written


def test_what_an_llm_tune_does_not_take_is_refused_in_one_line(repo: Path) -> None:
    def refused(*args: str) -> str:
        result = runner.invoke(app, ["tune", *args], env={"COLUMNS": "200"})
        assert result.exit_code != 0
        return error_line(result.stderr)

    assert "--preferred-batch-sizes tunes batching" in refused(
        "tiny_vllm", "--repo", str(repo), "--preferred-batch-sizes", "4"
    )
    assert "--slo-p99-ms tunes batching" in refused("tiny_vllm", "--repo", str(repo), "--slo-p99-ms", "20")
    assert "one load level" in refused("tiny_vllm", "--repo", str(repo), "--concurrency", "1,4")
    assert "--trace is not taken by the tune of a local vLLM model" in refused(
        "tiny_vllm", "--repo", str(repo), "--trace", str(repo / "missing.jsonl")
    )
    assert "is not on or off" in refused("tiny_vllm", "--repo", str(repo), "--chunked-prefill", "maybe")
    classic = ROOT / "model_repository"
    assert "--max-num-seqs tunes a local vLLM model" in refused(
        "mlp_onnx", "--repo", str(classic), "--max-num-seqs", "4"
    )
    assert "--slo tunes a local vLLM model" in refused(
        "mlp_onnx", "--repo", str(classic), "--slo", "ttft=100"
    )


def test_a_space_of_the_baseline_alone_is_refused(repo: Path) -> None:
    result = runner.invoke(
        app,
        ["tune", "tiny_vllm", "--repo", str(repo), "--max-num-seqs", "16", "--max-num-batched-tokens", "2048",
         "--chunked-prefill", "on"],
    )  # fmt: skip
    assert result.exit_code != 0
    assert "no engine settings to try besides the model's own" in error_line(result.stderr)
    assert EngineSpace((16,), (2048,), (True,), (True,)).candidates(
        512, EngineCandidate(16, 2048, True, True)
    ) == ([], [])


def test_what_an_llm_comparison_does_not_take_is_refused_in_one_line(tmp_path: Path) -> None:
    folder = tmp_path / "llama"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(LLAMA))
    (folder / "model.safetensors").write_bytes(b"\0" * 64)
    write_tokenizer(folder)

    def refused(*args: str) -> str:
        result = runner.invoke(app, ["compare", *args], env={"COLUMNS": "200"})
        assert result.exit_code != 0
        return error_line(result.stderr)

    work = ["--out", str(tmp_path / "work")]
    assert "--formats does not apply to a language model" in refused(str(folder), *work, "--formats", "onnx")
    assert "one level" in refused(str(folder), *work, "--concurrency", "1,4")
    env = tmp_path / "no-env"
    missing = runner.invoke(app, ["compare", str(folder), *work], env={"TRITONGEN_VLLM_ENV": str(env)})
    assert missing.exit_code != 0 and "make vllm-env" in error_line(missing.stderr)
    assert not (tmp_path / "work").exists()  # refused before anything is written
    onnx = ROOT / "model_repository" / "mlp_onnx" / "1" / "model.onnx"
    assert "--slo sets a language model's load" in refused(str(onnx), "--slo", "ttft=100")
