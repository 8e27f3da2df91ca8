"""A workflow's server: the embedded one started if asked, and a load aimed at whichever server it uses."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path

from tritongen.client.address import ServerAddress
from tritongen.loadtest.spec import LoadSpec
from tritongen.server.embedded import ServingHooks, embedded_server
from tritongen.server.local import LocalTritonServer


@contextlib.contextmanager
def serving_if_asked(
    repo: Path | None,
    models: Sequence[str],
    hooks: ServingHooks | None = None,
    skip_failed: bool = False,
    load_timeout_s: float | None = None,
) -> Iterator[LocalTritonServer | None]:
    """The embedded server on ``repo`` with ``models``, for the block; no ``repo``: none (one runs elsewhere).

    With ``skip_failed`` the whole repository is served, less the models that fail to load
    (each told to ``hooks``); ``models`` must load all the same. ``load_timeout_s`` bounds the
    start and its loads (None: derived from the model count).

    Raises:
        ConfigError: a config breaks one of Triton's rules.
        ServerError: the server cannot start.
        ModelLoadError: one of ``models`` does not load.
    """
    if repo is None:
        yield None
        return
    with embedded_server(
        repo, models, hooks, skip_failed=skip_failed, load_timeout_s=load_timeout_s
    ) as server:
        yield server


def aimed_at(spec: LoadSpec, server: LocalTritonServer | None) -> LoadSpec:
    """``spec`` aimed at ``server``: its address for the protocol and its metrics (no server: unchanged)."""
    if server is None:
        return spec
    url = server.http_url if spec.protocol == "http" else server.grpc_url
    return replace(spec, address=ServerAddress.parse(url, spec.protocol, server.metrics_url))


def aimed_at_url(spec: LoadSpec, http_url: str) -> LoadSpec:
    """``spec`` aimed at the server whose HTTP address is ``http_url`` (gRPC: the port beside it)."""
    address = ServerAddress.parse(http_url, "http", spec.address.given_metrics_url)
    return replace(spec, address=address.beside(spec.protocol) if spec.protocol == "grpc" else address)
