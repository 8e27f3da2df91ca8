"""``tritongen compare MODEL_DIR``: vLLM's own OpenAI server beside vLLM inside Triton, on this machine.

The tiny Llama (tests/vllm/conftest.py): both servers started by the command (each timed to
its model served), the same prompts in two interleaved rounds; every answer holds the tokens
asked, counted from each server's usage.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tritongen.cli.main import app

from support.vllm_server import VLLM_TRITON_ENV

pytestmark = [pytest.mark.vllm, pytest.mark.slow, pytest.mark.timeout(1800)]
runner = CliRunner()


def test_compare_puts_vllm_s_server_beside_vllm_inside_triton(tiny_llama: Path, tmp_path: Path) -> None:
    out = tmp_path / "compare.json"
    result = runner.invoke(
        app,
        ["compare", str(tiny_llama), "--name", "tiny", "--out", str(tmp_path / "work"), "--concurrency", "2",
         "--duration", "3s", "--warmup", "1s", "--rounds", "2", "--input-tokens", "24:4", "--output-tokens",
         "12", "--slo", "ttft=60000,itl=60000", "--json", str(out)],
        env={"COLUMNS": "200", "TRITONGEN_VLLM_ENV": str(VLLM_TRITON_ENV)},
    )  # fmt: skip
    assert result.exit_code == 0, result.stdout + result.stderr
    document = json.loads(out.read_text())
    assert document["schema"] == "tritongen.compare-llm/1" and document["rounds"] == 2
    contenders = document["contenders"]
    for key in ("vllm-openai", "triton-vllm"):
        entry = contenders[key]
        assert entry["rounds"] == 2 and entry["errors"] == 0, entry
        assert entry["cold_start_s"] > 0 and entry["memory_peak_bytes"] > 500 * 2**20
        assert entry["token_source"] == ["usage"]  # counted by each server: OpenAI's usage, completion_tokens
        assert all(g and g > 0 for g in entry["per_round"]["goodput_per_s"])
    assert contenders["triton-tensorrtllm"]["unavailable"].startswith("on a GPU host only")
    goodput = document["triton_over_vllm"]["goodput_per_s"]
    assert goodput["rounds"] == 2 and goodput["ci_low"] <= goodput["estimate"] <= goodput["ci_high"]
    ranks = {row["contender"]: row["rank"] for row in document["ranking"]}
    assert ranks["triton-tensorrtllm"] is None and {ranks["vllm-openai"], ranks["triton-vllm"]} <= {1, 2}
    assert document["engine_settings"]["max_model_len"] == 512
    assert "vLLM inside Triton" in result.stdout and "decided on goodput" in result.stdout
