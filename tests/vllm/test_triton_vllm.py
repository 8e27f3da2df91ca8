"""The local vLLM model on the embedded Triton: ``tritongen convert`` of the tiny Llama, ``tritongen serve``.

One server for the module (its engine starts in 1–5 minutes here). The tiny Llama answers with
exactly the tokens asked under ``ignore_eos``, so every count is known: one response per token,
the usage with the last. Streaming is shown by cause, not by timing (a busy machine delays
deliveries): a client that reads three tokens of a 400-token answer and leaves has had them
while the engine was still generating, and the engine stops well short of 400.
"""

from __future__ import annotations

import json
import queue
import shutil
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from tritongen.cli.main import app
from tritongen.metrics.vllm import parse_vllm_metrics

from support.triton_llm import ServedLlm, served_llm
from support.vllm_server import VLLM_TRITON_ENV
from support.wire import check_streams_on_the_wire, wire_args

pytestmark = [pytest.mark.vllm, pytest.mark.slow, pytest.mark.timeout(1800)]
runner = CliRunner()
MODEL = "tiny_vllm"
QUICK = ["--duration", "3s", "--warmup", "0.5s", "--window", "0.5s", "--max-duration", "3s"]
OUTPUT_TOKENS = 12


@pytest.fixture(scope="module")
def served(tiny_llama: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedLlm]:
    """The tiny Llama converted to the local vLLM model and served by ``tritongen serve``."""
    repo = tmp_path_factory.mktemp("llm") / "repo"
    result = runner.invoke(
        app,
        [
            "convert",
            str(tiny_llama),
            "--repo",
            str(repo),
            "--name",
            "tiny",
            "--vllm-env",
            str(VLLM_TRITON_ENV),
        ],
    )
    assert result.exit_code == 0, result.stdout + result.stderr
    with served_llm(repo, MODEL, tmp_path_factory.mktemp("serve")) as server:
        print(f"the local vLLM model was ready {server.ready_s:.0f} s after tritongen serve started")
        yield server


def _figures(server: ServedLlm) -> dict[str, float]:
    """The engine's figures on Triton's metrics endpoint, and its generated tokens."""
    _, text = server.get("/metrics", port=server.metrics_port)
    figures = parse_vllm_metrics(text)
    generated = [line for line in text.splitlines() if line.startswith("vllm:generation_tokens_total{")]
    figures["generated"] = float(generated[0].rsplit(" ", 1)[1]) if generated else -1.0
    return figures


def _stream(server: ServedLlm, requests: list[dict[str, Any]], leave_after: int | None = None) -> list[Any]:
    """Send ``requests`` over one gRPC stream; each one's responses (until its final, or ``leave_after``)."""
    import tritonclient.grpc as grpcclient

    answers: queue.Queue[Any] = queue.Queue()
    client = grpcclient.InferenceServerClient(f"127.0.0.1:{server.grpc_port}")
    client.start_stream(callback=lambda result, error: answers.put((result, error)))
    received: list[Any] = []
    for index, request in enumerate(requests):
        inputs = []
        for name, value in request.items():
            inputs.append(_tensor(grpcclient, name, value))
        client.async_stream_infer(MODEL, inputs, request_id=str(index), enable_empty_final_response=True)
        responses = []
        while leave_after is None or len(responses) < leave_after:
            result, error = answers.get(timeout=300)
            assert error is None, error
            responses.append(result)
            if result.get_response().parameters["triton_final_response"].bool_param:
                break
        received.append(responses)
    client.stop_stream(cancel_requests=leave_after is not None)
    return received


def _tensor(grpcclient: Any, name: str, value: str | bool | int) -> Any:
    """A one-element input: BYTES for a string, BOOL for a flag, INT32 for a number."""
    if isinstance(value, str):
        array = np.array([value.encode()], dtype=np.object_)
        kind = "BYTES"
    elif isinstance(value, bool):
        array, kind = np.array([value]), "BOOL"
    else:
        array, kind = np.array([value], dtype=np.int32), "INT32"
    tensor = grpcclient.InferInput(name, [1], kind)
    tensor.set_data_from_numpy(array)
    return tensor


