"""HTTP/1.1 keep-alive requests read off a connection's segments.

A client sends one request at a time on a connection and waits for its whole response (the
HTTP engine, the LLM clients): a request begins with the first client segment after the
server's data (or the connection's first), and its response ends with the server's last
segment before the next request. A streamed response (server-sent events) has an event for
each ``data:`` line, at the time the segment that carried its start crossed the wire.
"""

from __future__ import annotations

from tritongen.loadtest.wire.packets import Connection
from tritongen.loadtest.wire.requests import WireRequest

EVENT_MARK = b"data:"


def http1_requests(connection: Connection) -> list[WireRequest]:
    """The connection's requests in order (a request without any response is left out)."""
    requests: list[WireRequest] = []
    current: WireRequest | None = None
    for segment in connection.segments:
        if segment.to_server:
            if current is None or current.last_ns:
                current = WireRequest(first_ns=segment.time_ns)
                requests.append(current)
            current.take_head(segment.data)
        elif current is not None:
            current.last_ns = segment.time_ns
            current.events_ns.extend([segment.time_ns] * segment.data.count(EVENT_MARK))
    for request in requests:
        request.complete = bool(request.last_ns)
    return [request for request in requests if request.complete]
