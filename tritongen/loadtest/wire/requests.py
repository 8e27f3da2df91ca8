"""A request as the wire saw it, and the id it carried."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from tritongen.io.loadgen_shared import TRACE_ID_WIDTHS

ID_SEARCH_BYTES = 4096
"""How far into a request its id is looked for (it sits in the JSON header or the message's fields)."""


@dataclass
class WireRequest:
    """One request on the wire: its id, its first byte out, its response's last byte back, its events."""

    first_ns: int
    """When the request's first byte crossed the wire (ns since the epoch)."""
    last_ns: int = 0
    """When its response's last byte crossed it (0: no response)."""
    request_id: str | None = None
    """The id it carried (``--server-trace``'s and ``--wire``'s requests carry one), if found."""
    events_ns: list[int] = field(default_factory=list)
    """When each response event crossed (server-sent events, HTTP/2 data frames): streams."""
    head: bytes = b""
    """Its first bytes, where its id is looked for."""
    complete: bool = False
    """Whether its response ended (a last chunk, an HTTP/2 stream's end)."""

    @property
    def latency_us(self) -> float:
        """First byte out to the response's last byte back, in µs."""
        return (self.last_ns - self.first_ns) / 1000.0

    def take_head(self, data: bytes) -> None:
        """Keep the request's first bytes, up to :data:`ID_SEARCH_BYTES`."""
        if len(self.head) < ID_SEARCH_BYTES:
            self.head += data[: ID_SEARCH_BYTES - len(self.head)]


def id_pattern(tag: str) -> re.Pattern[bytes]:
    """The ids of one load test's requests: its tag, then the process's and the count's digits."""
    _, pid_width, count_width = TRACE_ID_WIDTHS
    return re.compile(re.escape(tag.encode()) + rb"\d{%d}" % (pid_width + count_width))


def name_requests(requests: list[WireRequest], tag: str) -> None:
    """Set each request's id from its first bytes (those without one keep None)."""
    pattern = id_pattern(tag)
    for request in requests:
        found = pattern.search(request.head)
        request.request_id = found.group().decode() if found else None
        request.head = b""