def test_tokens_stream_one_by_one_and_a_client_that_leaves_is_cancelled(served: ServedLlm) -> None:
    (whole,) = _stream(served, [{"text_input": "the quick brown fox", "max_tokens": 24, "ignore_eos": True}])
    texts = [r for r in whole if r.as_numpy("text_output") is not None]
    assert len(texts) == 24  # one response per token, the last one flagged final
    last = whole[-1]
    assert int(last.as_numpy("completion_tokens")[0]) == 24 and int(last.as_numpy("prompt_tokens")[0]) > 1
    assert last.as_numpy("finish_reason")[0] == b"length"
    assert all(r.as_numpy("completion_tokens") is None for r in texts[:-1])
    before = _figures(served)["generated"]
    long_answer = {"text_input": "every river runs", "max_tokens": 400, "ignore_eos": True}
    _stream(served, [long_answer], leave_after=3)
    time.sleep(3)  # the watcher notices within 0.1 s; the metrics are flushed every 0.25 s
    after = _figures(served)
    assert 3 <= after["generated"] - before < 400, (before, after)  # stopped well before its end
    assert after["vllm_requests_running"] == 0


def test_generate_takes_the_sampling_settings(served: ServedLlm) -> None:
    path = f"/v2/models/{MODEL}/generate"
    five = {"text_input": "a tokenizer", "max_tokens": 5, "ignore_eos": True, "stream": False}
    status, whole = served.post(path, five)
    assert status == 200 and whole["completion_tokens"] == 5 and whole["finish_reason"] == "length", whole
    greedy = {"text_input": "people build bridges", "max_tokens": 40, "temperature": 0.0, "stream": False}
    first, again = served.post(path, greedy)[1], served.post(path, greedy)[1]
    assert first["text_output"] == again["text_output"]  # temperature 0 is greedy
    text = str(first["text_output"])
    stop = next((text[i : i + 2] for i in range(3, len(text) - 2) if text[i : i + 2].isalpha()), None)
    if stop is not None:  # a stop string from the greedy answer ends the same answer before it
        _, stopped = served.post(path, {**greedy, "stop": [stop]})
        assert stopped["finish_reason"] == "stop" and text.startswith(str(stopped["text_output"]))
        assert stop not in str(stopped["text_output"])
    settings = json.dumps({"max_tokens": 3, "ignore_eos": True})
    _, chosen = served.post(path, {"text_input": "x", "sampling_parameters": settings, "stream": False})
    assert chosen["completion_tokens"] == 3
    status, refused = served.post(path, {"text_input": "x", "bogus": 1, "stream": False})
    assert status == 400 and "unknown setting 'bogus'" in str(refused["error"])


def test_the_engine_figures_are_triton_metrics(served: ServedLlm) -> None:
    four = {"text_input": "the lazy dog", "max_tokens": 4, "stream": False}
    served.post(f"/v2/models/{MODEL}/generate", four)
    time.sleep(0.5)
    figures = _figures(served)
    assert figures["generated"] >= 4
    assert 0 <= figures["vllm_kv_cache_usage"] <= 1 and figures["vllm_requests_waiting"] >= 0
    assert figures["vllm_prefix_cache_queries"] > 0


def _loadtest(tmp_path: Path, tiny_llama: Path, *args: str) -> tuple[int, dict[str, Any], str]:
    out = tmp_path / "run.json"
    result = runner.invoke(
        app,
        ["loadtest", MODEL, "--tokenizer", str(tiny_llama), "--input-tokens", "24:4", "--output-tokens",
         str(OUTPUT_TOKENS), "--concurrency", "2", *QUICK, "--json", str(out), *args],
        env={"COLUMNS": "200"},
    )  # fmt: skip
    document = json.loads(out.read_text()) if out.exists() else {}
    return result.exit_code, document, result.stdout + result.stderr


@pytest.mark.parametrize("api", ["triton-generate", "triton-grpc"])
def test_loadtest_measures_it_token_by_token(
    served: ServedLlm, tmp_path: Path, tiny_llama: Path, api: str
) -> None:
    grpc = ["--protocol", "grpc", "--url", f"127.0.0.1:{served.grpc_port}"]
    where = ["--url", served.http] if api == "triton-generate" else grpc
    where += [
        "--metrics-url",
        f"http://127.0.0.1:{served.metrics_port}/metrics",
    ]  # not beside the default 8000
    checked = wire_args()  # a real causal LM inside Triton: its streams against the wire
    code, document, output = _loadtest(
        tmp_path, tiny_llama, "--api", api, "--slo", "ttft=60000,itl=60000", *where, *checked
    )
    assert code == 0, output
    (run,) = document["runs"]
    assert run["errors"] == 0 and run["requests"] >= 2, run
    assert run["counts"]["output_tokens"] == OUTPUT_TOKENS * run["requests"]  # every answer as long as asked
    assert run["output_token_source"] == ("usage" if api == "triton-generate" else "events")
    ttft, itl, e2e = run["ttft_us"], run["itl_us"], run["e2e_us"]
    assert 0 < ttft["p50"] <= e2e["p50"] and itl["max"] > 0 and run["output_tokens_per_s"] > 0
    assert run["goodput_per_s"] == pytest.approx(run["qps"])
    server = run["llm_server"]  # the engine's figures, read from Triton's metrics endpoint
    assert server is not None and server["samples"] >= 1 and server["prefix_cache_queries"] > 0, run
    assert "vLLM: running" in output
    if checked:  # a real causal LM inside Triton: its first tokens and gaps are those on the wire
        check_streams_on_the_wire(run, grpc=api == "triton-grpc")


