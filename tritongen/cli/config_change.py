"""How a planned change to a config.pbtxt is shown: the ``--diff`` option and the unified diff it prints."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from tritongen.cli.console import say
from tritongen.pipeline.rerender import Rerender

ShowDiff = Annotated[
    bool,
    typer.Option("--diff", help="Print the change to config.pbtxt as a unified diff and write nothing."),
]


def show_diff(plan: Rerender) -> None:
    """The planned change as a unified diff on stdout, and one line on stderr saying what it is."""
    sys.stdout.write(plan.diff())
    sys.stdout.flush()
    if plan.changed:
        say(f"not written (--diff): {'; '.join(plan.changes) or 'layout only'}", err=True)
    else:
        say(plan.summary(), err=True)
