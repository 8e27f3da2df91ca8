"""One LLM request over HTTP, streamed or not, timed event by event: OpenAI's API and Triton's generate.

The APIs: ``openai-chat`` (``POST /v1/chat/completions``), ``openai-completions`` (``POST
/v1/completions``) and ``triton-generate`` (``POST /v2/models/MODEL/generate_stream``, or
``generate`` without streaming). A streamed answer is server-sent events, one ``data:`` line
each; OpenAI's stream ends with ``data: [DONE]``, Triton's when the chunked body ends.

What is timed: the send, every event that carries output text (the first one is the first
token; every gap between two is an inter-token gap, however many tokens one event holds),
and the end. The output's token count comes from the server's usage report where it gives
one (OpenAI's ``usage.completion_tokens``, asked with ``stream_options.include_usage``),
else it is the number of text events, and the answer says which.

Errors are counted by kind: ``http_<status>``, ``stream`` (the stream stopped without its
end: a cut connection, or OpenAI's ``[DONE]`` missing), ``timeout``, ``empty`` (no output
text at all) and the connection's errors by name. Plain Python (``http.client``): under
Locust, gevent makes its sockets cooperative.
"""

from __future__ import annotations

import http.client
import json
import time
from dataclasses import dataclass, field
from typing import Any

API_PATHS = {
    "openai-chat": "/v1/chat/completions",
    "openai-completions": "/v1/completions",
}
DONE = b"[DONE]"


@dataclass
class Answer:
    """One request's times (``time.perf_counter``) and what came back."""

    start: float
    events: list[float] = field(default_factory=list)
    """When each event with output text arrived."""
    end: float = 0.0
    output_tokens: int | None = None
    """The server's usage count of output tokens (None: it gave none)."""
    text_parts: int = 0
    error: str | None = None

    @property
    def first_token_s(self) -> float | None:
        """Send to the first output text, in seconds (None: none came)."""
        return self.events[0] - self.start if self.events else None

    @property
    def gaps_s(self) -> list[float]:
        """Every gap between two events with output text."""
        return [b - a for a, b in zip(self.events, self.events[1:], strict=False)]

    @property
    def tokens(self) -> int:
        """Output tokens: the server's count, else the text events."""
        return self.output_tokens if self.output_tokens is not None else self.text_parts

    @property
    def token_source(self) -> str:
        """``usage`` (the server's count) or ``events`` (one token per text event)."""
        return "usage" if self.output_tokens is not None else "events"


def request_path(api: str, model: str, stream: bool) -> str:
    """The endpoint of ``api`` for ``model``."""
    if api == "triton-generate":
        return f"/v2/models/{model}/generate_stream" if stream else f"/v2/models/{model}/generate"
    return API_PATHS[api]


def event_text(api: str, event: dict[str, Any]) -> str:
    """The output text one event (or a whole answer) carries."""
    if api == "triton-generate":
        value = event.get("text_output")
        return value if isinstance(value, str) else ""
    choices = event.get("choices") or []
    if not choices or not isinstance(choices[0], dict):
        return ""
    choice = choices[0]
    if api == "openai-chat":
        part = choice.get("delta") or choice.get("message") or {}
        return str(part.get("content") or "") if isinstance(part, dict) else ""
    return str(choice.get("text") or "")


def usage_tokens(event: dict[str, Any]) -> int | None:
    """OpenAI's ``usage.completion_tokens`` where the event has it."""
    usage = event.get("usage")
    count = usage.get("completion_tokens") if isinstance(usage, dict) else None
    return count if isinstance(count, int) else None


class LlmHttpClient:
    """Sends LLM requests to one server over a kept-alive connection (reopened after an error)."""

    def __init__(self, host: str, port: int, api: str, model: str, timeout_s: float, key: str | None = None):
        self.host, self.port, self.api, self.model = host, port, api, model
        self.timeout_s = timeout_s
        self.headers = {
            "Content-Type": "application/json",
            **({"Authorization": f"Bearer {key}"} if key else {}),
        }
        self.connection: http.client.HTTPConnection | None = None

    def send(self, payload: dict[str, Any], stream: bool) -> Answer:
        """Send one request and read its whole answer."""
        body = json.dumps(payload).encode()
        answer = Answer(start=time.perf_counter())
        answered = False
        try:
            if self.connection is None:
                self.connection = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout_s)
            self.connection.request("POST", request_path(self.api, self.model, stream), body, self.headers)
            response = self.connection.getresponse()
            answered = True
            if response.status != 200:
                response.read()
                answer.error = f"http_{response.status}"
            elif stream:
                self._read_events(response, answer)
            else:
                self._read_whole(response, answer)
        except (TimeoutError, OSError, http.client.HTTPException, ValueError) as e:
            answer.error = _error_kind(e, answered)
        answer.end = time.perf_counter()
        if answer.error is None and not answer.events:
            answer.error = "empty"
        if answer.error is not None and self.connection is not None:
            self.connection.close()
            self.connection = None
        return answer

    def _read_events(self, response: http.client.HTTPResponse, answer: Answer) -> None:
        """Server-sent events until the end: ``[DONE]`` (OpenAI) or the body's end (Triton)."""
        done = False
        while True:
            line = response.readline()
            if not line:
                break
            if not line.startswith(b"data:"):
                continue
            data = line[5:].strip()
            if data == DONE:
                done = True
                continue
            event = json.loads(data)
            if not isinstance(event, dict):
                continue
            if event.get("error"):
                answer.error = "server_error"
            if event_text(self.api, event):
                answer.events.append(time.perf_counter())
                answer.text_parts += 1
            answer.output_tokens = usage_tokens(event) or answer.output_tokens
        if self.api != "triton-generate" and not done and answer.error is None:
            answer.error = "stream"

    def _read_whole(self, response: http.client.HTTPResponse, answer: Answer) -> None:
        """One answer: its text arrives at once (first token = the end)."""
        document = json.loads(response.read())
        if isinstance(document, dict) and event_text(self.api, document):
            answer.events.append(time.perf_counter())
            answer.text_parts = 1
            answer.output_tokens = usage_tokens(document)

    def close(self) -> None:
        """Close the connection."""
        if self.connection is not None:
            self.connection.close()
            self.connection = None


def _error_kind(error: BaseException, answered: bool) -> str:
    """A failed request's kind: ``timeout``, ``stream`` (cut after the answer began) or the error's name."""
    if isinstance(error, TimeoutError) or "timeout" in type(error).__name__.lower():
        return "timeout"
    closed = (http.client.IncompleteRead, http.client.RemoteDisconnected, ConnectionResetError)
    if isinstance(error, closed):
        return "stream" if answered else "connection_reset"
    if isinstance(error, ConnectionRefusedError):
        return "connection_refused"
    if isinstance(error, ValueError):
        return "bad_event"
    return type(error).__name__
