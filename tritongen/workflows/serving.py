"""The one place a workflow starts the embedded server for its work, and aims its load at it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path

from tritongen.loadtest.spec import LoadSpec
from tritongen.server.embedded import ServingHooks, embedded_server
from tritongen.server.local import LocalTritonServer


@contextlib.contextmanager
def serving(
    repo: Path | None,
    models: Sequence[str],
    hooks: ServingHooks | None = None,
    skip_failed: bool = False,
) -> Iterator[LocalTritonServer | None]:
    """The embedded server on ``repo`` with ``models`` (linted first); None without ``repo``.

    Raises:
        ConfigError: a config breaks one of Triton's rules.
        ServerError: the server cannot start.
        ModelLoadError: one of ``models`` does not load.
    """
    if repo is None:
        yield None
        return
    with embedded_server(repo, models, hooks, skip_failed=skip_failed) as server:
        yield server


def server_url(server: LocalTritonServer, protocol: str) -> str:
    """The address of ``server`` for ``protocol`` (``http`` or ``grpc``)."""
    return server.http_url if protocol == "http" else server.grpc_url


def aimed_at(spec: LoadSpec, server: LocalTritonServer | None) -> LoadSpec:
    """``spec`` aimed at ``server``: its address for the spec's protocol, and its metrics."""
    if server is None:
        return spec
    return replace(spec, url=server_url(server, spec.protocol), metrics_url=server.metrics_url)
