"""How commands show a server starting: each lint finding on stderr, a spinner while it starts."""

from __future__ import annotations

from rich.markup import escape

from tritongen.cli.console import err_console
from tritongen.lint.findings import Finding
from tritongen.server.embedded import ServingHooks

FINDING_STYLES = {"error": "red", "warning": "yellow"}


def show_finding(finding: Finding) -> None:
    """One finding of the check before serving, on stderr, coloured by severity."""
    style = FINDING_STYLES.get(finding.severity, "cyan")
    err_console.print(finding.text(), style=style, soft_wrap=True, highlight=False, markup=False)


def show_left_out(name: str, reason: str) -> None:
    """One line for a model ``--skip-failed`` left out: its name and the first line of why."""
    err_console.print(
        f"[yellow]left out {escape(name)}:[/] {escape(reason)}", soft_wrap=True, highlight=False
    )


def serving_hooks() -> ServingHooks:
    """The findings shown on stderr, the wait for the server as a spinner there, models left out."""
    return ServingHooks(on_finding=show_finding, waiting=err_console.status, on_left_out=show_left_out)
