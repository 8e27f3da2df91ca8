"""How commands show a server starting: each lint finding on stderr, a spinner while it starts."""

from __future__ import annotations

from tritongen.cli.common import err_console
from tritongen.lint.findings import Finding
from tritongen.server.embedded import ServingHooks

FINDING_STYLES = {"error": "red", "warning": "yellow"}


def show_finding(finding: Finding) -> None:
    """One finding of the check before serving, on stderr, coloured by severity."""
    style = FINDING_STYLES.get(finding.severity, "cyan")
    err_console.print(finding.text(), style=style, soft_wrap=True, highlight=False, markup=False)


def serving_hooks() -> ServingHooks:
    """The findings shown on stderr, the wait for the server as a spinner there."""
    return ServingHooks(on_finding=show_finding, waiting=err_console.status)
