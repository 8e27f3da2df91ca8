"""A TCP relay on 127.0.0.1 that cuts every connection after a number of the server's bytes.

Put in front of a real server, it passes requests through untouched and forwards each answer
until the connection has carried ``limit`` bytes back, then closes both sides: short answers
(a model list) arrive whole, a long stream stops half-way, as a dropped connection leaves it.
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
            with contextlib.suppress(OSError):
                side.shutdown(socket.SHUT_RDWR)
            side.close()


@contextlib.contextmanager
def cutting_proxy(port: int, limit: int) -> Iterator[int]:
    """Relay 127.0.0.1:<the port yielded> to 127.0.0.1:``port``, cutting answers after ``limit`` bytes."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                client, _ = listener.accept()
                upstream = socket.create_connection(("127.0.0.1", port))
            except OSError:
                continue
            threading.Thread(target=_pump, args=(client, upstream, None), daemon=True).start()
            threading.Thread(target=_pump, args=(upstream, client, limit), daemon=True).start()

    listener.settimeout(0.5)
    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield int(listener.getsockname()[1])
    finally:
        stop.set()
        thread.join(timeout=5)
        listener.close()
