"""The LLM client's connection handling and where an answer's counts are recorded.

The resend is tested against a real HTTP server on loopback that closes every kept-alive
connection after its answer, without saying so (as a server's idle timeout does).
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

from tritongen.loadtests.tritonload.llm_http import LlmHttpClient

from support.paths import ROOT

ANSWER = {
    "id": "cmpl-1",
    "object": "text_completion",
    "choices": [{"index": 0, "text": "two words"}],
    "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
}


class _ClosingHandler(BaseHTTPRequestHandler):
    """Answers a completion whole, then closes the connection it said nothing about closing."""

    protocol_version = "HTTP/1.1"
    connections: ClassVar[list[int]] = []
    answer: ClassVar[dict[str, object]] = ANSWER

    def setup(self) -> None:
        super().setup()
        type(self).connections.append(1)

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        body = json.dumps(type(self).answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.close_connection = True

    def log_message(self, format: str, *args: object) -> None:
        """Quiet."""


@contextmanager
def _closing_server(answer: dict[str, object] = ANSWER) -> Iterator[int]:
    _ClosingHandler.connections, _ClosingHandler.answer = [], answer
    server = ThreadingHTTPServer(("127.0.0.1", 0), _ClosingHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def test_a_request_on_a_connection_the_server_closed_is_sent_again_on_a_new_one() -> None:
    with _closing_server() as port:
        client = LlmHttpClient("127.0.0.1", port, "openai-completions", "m", timeout_s=10)
        answers = [client.send({"prompt": "hi", "max_tokens": 2}, stream=False) for _ in range(3)]
        client.close()
    assert [a.error for a in answers] == [None, None, None]
    assert [a.output_tokens for a in answers] == [2, 2, 2]
    assert len(_ClosingHandler.connections) == 3  # one per request: each stale one was replaced


def test_a_whole_answer_of_tokens_without_text_is_not_empty() -> None:
    """A random model's tokens may all be special ones: no text, but the usage counts them."""
    textless = {**ANSWER, "choices": [{"index": 0, "text": ""}]}
    with _closing_server(textless) as port:
        client = LlmHttpClient("127.0.0.1", port, "openai-completions", "m", timeout_s=10)
        answer = client.send({"prompt": "hi", "max_tokens": 2}, stream=False)
    assert answer.error is None and answer.output_tokens == 2 and answer.token_source == "usage"
    assert answer.first_token_s is not None and answer.first_token_s <= answer.end - answer.start
    with _closing_server({**textless, "usage": None}) as port:
        nothing = LlmHttpClient("127.0.0.1", port, "openai-completions", "m", timeout_s=10)
        assert nothing.send({"prompt": "hi"}, stream=False).error == "empty"


def test_a_refused_first_connection_is_an_error_not_a_resend() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # nothing listens once the probe closes
    client = LlmHttpClient("127.0.0.1", port, "openai-completions", "m", timeout_s=5)
    answer = client.send({"prompt": "hi"}, stream=False)
    assert answer.error == "connection_refused" and client.connection is None


DEFER_PROBE = r"""
import json, sys, time

sys.path.insert(0, sys.argv[1])  # the locustfile's folder, as Locust puts it on sys.path
from tritonload.llm_http import Answer
from tritonload.llm_transport import parse_limits, record_answer
from tritonload.recording import Recorder

now = time.perf_counter()
recorder = Recorder(time.time() - 0.2, 0.5)  # window 0 ends 0.3 s from now
answer = Answer(start=now - 0.2, events=[now - 0.15, now - 0.12], end=now - 0.1, output_tokens=7,
                text_parts=2, texts=["a", "b"])
record_answer(recorder, answer, 5, parse_limits("100"))
recorder.record(answer.start, now + 0.6, None)  # the user counts it in window 1
print(json.dumps([{"index": w["index"], "ok": w["ok"], "counts": w["counts"], "extra": sorted(w["extra"])}
                  for w in recorder.drain(everything=True)]))
"""


def test_an_answers_counts_land_in_the_window_its_request_is_counted_in() -> None:
    done = subprocess.run(
        [sys.executable, "-c", DEFER_PROBE, str(ROOT / "loadtests")], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    windows = {w["index"]: w for w in json.loads(done.stdout)}
    assert windows[1]["ok"] == 1
    counts = windows[1]["counts"]
    assert counts == {"output_tokens": 7, "input_tokens": 5, "usage_counted": 1, "slo_met": 1}, counts
    # its latencies stay in the window of the answer's end
    assert windows[0]["ok"] == 0 and windows[0]["extra"] == ["itl", "tpot", "ttft"]
    assert not windows[0]["counts"]
