"""How the embedded server is started: ports, host, models loaded, timeouts, log, the admin key."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

RESTRICTED_APIS = "model-repository,shared-memory,logging,trace"
"""What a server reachable from other machines keeps for requests carrying the admin key."""
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


def is_loopback(host: str) -> bool:
    """Whether ``host`` is reachable from this machine only."""
    return host in LOOPBACK_HOSTS or host.startswith("127.")


@dataclass(frozen=True)
class ServerSettings:
    """How :class:`LocalTritonServer` starts and stops the server; a port of 0 picks a free one."""

    http_port: int = 8000
    grpc_port: int = 8001
    metrics_port: int = 8002
    host: str = "127.0.0.1"
    models: Sequence[str] | None = None
    """The models loaded at start-up: all (``None``) by default, none with ``[]``."""
    load_timeout_s: float | None = None
    """How long the server may take to start and load its models; None: derived from the model count
    (:func:`~tritongen.server.loading.default_load_timeout_s`). Also bounds each later live load."""
    stop_timeout_s: float = 20.0
    """How long SIGINT is given before the process group is killed."""
    log_path: Path | None = None
    """Where the server log goes; by default a scratch file, kept when the start fails."""
    extra_args: Sequence[str] | None = None
    """Further ``tritonserver`` arguments, appended last."""
    require_all_models: bool = True
    """Whether a requested model that fails to load fails the start."""
    admin_key: str | None = None
    """When set, the model-repository, shared-memory, logging and trace APIs need this key."""


class ServerOptions(TypedDict, total=False):
    """Fields of :class:`ServerSettings` given to :class:`LocalTritonServer` by keyword."""

    http_port: int
    grpc_port: int
    metrics_port: int
    host: str
    models: Sequence[str] | None
    load_timeout_s: float | None
    stop_timeout_s: float
    log_path: Path | None
    extra_args: Sequence[str] | None
    require_all_models: bool
    admin_key: str | None
