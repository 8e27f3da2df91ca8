"""gRPC (HTTP/2) requests read off a connection's segments: one request per client stream.

Each side's bytes are put back in order and cut into HTTP/2 frames (a 9-byte header: length,
type, flags, stream). A request begins with the first byte of its stream's first client frame;
its response ends with the last byte of the server's frame that ends the stream (gRPC's
trailers). Each server DATA frame on the stream is an event (a streamed response's message).
The headers' contents (HPACK) are not needed and not read.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from tritongen.loadtest.wire.packets import Connection, Joined
from tritongen.loadtest.wire.requests import WireRequest

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS = 0x0, 0x1
END_STREAM = 0x1
FRAME_HEAD = 9


@dataclass(frozen=True, slots=True)
class Frame:
    """One HTTP/2 frame: when its first and last bytes crossed the wire, its header, its payload."""

    first_ns: int
    last_ns: int
    kind: int
    flags: int
    stream: int
    payload: bytes


def frames(connection: Connection, to_server: bool) -> Iterator[Frame]:
    """One side's frames in order (a frame cut off by the capture's end is left out)."""
    joined = Joined(
        [s for s in connection.segments if s.to_server == to_server], lambda segment: segment.data
    )
    data = joined.data

    def crossed(offset: int) -> int:  # when the byte at ``offset`` crossed the wire
        return joined.holding(offset).time_ns

    position = len(PREFACE) if to_server and data.startswith(PREFACE) else 0
    while position + FRAME_HEAD <= len(data):
        length = int.from_bytes(data[position : position + 3], "big")
        end = position + FRAME_HEAD + length
        if end > len(data):
            return
        stream = int.from_bytes(data[position + 5 : position + 9], "big") & 0x7FFFFFFF
        yield Frame(
            crossed(position), crossed(end - 1), data[position + 3], data[position + 4], stream,
            data[position + FRAME_HEAD : end],
        )  # fmt: skip
        position = end


def http2_requests(connection: Connection) -> list[WireRequest]:
    """The connection's requests (client streams) whose responses ended, in the order they began."""
    requests: dict[int, WireRequest] = {}
    for frame in frames(connection, to_server=True):
        if frame.stream and frame.kind in (DATA, HEADERS):
            request = requests.setdefault(frame.stream, WireRequest(first_ns=frame.first_ns))
            if frame.kind == DATA:
                request.take_head(frame.payload)
    for frame in frames(connection, to_server=False):
        answered = requests.get(frame.stream)
        if answered is None or frame.kind not in (DATA, HEADERS):
            continue
        request = answered
        request.last_ns = frame.last_ns
        if frame.kind == DATA and frame.payload:
            request.events_ns.append(frame.last_ns)
        if frame.flags & END_STREAM:
            request.complete = True
    return sorted((r for r in requests.values() if r.complete), key=lambda r: r.first_ns)
