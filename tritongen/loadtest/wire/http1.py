"""HTTP/1.1 keep-alive requests read off a connection's segments.

A client sends one request at a time on a connection and waits for its whole response (the
HTTP engine, the LLM clients): a request begins with the first client segment after the
server's data (or the connection's first), and its response ends with the server's last
segment before the next request (a chunked response that lacks its last chunk was cut and is
left out). A streamed response (server-sent events) has an event for
each ``data:`` line that carries output text (OpenAI's ``content`` or ``text``, Triton's
``text_output``, not empty), at the time the segment holding the line's end crossed the wire:
when the client could first read it whole.
"""

from __future__ import annotations

import re

from tritongen.loadtest.wire.packets import Connection, Joined, Segment
from tritongen.loadtest.wire.requests import WireRequest

EVENT_STREAM = b"text/event-stream"
CHUNKED = b"transfer-encoding: chunked"
LAST_CHUNK = b"0\r\n\r\n"
"""A chunked body's end: a stream without it was cut (the client stopped it, or the server died)."""
DATA_LINE = re.compile(rb"data:[^\n]*\n")
OUTPUT_TEXT = re.compile(rb'"(?:content|text|text_output)"\s*:\s*"(?!")')
"""An event's output text: a string field of the answer that is not empty."""


def output_events(segments: list[Segment]) -> list[int]:
    """When each server-sent event with output text was whole on the wire (ns), in order."""
    joined = Joined(segments, lambda segment: segment.data)
    return [
        joined.holding(line.end() - 1).time_ns
        for line in DATA_LINE.finditer(joined.data)
        if OUTPUT_TEXT.search(line.group())
    ]


def http1_requests(connection: Connection) -> list[WireRequest]:
    """The connection's requests in order (a request without any response is left out)."""
    requests: list[tuple[WireRequest, list[Segment]]] = []
    for segment in connection.segments:
        if segment.to_server:
            if not requests or requests[-1][1]:
                requests.append((WireRequest(first_ns=segment.time_ns), []))
            requests[-1][0].take_head(segment.data)
        elif requests:
            requests[-1][0].last_ns = segment.time_ns
            requests[-1][1].append(segment)
    answered = []
    for request, response in requests:
        head_end = response[0].data.find(b"\r\n\r\n") if response else -1
        head = response[0].data[: head_end if head_end >= 0 else None].lower() if response else b""
        if not response or (CHUNKED in head and not response[-1].data.endswith(LAST_CHUNK)):
            continue  # no answer, or a stream cut before its end
        request.complete = True
        if EVENT_STREAM in head:
            request.events_ns = output_events(response)
        answered.append(request)
    return answered
