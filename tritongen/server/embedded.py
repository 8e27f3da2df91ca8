"""The embedded server for one command: just the models it needs, on free ports, linted first."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

from tritongen.errors import ModelLoadError
from tritongen.server.local import LocalTritonServer
from tritongen.server.preflight import FindingShown, lint_before_serving, models_that_lint

Waiting = Callable[[str], AbstractContextManager[object]]
"""Entered around a wait that takes a while (the server starting), with what is awaited."""
LeftOut = Callable[[str, str], None]
"""Told each model a ``skip_failed`` server left out, with why (lint's first error or the server's)."""


@dataclass(frozen=True)
class ServingHooks:
    """Whom starting a server tells: each lint finding, and the wait for the server (both optional)."""

    on_finding: FindingShown | None = None
    waiting: Waiting | None = None
    on_left_out: LeftOut | None = None

    def wait(self, what: str) -> AbstractContextManager[object]:
        """The ``waiting`` context for ``what``, or one that does nothing."""
        return self.waiting(what) if self.waiting is not None else contextlib.nullcontext()


@contextlib.contextmanager
def embedded_server(
    repo: Path, models: Sequence[str], hooks: ServingHooks | None = None, skip_failed: bool = False
) -> Iterator[LocalTritonServer]:
    """The embedded server with just ``models`` of ``repo``, on free ports, stopped on exit.

    The models' configs are linted first (:func:`~tritongen.server.preflight.lint_before_serving`).
    With ``skip_failed`` the whole repository is served instead, less the models that fail lint
    or do not load (each told to ``hooks.on_left_out``); ``models`` must still load.

    Raises:
        ConfigError: a config breaks one of Triton's rules.
        ServerError: the server cannot start.
        ModelLoadError: a model (of ``models``, with ``skip_failed``) does not load.
    """
    hooks = hooks or ServingHooks()
    lint_before_serving(repo, models, on_finding=hooks.on_finding)
    served, refused = models_that_lint(repo, [], on_finding=None) if skip_failed else (list(models), {})
    with hooks.wait("starting the embedded Triton server"):
        server = LocalTritonServer(
            repo,
            http_port=0,
            grpc_port=0,
            metrics_port=0,
            models=served or None,
            require_all_models=not skip_failed,
        )
        server.start()
    try:
        _left_out(server, models, refused, hooks)
        yield server
    finally:
        server.stop()


def _left_out(
    server: LocalTritonServer, needed: Sequence[str], refused: dict[str, str], hooks: ServingHooks
) -> None:
    """Tell each model left out; refuse when one of ``needed`` is among them.

    Raises:
        ModelLoadError: a needed model did not load.
    """
    failures = {**refused, **server.load_failures}
    missing = {name: failures[name] for name in needed if name in failures}
    if missing:
        raise ModelLoadError(missing, "the models under load must load: fix them (see the server log)")
    for name, reason in sorted(failures.items()):
        if hooks.on_left_out is not None:
            hooks.on_left_out(name, (reason.strip().splitlines() or ["did not load"])[0])
