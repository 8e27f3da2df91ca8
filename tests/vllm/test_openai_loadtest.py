"""``tritongen loadtest --api openai-chat|openai-completions`` against the real vLLM server.

The tiny Llama answers with exactly the tokens asked (``min_tokens`` and ``ignore_eos``), so
each run's output tokens are known; vLLM counts them in its usage report, which the runs
must take. The server asks for an API key, which must never show in any output or file.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tritongen.cli.main import app
from tritongen.metrics.vllm import parse_vllm_metrics

from support.cli_output import error_line
from support.cutting_proxy import cutting_proxy, relay
from support.vllm_server import KEY_ENV, SERVED_MODEL, VllmServer
from support.wire import check_streams_on_the_wire, wire_args

pytestmark = [pytest.mark.vllm, pytest.mark.slow, pytest.mark.timeout(900)]
runner = CliRunner()
QUICK = ["--duration", "3s", "--warmup", "0.5s", "--window", "0.5s", "--max-duration", "3s"]
OUTPUT_TOKENS = 12


def _loadtest(
    server: VllmServer, tmp_path: Path, api: str, *args: str, url: str | None = None, key: bool = True
) -> tuple[int, dict[str, Any] | None, str]:
    """Run the CLI; its exit code, JSON document and everything it printed."""
    out = tmp_path / "run.json"
    result = runner.invoke(
        app,
        ["loadtest", SERVED_MODEL, "--url", url or server.url, "--api", api, *QUICK, "--json", str(out),
         *(["--api-key-env", KEY_ENV] if key else []), *args],
        env={"COLUMNS": "200", KEY_ENV: server.api_key},
    )  # fmt: skip
    document = json.loads(out.read_text()) if out.exists() else None
    return result.exit_code, document, result.stdout + result.stderr


def _key_nowhere(server: VllmServer, output: str, folder: Path) -> None:
    assert server.api_key not in output
    for path in folder.rglob("*"):
        if path.is_file():
            assert server.api_key not in path.read_text(errors="replace"), path


def test_chat_streamed_counts_the_servers_tokens_and_samples_its_figures(
    vllm: VllmServer, tiny_llama: Path, tmp_path: Path
) -> None:
    code, document, output = _loadtest(
        vllm, tmp_path, "openai-chat", "--tokenizer", str(tiny_llama), "--input-tokens", "24:4",
        "--output-tokens", str(OUTPUT_TOKENS), "--concurrency", "2", "--slo", "ttft=60000,itl=60000",
        "--csv", str(tmp_path / "run.csv"), "--html", str(tmp_path / "run.html"), *wire_args(),
    )  # fmt: skip
    assert code == 0, output
    assert document is not None
    (run,) = document["runs"]
    check_streams_on_the_wire(run)  # the real server's streams: first tokens and gaps as on the wire
    assert run["errors"] == 0 and run["requests"] >= 2, run
    assert run["output_token_source"] == "usage"
    assert run["counts"]["output_tokens"] == OUTPUT_TOKENS * run["requests"]
    assert run["counts"]["input_tokens"] > 0
    ttft, itl, tpot, e2e = run["ttft_us"], run["itl_us"], run["tpot_us"], run["e2e_us"]
    assert 0 < ttft["p50"] <= e2e["p50"] and itl["p50"] > 0 and tpot["p50"] > 0
    assert itl["p50"] <= e2e["p50"] and e2e == run["latency_us"]
    assert run["goodput_per_s"] == pytest.approx(run["qps"])  # limits no request misses
    server = run["llm_server"]
    assert server is not None and server["samples"] >= 1, run
    # the gauges are read once a second; requests of the tiny model last tens of milliseconds, so
    # a read may find none running: their figures must be there, within their range
    assert server["requests_running_max"] >= 0 and 0 <= server["kv_cache_usage_max"] <= 1
    assert server["prefix_cache_queries"] > 0  # the prompts' tokens were looked up in the prefix cache
    assert "vLLM: running" in output and "tokens counted from usage" in output
    assert "output_token_source" in (tmp_path / "run.csv").read_text()
    _key_nowhere(vllm, output, tmp_path)


def test_completions_whole_answers_at_a_poisson_rate_in_rounds(
    vllm: VllmServer, tiny_llama: Path, tmp_path: Path
) -> None:
    code, document, output = _loadtest(
        vllm, tmp_path, "openai-completions", "--no-stream", "--tokenizer", str(tiny_llama),
        "--input-tokens", "16", "--output-tokens", "6", "--rate", "3", "--rounds", "2",
    )  # fmt: skip
    assert code == 0, output
    assert document is not None
    assert [r["target_rate"] for r in document["runs"]] == [3, 3]
    for run in document["runs"]:
        assert run["errors"] == 0 and run["requests"] >= 1, run
        assert run["output_token_source"] == "usage"
        assert run["counts"]["output_tokens"] == 6 * run["requests"]
        assert run["itl_us"] is None and run["tpot_us"] is None  # one event: no gap, no time per token
        # Whole answers: the first token is the end. E2E counts from each scheduled send (the
        # open loop), TTFT from the send itself, so E2E may be longer by the sends' lag.
        ttft, e2e = run["ttft_us"]["p50"], run["e2e_us"]["p50"]
        assert 0.8 * e2e <= ttft <= e2e + 1000, (ttft, e2e)
    _key_nowhere(vllm, output, tmp_path)


def test_completions_streamed_from_a_prompts_file_at_two_levels(vllm: VllmServer, tmp_path: Path) -> None:
    prompts = tmp_path / "prompts.jsonl"
    lines = [
        {"text": "the quick brown fox", "max_tokens": 7},
        {"prompt": "every river runs", "max_tokens": 7},
        {"messages": [{"role": "user", "content": "a tokenizer splits text"}], "max_tokens": 7},
    ]
    prompts.write_text("".join(json.dumps(line) + "\n" for line in lines))
    code, document, output = _loadtest(
        vllm, tmp_path, "openai-completions", "--prompts", str(prompts), "--concurrency", "1,2"
    )
    assert code == 0, output
    assert document is not None
    assert [r["concurrency"] for r in document["runs"]] == [1, 2]
    for run in document["runs"]:
        assert run["errors"] == 0, run["errors_by_kind"]
        assert run["counts"]["output_tokens"] == 7 * run["requests"]
        assert run["output_token_source"] == "usage" and run["itl_us"]["p50"] > 0


def test_what_cannot_be_measured_is_refused_before_any_load(
    vllm: VllmServer, tiny_llama: Path, tmp_path: Path
) -> None:
    def refused(*args: str, model: str = SERVED_MODEL, key: bool = True) -> str:
        result = runner.invoke(
            app,
            ["loadtest", model, "--url", vllm.url, "--concurrency", "1", *QUICK,
             *(["--api-key-env", KEY_ENV] if key else []), *args],
            env={"COLUMNS": "200", KEY_ENV: vllm.api_key},
        )  # fmt: skip
        assert result.exit_code != 0, result.stdout
        assert vllm.api_key not in result.stdout + result.stderr
        return error_line(result.stderr)

    base = ["--api", "openai-chat", "--tokenizer", str(tiny_llama), "--input-tokens", "24"]
    assert "does not serve 'other' (it serves: tiny-llama)" in refused(*base, model="other")
    assert "refused the request (HTTP 401)" in refused(*base, key=False)
    assert "--tokenizer" in refused("--api", "openai-chat", "--tokenizer", str(tmp_path / "none"))
    # 24 prompt tokens and 484 output fit 512; the chat template's tokens do not
    line = refused(*base, "--output-tokens", "484")
    assert "exceed 'tiny-llama''s max_model_len 512" in line
    longest = int(line.split("requests of up to ")[1].split()[0])
    assert longest > 24 + 484


def test_a_cut_stream_is_a_stream_error_of_each_request(vllm: VllmServer, tmp_path: Path) -> None:
    request = urllib.request.Request(
        f"{vllm.url}/v1/models", headers={"Authorization": f"Bearer {vllm.api_key}"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        listed = len(response.read())
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(json.dumps({"text": "the quick brown fox", "max_tokens": 200}) + "\n")
    with cutting_proxy(vllm.port, limit=2 * listed + 1500) as port:
        code, document, output = _loadtest(
            vllm, tmp_path, "openai-completions", "--prompts", str(prompts), "--concurrency", "1",
            url=f"http://127.0.0.1:{port}",
        )  # fmt: skip
    assert code != 0 and document is not None, output
    (run,) = document["runs"]
    assert run["requests"] >= 1 and run["errors"] == run["requests"], (run, output)
    assert run["errors_by_kind"] == {"stream": run["requests"]}, output


def test_a_server_that_goes_away_mid_run_ends_it_aborted_with_what_was_measured(
    vllm: VllmServer, tmp_path: Path
) -> None:
    """The server's port closes 5 s into a 60 s run: the run stops within seconds, in one line."""
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(json.dumps({"text": "the quick brown fox", "max_tokens": 8}) + "\n")
    with relay(vllm.port) as server:
        threading.Timer(5.0, server.kill).start()
        started = time.monotonic()
        code, document, output = _loadtest(
            vllm, tmp_path, "openai-completions", "--prompts", str(prompts), "--concurrency", "1",
            "--duration", "60s", "--max-duration", "60s", url=f"http://127.0.0.1:{server.port}",
        )  # fmt: skip
        took = time.monotonic() - started
    assert code != 0 and document is not None, output
    assert took < 30, took  # the health checks end it, not the run's 60 s
    assert document["status"] == "aborted"
    (run,) = document["runs"]
    assert run["status"] == "aborted" and run["requests"] > run["errors"] > 0, run
    assert f"the server at 127.0.0.1:{server.port} stopped answering" in output


