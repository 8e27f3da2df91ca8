"""Refuse to serve configs Triton would refuse: lint the models before a server is started on them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from tritongen.errors import ConfigError
from tritongen.lint.findings import Finding

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
    from tritongen.lint.repository import LintUsageError, lint_paths

    paths = [repo / m for m in models] if models else [repo]
    try:
        report = lint_paths([p for p in paths if p.exists()] or [repo])
    except LintUsageError:
        return  # nothing lint can read: the server reports what is wrong
    if on_finding is not None:
        for finding in report.findings:
            on_finding(finding)
    if report.errors:
        raise ConfigError(
            f"{len(report.errors)} config error(s) in {repo}: Triton would refuse these models", hint
        )
