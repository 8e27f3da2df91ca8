"""HTTP/1.1 on a plain socket: prepared request bytes out, responses framed by their Content-Length.

A general HTTP client spends most of its time on header objects; the load generator's
requests never change, so they are written once and each response is only framed (status
and length), never parsed. Received chunks are joined only when a response can be complete.
"""

from __future__ import annotations

import json
import time

from .shared import one_line

RECV_BYTES = 262144


def response_end(buffer: bytes) -> int:
    """Where the first HTTP response of ``buffer`` ends, once its head has arrived (0 before)."""
    end = buffer.find(b"\r\n\r\n")
    if end < 0:
        return 0
    head = buffer[:end]
    at = head.find(b"\r\nContent-Length: ")
    skip = 18
    if at < 0:
        head = head.lower()
        at = head.find(b"\r\ncontent-length:")
        skip = 17
        if at < 0:
            raise ValueError("response without Content-Length")
    line_end = head.find(b"\r\n", at + skip)
    length = int(head[at + skip : line_end if line_end > 0 else len(head)])
    return end + 4 + length


def frame_response(buffer: bytes) -> tuple[int, bytes] | None:
    """Split one complete HTTP response off ``buffer``: (status, what follows), or None if incomplete."""
    body_end = response_end(buffer)
    if not body_end or len(buffer) < body_end:
        return None
    return int(buffer[9:12]), buffer[body_end:]


class ResponseBuffer:
    """Bytes received on a connection and not yet framed into responses.

    Chunks are kept apart and joined only when the response they belong to can be complete,
    so a large response costs one copy, not one per chunk received.
    """

    def __init__(self, keep: bool = False) -> None:
        self.keep = keep
        """Keep each response taken off (``last``), for a check of its outputs."""
        self.last = b""
        """The last response taken off, head and body (with ``keep``, or when its status was not 200)."""
        self.chunks: list[bytes] = []
        self.size = 0
        self.need = 0
        """Bytes the first response needs in all, once its head has arrived (0 before)."""
        self.last_size = 0
        """Bytes of the last response taken off (head and body)."""

    @property
    def empty(self) -> bool:
        """Whether nothing is left over."""
        return self.size == 0

    def add(self, chunk: bytes) -> None:
        """Keep bytes just received."""
        self.chunks.append(chunk)
        self.size += len(chunk)

    def next_status(self) -> int | None:
        """Take the first response off the buffer and return its HTTP status; None while it is incomplete."""
        if not self.size or self.size < self.need:
            return None
        buffer = self.chunks[0] if len(self.chunks) == 1 else b"".join(self.chunks)
        framed = frame_response(buffer)
        if framed is None:
            self.chunks, self.need = [buffer], response_end(buffer)
            return None
        status, rest = framed
        self.last_size = len(buffer) - len(rest)
        if self.keep or status != 200:  # a failure's body says why
            self.last = buffer[: self.last_size] if rest else buffer
        self.chunks, self.size, self.need = ([rest] if rest else []), len(rest), 0
        return status


def error_text(response: bytes) -> str:
    """What a failed response says: the ``error`` of Triton's JSON body, else its body, on one line."""
    head_end = response.find(b"\r\n\r\n")
    body = response[head_end + 4 :] if head_end >= 0 else b""
    text = body.decode("utf-8", errors="replace")
    try:
        answer = json.loads(text)
    except ValueError:
        answer = None
    if isinstance(answer, dict) and isinstance(answer.get("error"), str):
        text = answer["error"]
    status = response[9:12].decode("ascii", errors="replace")
    return one_line(text) if text.strip() else f"HTTP {status} without a body"


class RawHttpConnection:
    """A keep-alive HTTP/1.1 connection that sends prepared bytes and reads just the status and body length.

    A general HTTP client spends most of its time on header objects; the request here
    never changes, so it is written once and the response is only framed, not parsed.
    """

    def __init__(self, host: str, port: int, timeout: float, keep: bool = False) -> None:
        import socket

        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.received = ResponseBuffer(keep)
        self.split = (0.0, 0.0, 0.0)
        self.started = self.ended = 0.0
        """When the last round trip began sending and when its response was complete (perf_counter)."""

    def roundtrip(self, request: bytes) -> int:
        """Send one request and consume its response; return the HTTP status.

        ``split`` holds how long writing the request, waiting for the response's first bytes
        and reading the rest took (seconds).
        """
        clock = time.perf_counter
        start = clock()
        self.sock.sendall(request)
        sent = clock()
        status = self.received.next_status()
        first = sent
        while status is None:
            chunk = self._recv()
            if self.received.empty:
                first = clock()
            self.received.add(chunk)
            status = self.received.next_status()
        self.ended = clock()
        self.started, self.split = start, (sent - start, first - sent, self.ended - first)
        return status

    def _recv(self) -> bytes:
        chunk: bytes = self.sock.recv(RECV_BYTES)
        if not chunk:
            raise ConnectionResetError("the server closed the connection")
        return chunk

    def close(self) -> None:
        """Close the socket."""
        self.sock.close()
