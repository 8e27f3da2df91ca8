"""``tritongen example``: write one of the small built-in ONNX models."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tritongen.cli.common import console, user_errors
from tritongen.examples.models import EXAMPLES, write_example


def example_command(
    name: Annotated[str, typer.Argument(help=f"Example model: {', '.join(EXAMPLES)}.")],
    output: Annotated[
        Path | None,
        typer.Option("-o", "--output", help="Where to write it (default NAME.onnx).", show_default=False),
    ] = None,
) -> None:
    """Write a small example ONNX model built in code (nothing is downloaded)."""
    with user_errors():
        path = write_example(name, output or Path(f"{name}.onnx"))
    console.print(f"wrote {path}", highlight=False)
