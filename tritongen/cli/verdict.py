"""A workflow's :class:`~tritongen.workflows.verdict.Verdict` as the console says it, and its exit code."""

from __future__ import annotations

import typer

from tritongen.cli.console import err_console
from tritongen.workflows.verdict import Verdict


def finish(verdict: Verdict) -> None:
    """Say how the measurement ended and exit with its code; nothing when every gate passed.

    Called inside :func:`~tritongen.cli.boundary.user_errors`, which turns a failed gate's
    error into its one line.

    Raises:
        typer.Exit: interrupted (130) or the SLO missed (1).
        TritongenError: the gate that failed.
    """
    if verdict.interrupted:
        err_console.print("[bold red]interrupted:[/] partial results written", soft_wrap=True)
        raise typer.Exit(verdict.exit_code)
    for note in verdict.notes:
        err_console.print(note, highlight=False, markup=False, soft_wrap=True)
    if verdict.failure is not None:
        raise verdict.failure
    if verdict.slo_miss is not None:
        err_console.print(
            f"[bold red]SLO missed:[/] {verdict.slo_miss.text()}", soft_wrap=True, highlight=False
        )
        raise typer.Exit(verdict.exit_code)
