"""The closed-loop HTTP engine: every closed-loop HTTP connection of a process, driven by one OS thread.

Each connection sends its prepared request, waits for the whole response, records the
latency and sends again. A plain epoll loop in a thread of its own, rather than a greenlet
per connection, roughly halves the generator's CPU per request, so the load generator is
not what limits the measurement. Users add and remove connections; the engine records
into the process's :class:`~.recording.Recorder`.

What a request costs is kept small: its bytes are prepared once; a response that arrives in
one piece with the head the last one of its step had (status, Content-Length and all) is
complete without being framed; a successful request only adds its timestamps to a
:class:`~.batches.RequestBatch`, recorded when its window or second ends. Where the run checks
the responses (the data has expected outputs) each response is framed and checked, and
recorded on its own.
"""

from __future__ import annotations

import contextlib
import select
import time
from dataclasses import dataclass, field
from typing import Any

from .batches import FIELDS, MAX_REQUESTS, RequestBatch
from .http_wire import RECV_BYTES, ResponseBuffer
from .kernel_stamps import NO_STAMP, STAMP_BYTES, KernelClock
from .kernel_stamps import enable as enable_stamps
from .recording import Recorder, real_lock
from .request_ids import RequestIds
from .transports import HttpTransport, error_kind, http_failure, timed_out

EPOLL_READ = select.EPOLLIN | select.EPOLLERR | select.EPOLLHUP
EPOLL_READ_WRITE = EPOLL_READ | select.EPOLLOUT
POLL_S = 0.05
"""The longest wait for an event: how often the engine looks at its connections and timeouts."""


@dataclass(slots=True)
class EngineConnection:
    """One closed-loop connection of the HTTP engine."""

    sock: Any
    start: float
    """When its request in flight was sent (perf_counter)."""
    received: ResponseBuffer = field(default_factory=ResponseBuffer)
    """Response bytes received and not yet framed."""
    out: bytes = b""
    """Request bytes still to send when the socket is writable."""
    requests: list[bytes] = field(default_factory=list)
    """What it sends, one step after the other: the transport's requests (with shared memory, that of
    its output region)."""
    step: int = 0
    """The step it sends next."""
    sent: int = 0
    """The step of its request in flight."""
    written: float = 0.0
    """When its request in flight was all written (perf_counter)."""
    first: float = 0.0
    """When the first bytes of its response arrived (perf_counter)."""
    arrived: float = NO_STAMP
    """When the kernel received the bytes read last (its receive timestamp, on the perf_counter
    scale; NaN: none)."""
    slot: Any = None
    """What it hands back to the transport when it closes."""
    count: int = 0
    """The id count of its request in flight (requests that carry ids)."""


