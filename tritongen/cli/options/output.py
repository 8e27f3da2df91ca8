"""Where commands write their results: declared once, each command picks the files it writes."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

OutputPath = Annotated[Path, typer.Option("-o", "--output", help="Where to write what the command makes.")]
"""The one file or directory a command makes (each command says what it is, with :func:`reworded`)."""


@dataclass(frozen=True)
class OutputFlags:
    """Result files besides the console (each command offers those it writes)."""

    json_path: Annotated[Path | None, typer.Option("--json", help="Write the results as JSON.")] = None
    html_path: Annotated[
        Path | None,
        typer.Option("--html", help="Write a self-contained HTML report of the results."),
    ] = None
    plot_path: Annotated[Path | None, typer.Option("--plot", help="Write a plot of the results (PNG).")] = (
        None
    )
    csv_path: Annotated[Path | None, typer.Option("--csv", help="Write results as CSV.")] = None
    markdown_path: Annotated[Path | None, typer.Option("--markdown", help="Write the table as Markdown.")] = (
        None
    )
