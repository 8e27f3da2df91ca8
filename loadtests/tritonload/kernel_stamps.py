"""When the kernel received what a socket read: its receive timestamp (Linux's ``SO_TIMESTAMPNS``).

A request's bytes can wait in the socket for the load generator's event loop to read them; the
kernel's receive time of each read says when they arrived, so a latency can count to there, and
the client's own time after it is known. The timestamps are the real-time clock's; a
:class:`KernelClock` puts them on ``time.perf_counter``'s scale, the one the requests are timed
on. :class:`StampedConnection` is ``http.client``'s connection whose reads keep the receive time
of the latest one, a line at a time (the LLM client times its stream's events with it: a busy
client reading late still times each event at its arrival).
"""

from __future__ import annotations

import http.client
import io
import math
import socket
import struct
import time
from typing import Any

SO_TIMESTAMPNS = 35
"""Linux's socket option (and control message) for each read's receive time, a ``struct timespec``;
the ``socket`` module does not name it."""
STAMP_BYTES = 64
"""Room for the control message that carries the receive time."""
NO_STAMP = float("nan")
"""A read's receive time where the kernel gave none."""


def enable(sock: Any) -> bool:
    """Ask the kernel for each read's receive time on ``sock``; whether it agreed."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    except OSError:
        return False
    return True


class KernelClock:
    """The kernel's receive times on the ``time.perf_counter`` scale."""

    def __init__(self) -> None:
        self.offset = time.clock_gettime(time.CLOCK_REALTIME) - time.perf_counter()

    def read_time(self, ancillary: list[tuple[int, int, bytes]]) -> float:
        """A read's receive time from its control messages (NaN: the kernel gave none)."""
        for level, kind, data in ancillary:
            if kind == SO_TIMESTAMPNS and level == socket.SOL_SOCKET and len(data) >= 16:
                seconds, nanoseconds = struct.unpack_from("qq", data)
                return float(seconds + nanoseconds * 1e-9 - self.offset)
        return NO_STAMP


class _StampedReader(io.RawIOBase):
    """A socket's reads for one response, a line at most each, keeping its receive time on the wrapper.

    A read of TCP data gets the receive time of the last packet it took bytes from. A client that
    reads late finds several events waiting: read whole, they would all get the last one's time.
    So each read takes what waits only up to its first line's end (seen with ``MSG_PEEK``), and
    each line keeps the time its own last byte arrived.
    """

    def __init__(self, owner: StampedSocket) -> None:
        self.owner = owner

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        sock = self.owner.sock
        waiting = sock.recv(len(buffer), socket.MSG_PEEK)
        if not waiting:
            return 0
        end = waiting.find(b"\n")
        take = end + 1 if end >= 0 else len(waiting)
        size, ancillary, _, _ = sock.recvmsg_into([memoryview(buffer)[:take]], STAMP_BYTES)
        if size:
            self.owner.arrived = self.owner.clock.read_time(ancillary)
        return int(size)


class StampedSocket:
    """A connected socket whose reads keep the kernel's receive time of the latest one (``arrived``)."""

    def __init__(self, sock: Any, clock: KernelClock) -> None:
        self.sock, self.clock = sock, clock
        self.arrived = NO_STAMP
        self.stamped = enable(sock)

    def makefile(self, mode: str = "rb", *_: Any, **__: Any) -> io.BufferedReader:
        """A response's reader (``http.client`` asks one per response; closing it leaves the socket open)."""
        return io.BufferedReader(_StampedReader(self))

    def now(self) -> float:
        """When the bytes read last arrived, else (no receive time) now: ``time.perf_counter``."""
        return self.arrived if not math.isnan(self.arrived) else time.perf_counter()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.sock, name)


class StampedConnection(http.client.HTTPConnection):
    """``http.client``'s connection whose reads keep their receive times (``stamps``, once connected)."""

    clock = KernelClock()
    stamps: StampedSocket | None = None

    def connect(self) -> None:
        """Connect, then read through a :class:`StampedSocket`."""
        super().connect()
        self.stamps = StampedSocket(self.sock, self.clock)
        self.sock = self.stamps
