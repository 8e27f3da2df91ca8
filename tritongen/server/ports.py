"""Free and busy TCP ports on the address the server binds."""

from __future__ import annotations

import contextlib
import errno
import socket

from tritongen.errors import ServerError


def pick_free_ports(host: str, count: int) -> list[int]:
    """Return ``count`` distinct ports that are free on ``host`` right now."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sockets.append(sock)
            sock.bind((host, 0))
        return [sock.getsockname()[1] for sock in sockets]
    except OSError as e:
        raise ServerError(
            f"cannot bind {host}: {e}", "pass --host with an IPv4 address of this machine"
        ) from e
    finally:
        for sock in sockets:
            sock.close()


def check_port_free(host: str, port: int, role: str, option: str) -> None:
    """Raise if ``port`` on ``host`` is taken.

    Raises:
        ServerError: the port is in use (the message names it and the option to change it).
    """
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as e:
            if isinstance(e, socket.gaierror):
                raise ServerError(f"cannot bind {host}: {e}", "pass --host with an IPv4 address") from e
            if e.errno == errno.EADDRINUSE:
                raise ServerError(
                    f"port {port} ({role}) on {host} is already in use",
                    f"stop what is listening there or pass {option} with a free port (0 picks one)",
                ) from e
            raise ServerError(
                f"cannot bind {host}:{port} ({role}): {e.strerror}", f"choose another {option}"
            ) from e
