"""A model's load, prepared once: its kind, its requests, and what every level of it shares."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tritongen.client.endpoint import TritonEndpoint
from tritongen.loadtest.kinds.base import LoadKind, Requests
from tritongen.loadtest.kinds.registry import resolve_kind
from tritongen.loadtest.spec import LoadSpec
from tritongen.metrics.prometheus import MetricsSampler

if TYPE_CHECKING:
    from tritongen.loadtest.server_trace import ServerTrace
    from tritongen.loadtest.wire.check import WireCheck


@dataclass(frozen=True)
class LoadTest:
    """One model's load, prepared: what every level (and round) of it shares."""

    spec: LoadSpec
    kind: LoadKind
    requests: Requests
    endpoint: TritonEndpoint
    sampler: MetricsSampler
    """The metrics endpoint's sampler, running for as long as the test."""
    workdir: Path
    """Where its runs write their windows and logs."""
    server_pid: int | None = None
    """The server's process when it runs on this machine (its tree's CPU is the run's own)."""
    trace: ServerTrace | None = None
    """``--server-trace``: the trace its runs' requests are joined to (None: no trace)."""
    wire: WireCheck | None = None
    """``--wire``: the capture its runs' requests are checked against (None: none)."""

    @property
    def id_tag(self) -> str:
        """The tag of its requests' ids (``--server-trace``, ``--wire``: one tag); empty: no ids."""
        return self.trace.tag if self.trace is not None else self.wire.tag if self.wire is not None else ""


def prepare_requests(spec: LoadSpec, endpoint: TritonEndpoint, folder: Path) -> tuple[LoadKind, Requests]:
    """The load's kind (``spec.kind``, or the one its options and the model call for) and its requests.

    The model's config is read once, when a kind first asks for it; the requests are written
    in ``folder``.

    Raises:
        ConfigError: the load does not fit the model (its batch size, scheduler or inputs).
        SourceError: a data file is unreadable, or its data does not fit the model.
        ServerError: the server or the model cannot be reached.
    """

    @functools.cache
    def config() -> dict[str, Any]:
        return endpoint.model_config(spec.model)

    kind = resolve_kind(spec, config)
    return kind, kind.prepare(spec, endpoint, config, folder)


def prepare_test(
    spec: LoadSpec,
    endpoint: TritonEndpoint,
    workdir: Path,
    server_pid: int | None = None,
    sampler: MetricsSampler | None = None,
) -> LoadTest:
    """``spec``'s load, prepared in ``workdir``, with ``sampler`` (None: its kind's; not started).

    Raises:
        TritongenError: the load does not fit the model, or the server cannot be reached.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    kind, requests = prepare_requests(spec, endpoint, workdir)
    sampler = sampler if sampler is not None else kind.sampler(spec, server_pid)
    return LoadTest(spec, kind, requests, endpoint, sampler, workdir, server_pid)
