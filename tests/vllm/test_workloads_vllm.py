"""Workloads against the real vLLM server: a Mooncake trace's shared prefixes, and multi-turn chat sessions.

vLLM's prefix cache counts the prompt tokens it looked up and those it found (``llm_server``): a
trace whose requests share their hash blocks must find far more of its prompts in the cache than
the same trace with every block its own, and a chat's later turns resend a history it has seen.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tritongen.cli.main import app

from support.vllm_server import KEY_ENV, SERVED_MODEL, VllmServer

pytestmark = [pytest.mark.vllm, pytest.mark.slow, pytest.mark.timeout(900)]
runner = CliRunner()


def _loadtest(server: VllmServer, tmp_path: Path, *args: str) -> tuple[int, dict[str, Any] | None, str]:
    out = tmp_path / "run.json"
    result = runner.invoke(
        app,
        ["loadtest", SERVED_MODEL, "--url", server.url, "--api", "openai-chat", "--api-key-env", KEY_ENV,
         "--warmup", "0s", "--json", str(out), *args],
        env={"COLUMNS": "200", KEY_ENV: server.api_key},
    )  # fmt: skip
    document = json.loads(out.read_text()) if out.exists() else None
    return result.exit_code, document, result.stdout + result.stderr


def _mooncake(path: Path, shared: bool) -> Path:
    """24 requests, 4 a second, 160 prompt tokens each: on two blocks (shared) or each on its own."""
    lines = [
        {
            "timestamp": 250 * n,
            "input_length": 160,
            "output_length": 6,
            "hash_ids": [n % 2] if shared else [100 + n],
        }
        for n in range(24)
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_a_mooncake_trace_shares_its_blocks_prefixes(
    vllm: VllmServer, tiny_llama: Path, tmp_path: Path
) -> None:
    hits = {}
    for shared in (True, False):
        folder = tmp_path / ("shared" if shared else "own")
        folder.mkdir()
        trace = _mooncake(folder / "trace.jsonl", shared)
        code, document, output = _loadtest(
            vllm, folder, "--tokenizer", str(tiny_llama), "--trace", str(trace)
        )
        assert code == 0, output
        assert document is not None
        (run,) = document["runs"]
        assert run["errors"] == 0 and run["requests"] == 24, run
        assert run["counts"]["output_tokens"] == 6 * 24  # each request its own output length
        assert run["schedule"]["shape"].startswith("trace trace.jsonl (mooncake): 24 requests")
        server = run["llm_server"]
        assert server is not None and server["prefix_cache_queries"] > 0, run
        hits[shared] = server["prefix_cache_hits"] / server["prefix_cache_queries"]
    assert hits[True] > 0.5 and hits[True] > hits[False] + 0.3, hits


def test_chat_sessions_resend_their_history(vllm: VllmServer, tiny_llama: Path, tmp_path: Path) -> None:
    code, document, output = _loadtest(
        vllm, tmp_path, "--tokenizer", str(tiny_llama), "--input-tokens", "140", "--output-tokens", "8",
        "--sessions", "2", "--turns", "2", "--think-time", "50", "--duration", "4s", "--max-duration", "4s",
    )  # fmt: skip
    # vLLM on the CPU caches whole blocks of 128 tokens: a first turn of 140 leaves one for the second.
    assert code == 0, output
    assert document is not None
    (run,) = document["runs"]
    assert run["errors"] == 0 and run["concurrency"] == 2, run
    assert run["counts"]["output_tokens"] == 8 * run["requests"]
    first, later = run["latencies_us"]["ttft_first_turn"], run["latencies_us"]["ttft_later_turns"]
    assert first["p50"] > 0 and later["p50"] > 0
    assert run["llm_server"]["prefix_cache_hits"] > 0  # a later turn's history was found in the cache
    assert "sessions: first turns' TTFT" in output


def test_a_session_longer_than_the_context_is_refused(
    vllm: VllmServer, tiny_llama: Path, tmp_path: Path
) -> None:
    code, document, output = _loadtest(
        vllm, tmp_path, "--tokenizer", str(tiny_llama), "--input-tokens", "100", "--output-tokens", "60",
        "--sessions", "1", "--turns", "8", "--duration", "2s",
    )  # fmt: skip
    assert code == 2 and document is None
    assert "a session of up to 8 turns sends up to" in output and "max_model_len 512" in output
