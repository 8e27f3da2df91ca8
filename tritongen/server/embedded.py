"""The embedded server for one command: just the models it needs, on free ports, linted first.

Configs Triton would refuse are refused before a server starts on them
(:func:`lint_before_serving`), or with ``skip_failed`` left out (:func:`models_that_lint`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tritongen.errors import ConfigError, ModelLoadError
from tritongen.lint.findings import Finding
from tritongen.server.local import LocalTritonServer

if TYPE_CHECKING:
    from tritongen.lint.findings import LintReport

FindingShown = Callable[[Finding], None]
"""Told each finding of the check (errors, warnings and notes), before a refusal is raised."""

DEFAULT_HINT = "fix them (see above)"


def lint_before_serving(
    repo: Path, models: Sequence[str], hint: str = DEFAULT_HINT, on_finding: FindingShown | None = None
) -> None:
    """Lint ``models`` of ``repo`` (the whole repository when none are named); refuse any error.

    A config Triton would refuse (or, like a Python model without ``model.py``, never finish
    loading) stops the start with one line; each finding goes to ``on_finding`` first.
    Nothing lint can read is left for the server to report.

    Raises:
        ConfigError: a config breaks one of Triton's rules.
    """
    report = _lint(repo, models, on_finding)
    if report is not None and report.errors:
        raise ConfigError(
            f"{len(report.errors)} config error(s) in {repo}: Triton would refuse these models", hint
        )


def models_that_lint(
    repo: Path, models: Sequence[str], on_finding: FindingShown | None = None
) -> tuple[list[str], dict[str, str]]:
    """``models`` of ``repo`` (all of them when none are named), split by lint: to serve, or left out.

    Returns:
        The models without a config error (empty when lint can read nothing: the server
        then loads what it finds), and each model with errors with its first one.

    Raises:
        ConfigError: every model has a config error (nothing would be served).
    """
    report = _lint(repo, models, on_finding)
    if report is None:
        return list(models), {}
    refused: dict[str, str] = {}
    for finding in report.errors:
        refused.setdefault(finding.model, f"{finding.message} (lint: {finding.rule})")
    named = list(models) or report.models
    kept = [m for m in named if m not in refused]
    if named and not kept:
        raise ConfigError(f"every model of {repo} has config errors: nothing would be served", DEFAULT_HINT)
    return kept, refused


def _lint(repo: Path, models: Sequence[str], on_finding: FindingShown | None) -> LintReport | None:
    """Lint the models (each finding told to ``on_finding``); ``None`` when there is nothing lint can read."""
    from tritongen.lint.repository import LintUsageError, lint_paths

    paths = [repo / m for m in models] if models else [repo]
    try:
        report = lint_paths([p for p in paths if p.exists()] or [repo])
    except LintUsageError:
        return None  # the server reports what is wrong
    if on_finding is not None:
        for finding in report.findings:
            on_finding(finding)
    return report


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
    repo: Path,
    models: Sequence[str],
    hooks: ServingHooks | None = None,
    skip_failed: bool = False,
    load_timeout_s: float | None = None,
) -> Iterator[LocalTritonServer]:
    """The embedded server with just ``models`` of ``repo``, on free ports, stopped on exit.

    The models' configs are linted first (:func:`~tritongen.server.preflight.lint_before_serving`).
    With ``skip_failed`` the whole repository is served instead, less the models that fail lint
    or do not load (each told to ``hooks.on_left_out``); ``models`` must still load.
    ``load_timeout_s`` bounds the start and its loads (None: derived from the model count).

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
            load_timeout_s=load_timeout_s,
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
