"""``tritongen loadtest --api triton-generate`` on the real server: the text model's known timing comes back.

The text model answers each prompt with ``max_tokens`` tokens, the first after ``FIRST_MS`` and
then one every ``GAP_MS``, so a run's time to first token, inter-token gaps and time per output
token are known (within 5% plus this path's fixed overhead), and so are its output tokens.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tritongen.cli.main import app
from tritongen.examples.tiny_llama import write_tokenizer
from tritongen.server.local import LocalTritonServer

from support.cli_output import error_line
from support.text_model import FIRST_MS, GAP_MS, TEXT_MODEL, whole_text_model

pytestmark = pytest.mark.slow
runner = CliRunner()
QUICK = ["--duration", "2s", "--warmup", "0.5s", "--window", "0.5s", "--max-duration", "2s"]
OVERHEAD_MS, TOLERANCE = 15.0, 0.05
TOKENS = 6


def _loadtest(
    server: LocalTritonServer, tmp_path: Path, *args: str, model: str = TEXT_MODEL
) -> tuple[int, dict[str, Any] | None, str]:
    out = tmp_path / "llm.json"
    result = runner.invoke(
        app,
        ["loadtest", model, "--url", server.http_url, "--metrics-url", server.metrics_url,
         "--api", "triton-generate", *QUICK, "--json", str(out), *args],
        env={"COLUMNS": "200"},
    )  # fmt: skip
    document = json.loads(out.read_text()) if out.exists() else None
    return result.exit_code, document, result.stdout + result.stderr


@pytest.mark.quiet
def test_time_to_first_token_gaps_and_tokens_per_second(
    triton_server: LocalTritonServer, tmp_path: Path
) -> None:
    tokenizer = write_tokenizer(tmp_path / "model")
    code, document, output = _loadtest(
        triton_server, tmp_path, "--tokenizer", str(tokenizer), "--input-tokens", "16:4",
        "--output-tokens", str(TOKENS), "--concurrency", "2",
        "--slo", f"ttft={FIRST_MS * 10},itl={GAP_MS * 10}",
        "--csv", str(tmp_path / "llm.csv"), "--html", str(tmp_path / "llm.html"),
        "--plot", str(tmp_path / "llm.png"),
    )  # fmt: skip
    assert code == 0, output
    assert document is not None
    (run,) = document["runs"]
    assert run["errors"] == 0 and run["requests"] > 10
    ttft, itl, tpot = run["ttft_us"], run["itl_us"], run["tpot_us"]
    assert FIRST_MS * 1000 <= ttft["p50"] <= (FIRST_MS * (1 + TOLERANCE) + OVERHEAD_MS) * 1000, ttft
    assert GAP_MS * (1 - TOLERANCE) * 1000 <= itl["p50"] <= (GAP_MS * (1 + TOLERANCE) + OVERHEAD_MS) * 1000, (
        itl
    )
    assert run["e2e_us"] == run["latency_us"]
    # Triton's own per-model statistics over the run, as for any model
    stats = run["server_models"][TEXT_MODEL]
    assert stats["requests"] > 0 and stats["queue_us"] is not None and run["server_us"]["queue"] is not None
    # Triton's generate gives no usage count: with --tokenizer, each answer's text is counted with
    # it (the model's TOKENS words make at least TOKENS tokens), and TPOT spreads the time after
    # the first event, (TOKENS - 1) gaps, over the tokens after the first.
    assert run["output_token_source"] == "tokenizer"
    per_answer = run["counts"]["output_tokens"] / run["requests"]
    assert per_answer >= TOKENS
    expected_tpot_ms = GAP_MS * (TOKENS - 1) / (per_answer - 1)
    assert expected_tpot_ms * 0.8 * 1000 <= tpot["p50"] <= (GAP_MS * (1 + TOLERANCE) + OVERHEAD_MS) * 1000
    assert run["output_tokens_per_s"] == pytest.approx(run["counts"]["output_tokens"] / run["duration_s"])
    assert run["output_tokens_per_s_per_user"] == pytest.approx(run["output_tokens_per_s"] / 2)
    assert run["goodput_per_s"] == pytest.approx(
        run["qps"], rel=0.2
    )  # generous limits: (nearly) all meet them
    assert "TTFT" in output and "output tokens/s" in output and "counted from tokenizer" in output
    (row,) = list(csv.DictReader((tmp_path / "llm.csv").open()))
    assert float(row["ttft_p50_us"]) == ttft["p50"] and row["output_token_source"] == "tokenizer"
    html = (tmp_path / "llm.html").read_text()
    assert "output tokens/s" in html
    assert html.count("data:image/png;base64") == 2  # latency against throughput, and the token plots
    assert (tmp_path / "llm.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.quiet
def test_a_decoupled_text_model_over_grpc_streams_token_by_token(
    triton_server: LocalTritonServer, tmp_path: Path
) -> None:
    """--api triton-grpc: the same text model through gRPC streams, its known timing measured as over HTTP."""
    tokenizer = write_tokenizer(tmp_path / "model")
    out = tmp_path / "grpc.json"
    result = runner.invoke(
        app,
        ["loadtest", TEXT_MODEL, "--url", triton_server.grpc_url, "--protocol", "grpc",
         "--metrics-url", triton_server.metrics_url, "--api", "triton-grpc", *QUICK, "--json", str(out),
         "--tokenizer", str(tokenizer), "--input-tokens", "16", "--output-tokens", str(TOKENS),
         "--concurrency", "2"],
        env={"COLUMNS": "200"},
    )  # fmt: skip
    assert result.exit_code == 0, result.stdout + result.stderr
    (run,) = json.loads(out.read_text())["runs"]
    assert run["errors"] == 0 and run["requests"] > 10
    ttft, itl = run["ttft_us"], run["itl_us"]
    assert FIRST_MS * 1000 <= ttft["p50"] <= (FIRST_MS * (1 + TOLERANCE) + OVERHEAD_MS) * 1000, ttft
    assert GAP_MS * (1 - TOLERANCE) * 1000 <= itl["p50"] <= (GAP_MS * (1 + TOLERANCE) + OVERHEAD_MS) * 1000, (
        itl
    )
    assert run["counts"]["output_tokens"] == TOKENS * run["requests"]  # one response per token
    assert run["output_token_source"] == "events"


@pytest.mark.quiet
def test_whole_answers_through_generate_at_a_poisson_rate(
    triton_server: LocalTritonServer, served_repository: Path, tmp_path: Path
) -> None:
    """--no-stream: Triton's generate endpoint, each answer's tokens all at its end; no gaps, no TPOT.

    Run alone (``quiet``), as the HTTP client's own check of the whole-answer model's timing.
    """
    tokenizer = write_tokenizer(tmp_path / "model")
    with whole_text_model(triton_server, served_repository) as model:
        code, document, output = _loadtest(
            triton_server, tmp_path, "--no-stream", "--tokenizer", str(tokenizer), "--input-tokens", "16",
            "--output-tokens", str(TOKENS), "--rate", "8", model=model,
        )  # fmt: skip
    assert code == 0, output
    assert document is not None
    (run,) = document["runs"]
    assert run["errors"] == 0 and run["requests"] >= 5, run
    assert run["itl_us"] is None and run["tpot_us"] is None
    assert run["output_token_source"] == "tokenizer"
    assert run["counts"]["output_tokens"] >= TOKENS * run["requests"]
    due_us = (FIRST_MS + (TOKENS - 1) * GAP_MS) * 1000
    ttft = run["ttft_us"]["p50"]
    assert due_us <= ttft <= due_us * (1 + TOLERANCE) + OVERHEAD_MS * 1000, ttft
    assert ttft <= run["e2e_us"]["p50"] + 1000  # the end is the first token (E2E from each scheduled send)


def test_limits_no_request_can_meet_leave_no_goodput(
    triton_server: LocalTritonServer, tmp_path: Path
) -> None:
    prompts = tmp_path / "prompts.jsonl"
    chat = {"messages": [{"role": "user", "content": "hi"}]}
    lines = [{"text": "the quick brown fox", "max_tokens": 3}, chat]
    prompts.write_text("".join(json.dumps(line) + "\n" for line in lines))
    code, document, output = _loadtest(
        triton_server, tmp_path, "--prompts", str(prompts), "--output-tokens", "2", "--concurrency", "1",
        "--slo", f"ttft={FIRST_MS // 4}",
    )  # fmt: skip
    assert code == 0, output
    assert document is not None
    (run,) = document["runs"]
    assert run["goodput_per_s"] == 0 and run["output_tokens_per_s"] > 0
    # The two prompts alternate: 3 tokens as the file asks, then 2 (--output-tokens) for the other.
    assert 2 * run["requests"] <= run["counts"]["output_tokens"] <= 3 * run["requests"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--input-tokens", "16"), "synthetic prompts of --input-tokens need the model's tokenizer"),
        (
            ("--api", "triton-grpc", "--prompts", "p.jsonl"),
            "--api triton-grpc goes over gRPC, not --protocol http",
        ),
        (
            ("--prompts", "p.jsonl", "--protocol", "grpc"),
            "--api triton-generate goes over HTTP, not --protocol grpc",
        ),
        (("--tokenizer", "/nowhere/model"), "--tokenizer /nowhere/model does not exist"),
        (("--prompts", "p.jsonl", "--slo", "ttft=fast"), "is not ttft=MS, itl=MS or e2e=MS"),
    ],
)
def test_bad_llm_options_are_refused_in_one_line(
    triton_server: LocalTritonServer, tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    (tmp_path / "p.jsonl").write_text('{"text": "x"}\n')
    args = tuple(str(tmp_path / a) if a == "p.jsonl" else a for a in args)
    code, document, output = _loadtest(triton_server, tmp_path, *args)
    assert code == 1 and message in error_line(output) and document is None


def test_a_tensor_model_is_not_a_text_model(triton_server: LocalTritonServer, tmp_path: Path) -> None:
    (tmp_path / "p.jsonl").write_text('{"text": "x"}\n')
    result = runner.invoke(
        app,
        ["loadtest", "mlp_onnx", "--url", triton_server.http_url, "--api", "triton-generate",
         "--prompts", str(tmp_path / "p.jsonl"), *QUICK],
    )  # fmt: skip
    assert result.exit_code == 1 and "'mlp_onnx' takes no text_input" in error_line(result.stderr)