def test_the_servers_metrics_hold_every_figure_sampled(vllm: VllmServer) -> None:
    with urllib.request.urlopen(f"{vllm.url}/metrics", timeout=10) as response:
        figures = parse_vllm_metrics(response.read().decode())
    expected = {"requests_running", "requests_waiting", "kv_cache_usage", "preemptions",
                "prefix_cache_queries", "prefix_cache_hits"}  # fmt: skip
    assert {f"vllm_{name}" for name in expected} <= set(figures), sorted(figures)


def test_a_chat_load_of_a_model_without_a_chat_template_is_refused(
    plain_vllm: VllmServer, tmp_path: Path
) -> None:
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(
        json.dumps({"messages": [{"role": "user", "content": "hello"}], "max_tokens": 4}) + "\n"
    )
    result = runner.invoke(
        app,
        ["loadtest", SERVED_MODEL, "--url", plain_vllm.url, "--api", "openai-chat", "--prompts", str(prompts),
         "--concurrency", "1", *QUICK, "--api-key-env", KEY_ENV],
        env={"COLUMNS": "200", KEY_ENV: plain_vllm.api_key},
    )  # fmt: skip
    assert result.exit_code != 0, result.stdout
    line = error_line(result.stderr)
    assert "has no chat template" in line and "answered HTTP 400" in line and "openai-completions" in line
