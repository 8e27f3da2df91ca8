"""One LLM request over HTTP, streamed or not, timed event by event: OpenAI's API and Triton's generate.

The APIs: ``openai-chat`` (``POST /v1/chat/completions``), ``openai-completions`` (``POST
/v1/completions``) and ``triton-generate`` (``POST /v2/models/MODEL/generate_stream``, or
``generate`` without streaming). A streamed answer is server-sent events, one ``data:`` line
each; OpenAI's stream ends with ``data: [DONE]``, Triton's when the chunked body ends.

An event is its ``data:`` lines, ended by a blank line (:class:`SseEvents`). What is timed: the
send, every event that carries output text (the first one is the first
token; every gap between two is an inter-token gap, however many tokens one event holds),
and the end. The output's token count comes from the server's usage report where it gives
one (OpenAI's ``usage.completion_tokens``, asked with ``stream_options.include_usage``),
else it is the number of text events, and the answer says which.

Errors are counted by kind: ``http_<status>``, ``stream`` (the stream stopped without its
end: a cut connection, or OpenAI's ``[DONE]`` missing), ``timeout``, ``empty`` (no output
text and no output token reported) and the connection's errors by name. Plain Python
(``http.client``): under Locust, gevent makes its sockets cooperative.
"""

from __future__ import annotations

import http.client
import importlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .kernel_stamps import StampedConnection
from .shared import OPENAI_PATHS

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
    texts: list[str] = field(default_factory=list)
    """The output text, part by part (a tokenizer counts it where the server gives no usage)."""
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


def load_counter(path: str) -> Any:
    """The ``tokenizers.Tokenizer`` of ``path``, None without one or without the library.

    tritongen's own load processes have ``tokenizers``; a plain Locust image (compose,
    Kubernetes) does not, and there the answers without usage are counted by their events.
    """
    if not path:
        return None
    try:
        tokenizers = importlib.import_module("tokenizers")
    except ImportError:
        return None
    return tokenizers.Tokenizer.from_file(path)


def output_tokens(answer: Answer, tokenizer: Any) -> tuple[int, str]:
    """An answer's output tokens and where the count came from: ``usage``, ``tokenizer`` or ``events``."""
    if answer.output_tokens is not None or tokenizer is None:
        return answer.tokens, answer.token_source
    text = "".join(answer.texts)
    return len(tokenizer.encode(text, add_special_tokens=False).ids), "tokenizer"


def request_path(api: str, model: str, stream: bool) -> str:
    """The endpoint of ``api`` for ``model``."""
    if api == "triton-generate":
        return f"/v2/models/{model}/generate_stream" if stream else f"/v2/models/{model}/generate"
    return OPENAI_PATHS[api]


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


class SseEvents:
    """Server-sent events read line by line: each event's data, its ``data:`` lines joined by newlines.

    An event ends at a blank line; comments (``:``) and other fields (``event:``, ``id:``) are
    skipped. :meth:`end` gives what the body's end left pending (Triton's last event may end there).
    """

    def __init__(self) -> None:
        self.data: list[bytes] = []

    def feed(self, line: bytes) -> bytes | None:
        """One line in; an event's data where the line ended one."""
        line = line.rstrip(b"\r\n")
        if not line:
            return self.end()
        name, _, value = line.partition(b":")
        if name == b"data":
            self.data.append(value[1:] if value.startswith(b" ") else value)
        return None

    def end(self) -> bytes | None:
        """The pending event's data (None: none pending)."""
        if not self.data:
            return None
        data, self.data = b"\n".join(self.data), []
        return data


def read_events(
    readline: Callable[[], bytes], api: str, answer: Answer, clock: Callable[[], float] = time.perf_counter
) -> None:
    """Read a streamed answer into ``answer``: each event with output text timed, usage and errors noted.

    An OpenAI stream that ends without ``data: [DONE]`` is a ``stream`` error.
    """
    events, done = SseEvents(), False
    while True:
        line = readline()
        data = events.feed(line) if line else events.end()
        if data is not None:
            done = _take_event(api, data, answer, clock) or done
        if not line:
            break
    if api != "triton-generate" and not done and answer.error is None:
        answer.error = "stream"


