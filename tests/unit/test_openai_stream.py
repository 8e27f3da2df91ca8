"""Server-sent events read from bytes: OpenAI streams (multi-token chunks, usage, ``[DONE]``) and Triton's."""

from __future__ import annotations

import io
import itertools
import json
from pathlib import Path

from tritongen.loadtests.tritonload.llm_http import Answer, SseEvents, output_tokens, read_events

from tritongen.examples.tiny_llama import write_tokenizer
from tritongen.io.loadgen_shared import token_source


def _chunk(text: str | None = None, usage: int | None = None, chat: bool = False) -> bytes:
    """One OpenAI stream event, as vLLM writes it (``data: {…}`` and a blank line)."""
    choices = (
        []
        if text is None
        else [{"index": 0, "delta": {"content": text}} if chat else {"index": 0, "text": text}]
    )
    event = {
        "id": "cmpl-1",
        "object": "chat.completion.chunk" if chat else "text_completion",
        "choices": choices,
    }
    if usage is not None:
        event["usage"] = {"prompt_tokens": 9, "completion_tokens": usage, "total_tokens": 9 + usage}
    return b"data: " + json.dumps(event).encode() + b"\n\n"


def _read(stream: bytes, api: str) -> Answer:
    answer = Answer(start=0.0)
    clock = itertools.count(1).__next__
    read_events(io.BytesIO(stream).readline, api, answer, clock=lambda: float(clock()))
    return answer


def test_a_chunk_of_several_tokens_is_one_event_and_usage_counts_the_tokens() -> None:
    stream = _chunk("the quick", chat=True) + _chunk(" brown", chat=True) + _chunk(usage=3, chat=True)
    answer = _read(stream + b"data: [DONE]\n\n", "openai-chat")
    assert answer.error is None and answer.texts == ["the quick", " brown"]
    assert answer.events == [1.0, 2.0] and answer.gaps_s == [1.0]  # one gap: between the two chunks
    assert (answer.tokens, answer.token_source) == (3, "usage")


def test_a_stream_without_done_is_a_stream_error() -> None:
    answer = _read(_chunk("a") + _chunk("b"), "openai-completions")
    assert answer.error == "stream" and answer.text_parts == 2


def test_crlf_comments_other_fields_and_multi_line_data() -> None:
    events = SseEvents()
    lines = [b": keep-alive\r\n", b"event: message\r\n", b'data: {"a":\r\n', b"data: 1}\r\n", b"\r\n"]
    assert [events.feed(line) for line in lines] == [None, None, None, None, b'{"a":\n1}']
    assert events.end() is None
    stream = b": ping\r\n\r\n" + _chunk("x").replace(b"\n", b"\r\n") + b"data: [DONE]\r\n\r\n"
    answer = _read(stream, "openai-completions")
    assert answer.error is None and answer.texts == ["x"] and answer.token_source == "events"


def test_tritons_stream_ends_with_its_body_even_without_a_blank_line() -> None:
    stream = b'data: {"text_output": "a"}\n\ndata: {"text_output": "b"}\n'
    answer = _read(stream, "triton-generate")
    assert answer.error is None and answer.texts == ["a", "b"] and answer.tokens == 2


def test_answers_without_usage_are_counted_with_the_tokenizer(tmp_path: Path) -> None:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(write_tokenizer(tmp_path) / "tokenizer.json"))
    answer = _read(_chunk("the quick brown fox") + b"data: [DONE]\n\n", "openai-completions")
    counted = len(tokenizer.encode("the quick brown fox", add_special_tokens=False).ids)
    assert output_tokens(answer, tokenizer) == (counted, "tokenizer") and counted != answer.text_parts
    assert output_tokens(answer, None) == (1, "events")
    assert token_source(4, 0, 4) == "usage" and token_source(0, 4, 4) == "tokenizer"
    assert token_source(0, 0, 4) == "events" and token_source(2, 2, 4) == "mixed"