def test_a_model_whose_engine_does_not_start_says_the_engine_s_last_error(served: ServedLlm) -> None:
    broken = served.repo / "tiny_broken"
    shutil.copytree(served.repo / f"{MODEL}", broken)
    config = (broken / "config.pbtxt").read_text().replace(f'name: "{MODEL}"', 'name: "tiny_broken"')
    huge = str(2**50)  # a KV cache of a PiB: the worker refuses it once the weights are loaded
    config = config.replace('string_value: "1073741824"', f'string_value: "{huge}"')
    (broken / "config.pbtxt").write_text(config)
    status, answer = served.post("/v2/repository/models/tiny_broken/load", {}, timeout_s=900)
    assert status == 400, answer
    message = str(answer["error"])
    assert "vLLM's engine did not start: " in message and "Error: " in message, message
    reason = message.split("vLLM's engine did not start: ", 1)[1]
    assert "\n" not in reason.split("\n\nAt:")[0] and "Traceback" not in reason  # one line: the engine's own
    request = urllib.request.Request(f"http://{served.http}/v2/repository/index", data=b"{}", method="POST")
    with urllib.request.urlopen(request, timeout=10) as response:
        states = {m["name"]: m.get("state") for m in json.loads(response.read())}
    assert states.get(MODEL) == "READY"  # the other model is untouched


def test_tune_restarts_the_engine_per_trial_and_confirms_the_best_against_the_baseline(
    served: ServedLlm, tmp_path: Path
) -> None:
    out = tmp_path / "tune.json"
    before = (served.repo / MODEL / "config.pbtxt").read_text()
    result = runner.invoke(
        app,
        ["tune", MODEL, "--repo", str(served.repo), "--url", served.http, "--slo", "ttft=2000,itl=1000",
         "--max-num-seqs", "4,16", "--max-num-batched-tokens", "2048", "--chunked-prefill", "on",
         "--concurrency", "2", "--output-tokens", "12", "--input-tokens", "24", "--duration", "3s",
         "--warmup", "1s", "--rounds", "2", "--json", str(out), "--apply", "--diff"],
        env={"COLUMNS": "200"},
    )  # fmt: skip
    assert result.exit_code == 0, result.stdout + result.stderr
    document = json.loads(out.read_text())
    assert document["schema"] == "tritongen.tune-llm/1" and document["slo"] == "ttft=2000,itl=1000"
    assert document["baseline"]["key"] == "s16-t2048-cp1-pc1"
    (trial,) = document["trials"]  # the one setting besides the baseline's
    assert trial["key"] == "s4-t2048-cp1-pc1" and trial["reload_s"] > 0
    assert trial["measurement"]["failed"] is None and trial["measurement"]["goodput_per_s"] > 0
    confirmation = document["confirmation"]
    assert confirmation["finalist"] == trial["key"] and confirmation["rounds"] == 2
    assert len(confirmation["baseline_goodput_per_s"]) == len(confirmation["finalist_goodput_per_s"]) == 2
    assert document["costs"]["reloads_s"] >= trial["reload_s"] and document["costs"]["server_start_s"] is None
    if document["winner_is_baseline"]:
        assert "nothing applied" in result.stdout
    else:
        assert '-  value: { string_value: "16" }' in result.stdout  # the diff of max_num_seqs
    assert (served.repo / MODEL / "config.pbtxt").read_text() == before  # --diff writes nothing
    assert not (served.repo / f"{MODEL}_tune").exists()  # the sibling is gone
    assert "restart s" in result.stdout and "cost: engine restarts" in result.stdout
