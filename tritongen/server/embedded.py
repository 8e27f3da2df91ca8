"""The embedded server for one command: just the models it needs, on free ports, linted first."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

from tritongen.server.local import LocalTritonServer
from tritongen.server.preflight import FindingShown, lint_before_serving

Waiting = Callable[[str], AbstractContextManager[object]]
"""Entered around a wait that takes a while (the server starting), with what is awaited."""


@dataclass(frozen=True)
class ServingHooks:
    """Whom starting a server tells: each lint finding, and the wait for the server (both optional)."""

    on_finding: FindingShown | None = None
    waiting: Waiting | None = None

    def wait(self, what: str) -> AbstractContextManager[object]:
        """The ``waiting`` context for ``what``, or one that does nothing."""
        return self.waiting(what) if self.waiting is not None else contextlib.nullcontext()


@contextlib.contextmanager
def embedded_server(
    repo: Path, models: Sequence[str], hooks: ServingHooks | None = None
) -> Iterator[LocalTritonServer]:
    """The embedded server with just ``models`` of ``repo``, on free ports, stopped on exit.

    The models' configs are linted first (:func:`~tritongen.server.preflight.lint_before_serving`).

    Raises:
        ConfigError: a config breaks one of Triton's rules.
        ServerError: the server cannot start.
        ModelLoadError: a model does not load.
    """
    hooks = hooks or ServingHooks()
    lint_before_serving(repo, models, on_finding=hooks.on_finding)
    with hooks.wait("starting the embedded Triton server"):
        server = LocalTritonServer(repo, http_port=0, grpc_port=0, metrics_port=0, models=list(models))
        server.start()
    try:
        yield server
    finally:
        server.stop()
