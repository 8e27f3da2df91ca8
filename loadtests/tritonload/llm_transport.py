"""An LLM load's requests: prepared payloads sent in turn over :mod:`.llm_http`, their figures recorded.

tritongen writes the requests (``--triton-llm-requests``: one JSON object per line, its
``payload`` the request body and ``input_tokens`` the prompt's tokens). Besides each request's
end-to-end time (the usual latency), an answer with output records ``ttft`` (send to first
token), ``itl`` (every gap between two output events), ``tpot`` (the time after the first
token over the tokens after it) and counts ``output_tokens``, ``input_tokens``,
``usage_counted`` (answers whose token count is the server's usage report),
``tokenizer_counted`` (answers without one whose text ``--triton-llm-tokenizer`` counted) and
``slo_met`` (answers within every limit of ``--triton-llm-slo``).
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any

from .llm_http import Answer, LlmHttpClient, load_counter, output_tokens
from .options import TritonOptions
from .recording import Recorder
from .server_api import host_port
from .transports import StepStarts

if TYPE_CHECKING:
    from .kinds import UserLoad
    from .state import ProcessState

Limits = tuple[float | None, float | None, float | None]


def read_requests(path: str) -> list[tuple[dict[str, Any], int]]:
    """The prepared requests: each one's payload and its prompt's tokens.

    Raises:
        ValueError: no file given, or one without a request.
    """
    if not path:
        raise ValueError("--triton-llm-requests is required with --triton-llm-api")
    requests = []
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                entry = json.loads(line)
                requests.append((entry["payload"], int(entry.get("input_tokens") or 0)))
    if not requests:
        raise ValueError(f"--triton-llm-requests {path} holds no request")
    return requests


def parse_limits(text: str) -> Limits:
    """``--triton-llm-slo TTFT,ITL,E2E`` in ms -> seconds each (None: no limit)."""
    if not text:
        return None, None, None
    values = [float(v) for v in text.split(",")] + [0.0, 0.0, 0.0]
    ttft, itl, e2e = (v / 1000 if v > 0 else None for v in values[:3])
    return ttft, itl, e2e


def meets(answer: Answer, limits: Limits) -> bool:
    """Whether a finished answer met every limit (its longest gap against the ITL limit)."""
    ttft, itl, e2e = limits
    first, gaps = answer.first_token_s, answer.gaps_s
    return (
        (ttft is None or (first is not None and first <= ttft))
        and (itl is None or not gaps or max(gaps) <= itl)
        and (e2e is None or answer.end - answer.start <= e2e)
    )


class LlmTransport:
    """Prepared LLM requests, sent in turn by each user; a connection is an :class:`LlmHttpClient`."""

    rows = 1

    def __init__(
        self, host: str, options: TritonOptions, starts: StepStarts, recorder: Recorder | None
    ) -> None:
        self.host, self.port = host_port(host, 8000)
        self.options = options
        self.requests = read_requests(options.llm_requests)
        self.step = starts.first(len(self.requests))
        self.recorder = recorder
        self.key = os.environ.get(options.llm_key_env) if options.llm_key_env else None
        self.stream = bool(options.llm_stream)
        self.limits = parse_limits(options.llm_slo)
        self.tokenizer = load_counter(options.llm_tokenizer)

    def new_connection(self) -> LlmHttpClient:
        """A client of this user's own (one kept-alive connection)."""
        api, model, timeout = self.options.llm_api, self.options.model, self.options.timeout
        return LlmHttpClient(self.host, self.port, api, model, timeout, key=self.key)

    def send(self, client: LlmHttpClient) -> str | None:
        """Send the next request and record its answer's figures; its error kind or None."""
        payload, input_tokens = self.requests[self.step]
        self.step = self.step + 1 if self.step + 1 < len(self.requests) else 0
        answer = client.send(payload, self.stream)
        if answer.error is None and self.recorder is not None:
            record_answer(self.recorder, answer, input_tokens, self.limits, self.tokenizer)
        return answer.error


def record_answer(
    recorder: Recorder, answer: Answer, input_tokens: int, limits: Limits, tokenizer: Any = None
) -> None:
    """A finished answer's figures: its latencies in the window of its end, its counts in its request's.

    The user records the request a moment after the answer's end, possibly in the next window:
    counted there too (deferred), a run's token counts are those of exactly its requests.
    """
    end, first = answer.end, answer.first_token_s
    tokens, source = output_tokens(answer, tokenizer)
    if first is not None:
        recorder.record_extra("ttft", end, first)
        if tokens > 1 and len(answer.events) > 1:  # one event (a whole answer): no time per token
            recorder.record_extra("tpot", end, (end - answer.start - first) / (tokens - 1))
    for gap in answer.gaps_s:
        recorder.record_extra("itl", end, gap)
    recorder.defer_count("output_tokens", tokens)
    recorder.defer_count("input_tokens", input_tokens)
    if source in ("usage", "tokenizer"):
        recorder.defer_count(f"{source}_counted", 1)
    if meets(answer, limits):
        recorder.defer_count("slo_met", 1)


def user_load(host: str, options: TritonOptions, process: ProcessState, environment: Any) -> UserLoad:
    """An LLM kind's load of one user: prompts over HTTP (OpenAI's API, Triton's generate) or gRPC streams.

    With ``--triton-llm-turns`` the user holds chat sessions instead (:mod:`.conversations`).
    """
    from .llm_grpc import LlmGrpcTransport
    from .loops import TransportLoad

    if options.llm_turns:  # sessions of turns, each with the history so far
        from .conversations import conversation_load

        return conversation_load(host, options, process, environment)

    if options.llm_api == "triton-grpc":  # prompts to a decoupled text model over gRPC streams
        grpc = LlmGrpcTransport(host, options, process.step_starts, process.recorder)
        return TransportLoad(grpc, options, process, environment)
    http = LlmTransport(host, options, process.step_starts, process.recorder)
    return TransportLoad(http, options, process, environment)
