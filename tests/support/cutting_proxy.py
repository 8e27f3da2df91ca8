"""A TCP relay on 127.0.0.1 in front of a real server: it cuts answers short, or goes away whole.

Put in front of a real server, it passes requests through untouched. With a ``limit``, it
forwards each answer until the connection has carried ``limit`` bytes back, then closes both
sides: short answers (a model list) arrive whole, a long stream stops half-way, as a dropped
connection leaves it. :meth:`Relay.kill` closes its port and every connection at once: to its
clients, the server died.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator


def _pump(source: socket.socket, target: socket.socket, limit: int | None) -> None:
    """Copy ``source`` to ``target`` until either closes or ``limit`` bytes have passed; close both."""
    passed = 0
    try:
        while limit is None or passed < limit:
            data = source.recv(4096)
            if not data:
                break
            if limit is not None:
                data = data[: limit - passed]
            target.sendall(data)
            passed += len(data)
    except OSError:
        pass
    finally:
        for side in (source, target):
            _close(side)


def _close(side: socket.socket) -> None:
    with contextlib.suppress(OSError):
        side.shutdown(socket.SHUT_RDWR)
    side.close()


class Relay:
    """Relays 127.0.0.1:``port`` (this relay's own) to 127.0.0.1:``upstream`` until killed."""

    def __init__(self, upstream: int, limit: int | None = None) -> None:
        self.upstream, self.limit = upstream, limit
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.5)
        self.port = int(self.listener.getsockname()[1])
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.sockets: list[socket.socket] = []
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                client, _ = self.listener.accept()
                upstream = socket.create_connection(("127.0.0.1", self.upstream))
            except OSError:
                continue
            with self.lock:
                if self.stop.is_set():
                    _close(client)
                    _close(upstream)
                    return
                self.sockets += [client, upstream]
            threading.Thread(target=_pump, args=(client, upstream, None), daemon=True).start()
            threading.Thread(target=_pump, args=(upstream, client, self.limit), daemon=True).start()

    def kill(self) -> None:
        """Close the port and every connection: new ones are refused, open ones are cut."""
        with self.lock:
            self.stop.set()
            self.listener.close()
            for side in self.sockets:
                _close(side)
        self.thread.join(timeout=5)


@contextlib.contextmanager
def relay(upstream: int, limit: int | None = None) -> Iterator[Relay]:
    """A :class:`Relay` to 127.0.0.1:``upstream`` for the block (killed at its end, if not before)."""
    running = Relay(upstream, limit)
    try:
        yield running
    finally:
        running.kill()


@contextlib.contextmanager
def cutting_proxy(port: int, limit: int) -> Iterator[int]:
    """Relay 127.0.0.1:<the port yielded> to 127.0.0.1:``port``, cutting answers after ``limit`` bytes."""
    with relay(port, limit) as running:
        yield running.port
