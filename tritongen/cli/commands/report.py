"""``tritongen report``: one self-contained HTML page from convert, loadtest, tune and compare results."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tritongen.cli.boundary import user_errors
from tritongen.cli.console import console
from tritongen.cli.options.groups import reworded
from tritongen.cli.options.output import OutputPath
from tritongen.cli.options.shared import Templates


def report_command(
    results: Annotated[
        list[Path],
        typer.Argument(
            help="JSON written by convert, loadtest, tune or compare (--json); one section each.",
            show_default=False,
        ),
    ],
    output: Annotated[Path, reworded(OutputPath, "The HTML file to write.")] = Path("report.html"),
    templates: Templates = None,
) -> None:
    """Write RESULTS as one HTML page: tables and plots, no external assets (opens offline)."""
    with user_errors():
        from tritongen.report.html import write_report

        path = write_report(results, output, templates)
    console.print(f"wrote {path} ({path.stat().st_size / 1024:,.0f} KiB)", highlight=False, markup=False)
