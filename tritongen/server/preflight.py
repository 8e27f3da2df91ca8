"""Refuse to serve configs Triton would refuse: lint the models before a server is started on them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from tritongen.errors import ConfigError
from tritongen.lint.findings import Finding

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