class HttpEngine:
    """Every closed-loop HTTP connection of this process, driven by one OS thread with epoll.

    Each connection sends the prepared request, waits for the whole response, records the
    latency and sends again: a closed loop per connection. Doing this in a plain epoll
    loop, rather than a greenlet per connection, roughly halves the generator's CPU per
    request, so the load generator is not what limits the measurement.
    """

    def __init__(self, transport: HttpTransport, recorder: Recorder) -> None:
        from gevent.monkey import get_original

        self.socket_module = __import__("socket")
        self.real_socket = get_original("socket", "socket")
        self.real_sleep = get_original("time", "sleep")
        self.epoll = get_original("select", "epoll")()
        self.address = (transport.host, transport.port)
        self.transport = transport
        self.validator = transport.validator
        self.ids: RequestIds | None = getattr(transport, "ids", None)
        """Request ids written as each request is sent (``--triton-trace-tag``; tensor requests only)."""
        self.id_offsets: list[int] = getattr(transport, "id_offsets", [])
        self.timeout = transport.timeout
        self.kernel_clock = KernelClock()
        self.recorder = recorder
        self.batch = RequestBatch()
        self.known: dict[int, tuple[int, bytes]] = {}
        """Step → the size and head of its last response that came in one piece (without validation)."""
        self.lock = real_lock()
        self.to_open = 0  # connections to open
        self.connections: dict[int, EngineConnection] = {}
        self.wanted = 0
        self.stopped = False
        self.finished = False
        get_original("_thread", "start_new_thread")(self._run, ())

    def add(self) -> None:
        """Open one more closed-loop connection."""
        with self.lock:
            self.wanted += 1
            self.to_open += 1

    def remove(self) -> None:
        """Close one connection (a user stopped)."""
        with self.lock:
            self.wanted = max(0, self.wanted - 1)

    def stop(self) -> None:
        """End the thread and wait (up to 1 s) until it has recorded its last response."""
        self.stopped = True
        deadline = time.monotonic() + 1.0
        while not self.finished and time.monotonic() < deadline:
            time.sleep(0.005)

    def _reopen_later(self) -> None:
        with self.lock:
            self.to_open += 1

    def _fail(self, fd: int, error: BaseException | str) -> None:
        """Count a failed request, drop its connection and open a new one."""
        self._close(fd, error if isinstance(error, str) else error_kind(error, self.timeout))
        self._reopen_later()

    def _expire(self, now: float) -> None:
        """Fail requests older than the timeout (a server that never answers must not stall a slot)."""
        for fd, conn in list(self.connections.items()):
            if now - conn.start > self.timeout:
                self._fail(fd, timed_out(self.timeout))

    def _open(self) -> None:
        sock_mod = self.socket_module
        sock = self.real_socket(sock_mod.AF_INET, sock_mod.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self.address)
        except OSError as e:
            sock.close()
            self.recorder.record(time.perf_counter(), time.perf_counter(), error_kind(e, self.timeout))
            self.real_sleep(0.01)  # do not spin on a dead server
            self._reopen_later()
            return
        sock.setsockopt(sock_mod.IPPROTO_TCP, sock_mod.TCP_NODELAY, 1)
        enable_stamps(sock)  # each read then says when the kernel received its bytes
        sock.setblocking(False)
        requests, slot = self.transport.checkout()
        conn = EngineConnection(
            sock=sock,
            start=time.perf_counter(),
            received=ResponseBuffer(keep=self.validator is not None),
            requests=requests,
            step=self.transport.starts.first(len(requests)),
            slot=slot,
        )
        fd = sock.fileno()
        self.connections[fd] = conn
        try:
            self.epoll.register(fd, EPOLL_READ)
            self._send(conn)
        except Exception as e:  # e.g. reset right after accept under overload
            self._fail(fd, e)

    def _send(self, conn: EngineConnection) -> None:
        conn.start = time.perf_counter()
        step = conn.sent = conn.step
        conn.step = step + 1 if step + 1 < len(conn.requests) else 0
        data = conn.requests[step]
        if self.ids is not None:  # the connection's own copy: one request of it in flight
            conn.count = self.ids.stamp(data, self.id_offsets[step])  # type: ignore[arg-type]
        sent = conn.sock.send(data)
        conn.written = conn.first = time.perf_counter()
        if sent < len(data):  # a large payload: finish when the socket is writable
            conn.out = data[sent:]
            self.epoll.modify(conn.sock.fileno(), EPOLL_READ_WRITE)

    def _close(self, fd: int, error: str | None) -> None:
        conn = self.connections.pop(fd)
        self.transport.checkin(conn.slot)
        if error is not None:
            self.recorder.record(conn.start, time.perf_counter(), error)
        with contextlib.suppress(OSError):
            self.epoll.unregister(fd)
        conn.sock.close()

    def _run(self) -> None:
        try:
            self._loop()
        finally:
            self.stopped = True
            self.recorder.record_batch(self.batch)
            for fd in list(self.connections):
                self._close(fd, error=None)
            self.epoll.close()
            self.finished = True

    def _loop(self) -> None:
        clock, poll, connections, batch = time.perf_counter, self.epoll.poll, self.connections, self.batch
        next_expiry = clock() + 1.0
        while not self.stopped:
            if self.to_open or len(connections) > self.wanted:
                self._rebalance()
            now = clock()
            timeout = POLL_S
            if batch.marks:
                if now >= batch.boundary or len(batch.marks) >= MAX_REQUESTS * FIELDS:
                    self.recorder.record_batch(batch)
                else:
                    timeout = min(POLL_S, batch.boundary - now)
            for fd, mask in poll(timeout):
                conn = connections.get(fd)
                if conn is not None:
                    self._serve(fd, conn, mask)
            if now >= next_expiry:
                self._expire(now)
                next_expiry = now + 1.0

    def _rebalance(self) -> None:
        """Open the connections asked for, close those beyond the number wanted."""
        with self.lock:
            opening, self.to_open = self.to_open, 0
            excess = len(self.connections) + opening - self.wanted
        for _ in range(opening):
            self._open()
        for fd in list(self.connections)[: max(0, excess)]:
            self._close(fd, error=None)

    def _serve(self, fd: int, conn: EngineConnection, mask: int) -> None:
        """Act on one epoll event: send the rest of the request, or read the response."""
        try:
            if mask & select.EPOLLOUT and conn.out:
                sent = conn.sock.send(conn.out)
                conn.out = conn.out[sent:]
                if not conn.out:
                    conn.written = conn.first = time.perf_counter()
                    self.epoll.modify(fd, EPOLL_READ)
            if mask & EPOLL_READ:
                self._receive(conn)
        except Exception as e:
            self._fail(fd, e)

    def _receive(self, conn: EngineConnection) -> None:
        chunk, stamps, _, _ = conn.sock.recvmsg(RECV_BYTES, STAMP_BYTES)
        first = time.perf_counter()
        conn.arrived = self.kernel_clock.read_time(stamps)
        received = conn.received
        whole = b""
        if not received.size:
            known = self.known.get(conn.sent)
            if known is not None and len(chunk) == known[0] and chunk.startswith(known[1]):
                now = time.perf_counter()  # the whole response, status 200
                batch = self.batch
                if now >= batch.boundary:
                    self._next_batch(now)
                batch.marks += (conn.start, conn.written, first, now, known[0], conn.arrived)
                if self.ids is not None:
                    self.ids.mark(conn.count, conn.start, now)
                self._send(conn)
                return
            conn.first, whole = first, chunk
        if not chunk:
            raise ConnectionResetError("the server closed the connection")
        received.add(chunk)
        status = received.next_status()
        while status is not None:
            now = time.perf_counter()
            if status != 200:
                self.recorder.record(conn.start, now, http_failure(status, received.last), received.last_size)
            elif self.validator is not None:
                self._checked(conn, now, received)
            else:
                self._succeeded(conn, now, received.last_size)
                if whole and received.empty and received.last_size == len(whole):
                    self.known[conn.sent] = (len(whole), whole[: whole.find(b"\r\n\r\n") + 4])
            if received.empty:
                self._send(conn)
                return
            status = received.next_status()

    def _succeeded(self, conn: EngineConnection, now: float, size: int) -> None:
        """Add a successful request to the batch."""
        if now >= self.batch.boundary:
            self._next_batch(now)
        self.batch.marks += (conn.start, conn.written, conn.first, now, size, conn.arrived)
        if self.ids is not None:
            self.ids.mark(conn.count, conn.start, now)

    def _next_batch(self, now: float) -> None:
        """Record the batch (its window or second is over) and start the one of ``now``."""
        self.recorder.record_batch(self.batch)
        self.batch.boundary = self.recorder.boundary_after(now)

    def _checked(self, conn: EngineConnection, now: float, received: ResponseBuffer) -> None:
        """Check a response with status 200 against the expected outputs and record its request."""
        assert self.validator is not None
        self.recorder.defer_split(conn.written - conn.start, conn.first - conn.written, now - conn.first)
        error = self.validator.check_http(conn.sent, received.last, now)  # counted in the request's window
        self.recorder.record(conn.start, now, error, received.last_size)
        if error is None and self.ids is not None:
            self.ids.mark(conn.count, conn.start, now)
