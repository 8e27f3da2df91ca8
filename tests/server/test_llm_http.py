"""The load generator's LLM HTTP client against the real server: Triton's generate endpoints.

The text model answers with a known timing (first token after ``FIRST_MS``, then one every
``GAP_MS``), so the client's first-token time and gaps are checked against the truth: never
earlier than the model sent them, and within 5% plus a fixed overhead of this path
(HTTP, the server, the Python backend's stub: ``OVERHEAD_MS``).
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import pytest
from tritongen.loadtests import __file__ as loadtests_file

from tritongen.server.local import LocalTritonServer

from support.text_model import FIRST_MS, GAP_MS, TEXT_MODEL, whole_text_model

sys.path.insert(0, str(__import__("pathlib").Path(loadtests_file).parent))
from tritonload.llm_http import LlmHttpClient, event_text, request_path, usage_tokens

pytestmark = pytest.mark.slow
OVERHEAD_MS = 15.0
TOLERANCE = 0.05


def _client(server: LocalTritonServer, model: str = TEXT_MODEL) -> LlmHttpClient:
    host, port = server.http_url.rsplit(":", 1)
    return LlmHttpClient(host, int(port), "triton-generate", model, timeout_s=10)


@pytest.mark.quiet
def test_a_streamed_answer_is_timed_token_by_token(triton_server: LocalTritonServer) -> None:
    client = _client(triton_server)
    answers = [
        client.send({"text_input": "the quick brown fox", "max_tokens": 6}, stream=True) for _ in range(5)
    ]
    client.close()
    assert [a.error for a in answers] == [None] * 5
    assert {a.tokens for a in answers} == {6} and {a.token_source for a in answers} == {"events"}
    first_ms = statistics.median((a.first_token_s or 0) * 1000 for a in answers)
    gap_ms = statistics.median(g * 1000 for a in answers for g in a.gaps_s)
    assert FIRST_MS <= first_ms <= FIRST_MS * (1 + TOLERANCE) + OVERHEAD_MS, first_ms
    assert GAP_MS * (1 - TOLERANCE) <= gap_ms <= GAP_MS * (1 + TOLERANCE) + OVERHEAD_MS, gap_ms
    assert all(len(a.gaps_s) == 5 for a in answers)  # every gap between the 6 tokens


@pytest.mark.quiet
def test_a_whole_answer_from_generate_is_one_event_at_its_end(
    triton_server: LocalTritonServer, served_repository: Path
) -> None:
    """``generate`` (no stream): the model's one response comes when its last token is due.

    Run alone (``quiet``): the model's sleeping thread, woken late on a saturated machine,
    was 2× late once beside the other workers' tests.
    """
    with whole_text_model(triton_server, served_repository) as model:
        client = _client(triton_server, model=model)
        request = {"text_input": "one two three", "max_tokens": 6}
        client.send(request, stream=False)  # the new model's first request, not timed
        answers = [client.send(request, stream=False) for _ in range(5)]
        client.close()
    assert [a.error for a in answers] == [None] * 5
    assert all(a.text_parts == 1 and not a.gaps_s and a.token_source == "events" for a in answers)
    assert "".join(answers[0].texts).split() == ["one", "two", "three"] * 2
    due_ms = FIRST_MS + 5 * GAP_MS
    first_ms = statistics.median((a.first_token_s or 0) * 1000 for a in answers)
    assert due_ms <= first_ms <= due_ms * (1 + TOLERANCE) + OVERHEAD_MS, first_ms


def test_an_unknown_model_is_an_http_error(triton_server: LocalTritonServer) -> None:
    client = _client(triton_server, model="no_such_model")
    answer = client.send({"text_input": "x"}, stream=True)
    assert answer.error is not None and answer.error.startswith("http_4")
    again = client.send({"text_input": "x"}, stream=True)  # the connection is reopened
    assert again.error == answer.error


def test_an_answer_without_text_is_empty(triton_server: LocalTritonServer) -> None:
    answer = _client(triton_server).send({"text_input": "x", "max_tokens": 0}, stream=True)
    assert answer.error == "empty" and answer.tokens == 0


def test_what_each_api_sends_and_reads() -> None:
    assert request_path("triton-generate", "m", stream=True) == "/v2/models/m/generate_stream"
    assert request_path("openai-chat", "m", stream=True) == "/v1/chat/completions"
    assert event_text("openai-chat", {"choices": [{"delta": {"content": "hi"}}]}) == "hi"
    assert event_text("openai-chat", {"choices": [{"message": {"content": "whole"}}]}) == "whole"
    assert event_text("openai-completions", {"choices": [{"text": "yo"}]}) == "yo"
    assert event_text("openai-chat", {"choices": [], "usage": {"completion_tokens": 7}}) == ""
    assert usage_tokens({"usage": {"completion_tokens": 7}}) == 7 and usage_tokens({}) is None
