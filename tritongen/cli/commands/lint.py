"""``tritongen lint``: Triton's model-configuration rules, before the server ever sees the repository."""

from __future__ import annotations

import json
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from tritongen.cli.console import console, err_console
from tritongen.cli.options.groups import reworded
from tritongen.cli.options.shared import SloP99
from tritongen.lint.findings import LintReport
from tritongen.lint.repository import LintUsageError, lint_paths

EXIT_FINDINGS = 1
EXIT_USAGE = 2
SEVERITY_STYLES = {"error": "red", "warning": "yellow", "info": "cyan"}


class FormatChoice(str, Enum):
    """Output format."""

    text = "text"
    json = "json"


def lint_command(
    paths: Annotated[
        list[Path],
        typer.Argument(help="Repositories, model directories or config.pbtxt files.", show_default=False),
    ],
    output_format: Annotated[
        FormatChoice, typer.Option("--format", help="text or json.")
    ] = FormatChoice.text,
    slo_p99_ms: Annotated[
        float | None, reworded(SloP99, "Warn when a queue delay takes more than half this budget.")
    ] = None,
    strict: Annotated[bool, typer.Option("--strict", help="Exit 1 on warnings too.")] = False,
) -> None:
    """Check configs with Triton's own rules: exit 0 clean, 1 errors, 2 unusable arguments."""
    try:
        report = lint_paths(paths, slo_p99_ms)
    except LintUsageError as e:
        hint = "Pass a repository, a model directory or a config.pbtxt."
        err_console.print(f"[bold red]error:[/] {escape(str(e))}. {hint}", soft_wrap=True, highlight=False)
        raise typer.Exit(EXIT_USAGE) from e
    if output_format is FormatChoice.json:
        typer.echo(json.dumps(report.to_json(), indent=2))
    else:
        print_findings(report)
    if report.errors or (strict and report.warnings):
        raise typer.Exit(EXIT_FINDINGS)


def print_findings(report: LintReport) -> None:
    """One line per finding, then a summary line."""
    for finding in report.findings:
        colour = SEVERITY_STYLES.get(finding.severity, "yellow")
        console.print(finding.text(), style=colour, soft_wrap=True, highlight=False, markup=False)
    verdict = (
        "clean"
        if not report.errors and not report.warnings
        else f"{len(report.errors)} error(s), {len(report.warnings)} warning(s)"
    )
    if report.notes:
        verdict += f" ({len(report.notes)} note(s))"
    console.print(f"{len(report.models)} model(s) checked: {verdict}", highlight=False)