def _take_event(api: str, data: bytes, answer: Answer, clock: Callable[[], float]) -> bool:
    """One event's data into ``answer``; whether it was OpenAI's ``[DONE]``.

    Raises:
        ValueError: the data is not JSON.
    """
    if data.strip() == DONE:
        return True
    event = json.loads(data)
    if not isinstance(event, dict):
        return False
    if event.get("error"):
        answer.error = "server_error"
    text = event_text(api, event)
    if text:
        answer.events.append(clock())
        answer.text_parts += 1
        answer.texts.append(text)
    answer.output_tokens = usage_tokens(event) or answer.output_tokens
    return False


def usage_tokens(event: dict[str, Any]) -> int | None:
    """The answer's output tokens where the event reports them.

    OpenAI's ``usage.completion_tokens``, or a Triton model's ``completion_tokens`` output (the
    local vLLM model sends it with its last token).
    """
    usage = event.get("usage")
    count = usage.get("completion_tokens") if isinstance(usage, dict) else event.get("completion_tokens")
    if isinstance(count, list) and len(count) == 1:  # a one-element tensor, as generate may write it
        count = count[0]
    return count if isinstance(count, int) and not isinstance(count, bool) else None


STALE_CONNECTION = ("BrokenPipeError", "connection_reset")
"""Error kinds of a send on a kept-alive connection the server had closed, before any answer."""


class LlmHttpClient:
    """Sends LLM requests to one server over a kept-alive connection (reopened after an error)."""

    def __init__(self, host: str, port: int, api: str, model: str, timeout_s: float, key: str | None = None):
        self.host, self.port, self.api, self.model = host, port, api, model
        self.timeout_s = timeout_s
        self.headers = {
            "Content-Type": "application/json",
            **({"Authorization": f"Bearer {key}"} if key else {}),
        }
        self.connection: StampedConnection | None = None

    def send(self, payload: dict[str, Any], stream: bool) -> Answer:
        """Send one request and read its whole answer.

        A kept-alive connection the server has closed meanwhile (its idle timeout) fails the
        send before any answer: the request goes once more on a new connection, timed from then.
        """
        body = json.dumps(payload).encode()
        reused = self.connection is not None
        answer = self._send(body, payload, stream)
        if reused and answer.error in STALE_CONNECTION:
            answer = self._send(body, payload, stream)
        return answer

    def _send(self, body: bytes, payload: dict[str, Any], stream: bool) -> Answer:
        answer = Answer(start=time.perf_counter())
        answered = False
        try:
            if self.connection is None:
                self.connection = StampedConnection(self.host, self.port, timeout=self.timeout_s)
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
        if answer.error is None and not answer.events and not answer.output_tokens:
            answer.error = "empty"  # tokens without text (special or partial bytes) are not empty
        if answer.error is not None and self.connection is not None:
            self.connection.close()
            self.connection = None
        return answer

    def _read_events(self, response: http.client.HTTPResponse, answer: Answer) -> None:
        """Server-sent events until the end: ``[DONE]`` (OpenAI) or the body's end (Triton)."""
        stamps = self.connection.stamps if self.connection is not None else None
        read_events(
            response.readline, self.api, answer, stamps.now if stamps is not None else time.perf_counter
        )

    def _read_whole(self, response: http.client.HTTPResponse, answer: Answer) -> None:
        """One answer: its tokens arrive at once (first token = the end).

        Tokens without text (special tokens, a split character) still arrived: the usage says so.
        """
        document = json.loads(response.read())
        arrived = time.perf_counter()
        if not isinstance(document, dict):
            return
        text = event_text(self.api, document)
        answer.output_tokens = usage_tokens(document)
        if text or answer.output_tokens:
            answer.events.append(arrived)
            answer.text_parts = 1
            answer.texts.extend([text] if text else [])

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
