"""The CLI's two consoles, built in one place: in a pipe or a log nothing they print is cut.

In a terminal, rich decides as before (the terminal's width, or ``COLUMNS``). Where the
stream is not a terminal (a pipe, a file, a CI log):

- the width is ``COLUMNS`` when it is set to a whole number, else :data:`PIPE_WIDTH`;
- free text prints in full, one line per line of text: never cropped, never wrapped, never
  folded mid-word (rich's soft wrap), so a log keeps every word and ``grep`` finds whole lines;
- tables are laid out for that width with every column at least as wide as its longest
  word, cells wrapping at spaces, no ellipsis; a table whose longest words do not fit is
  printed wider than the width rather than cut.

Every ``Table`` printed on either console goes through that layout, in a terminal too
(where a table that cannot fit keeps rich's layout).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from typing import TextIO, TypeVar

from rich.console import Console, ConsoleRenderable, RenderHook
from rich.markup import escape
from rich.table import Table

from tritongen.report.table_layout import WholeWordTable

T = TypeVar("T")

PIPE_WIDTH = 120
"""Columns when the output is not a terminal and ``COLUMNS`` is not set: wide tables stay one line a row."""


def pipe_width(environ: Mapping[str, str]) -> int:
    """The width for output that is not a terminal: ``COLUMNS`` if it is a positive whole number."""
    columns = environ.get("COLUMNS", "").strip()
    return int(columns) if columns.isdigit() and int(columns) > 0 else PIPE_WIDTH


def is_terminal(stream: TextIO) -> bool:
    """Whether ``stream`` is a terminal (colour settings such as ``FORCE_COLOR`` do not make it one)."""
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # no isatty, or already closed
        return False


class _WholeWordTables(RenderHook):
    """Lays out every table printed on the console so that no word is cut (``report.table_layout``)."""

    def process_renderables(self, renderables: list[ConsoleRenderable]) -> list[ConsoleRenderable]:
        return [WholeWordTable(r) if isinstance(r, Table) else r for r in renderables]


def build_console(*, stderr: bool, environ: Mapping[str, str] = os.environ) -> Console:
    """A console on stdout or stderr following this module's rule for terminals and pipes."""
    terminal = is_terminal(sys.stderr if stderr else sys.stdout)
    built = Console(stderr=stderr, width=None if terminal else pipe_width(environ), soft_wrap=not terminal)
    built.push_render_hook(_WholeWordTables())
    return built


console = build_console(stderr=False)
err_console = build_console(stderr=True)


def say(text: str, *, err: bool = False) -> None:
    """One line of plain text, whole: no markup, no highlighting, never cut (on stderr with ``err``)."""
    (err_console if err else console).print(text, highlight=False, markup=False, soft_wrap=True)


def run_with_status(line: str, status: str, work: Callable[[Callable[[str], None]], T]) -> T:
    """Print ``line`` (what starts), then run ``work`` under a status line that its messages update."""
    console.print(line, highlight=False, soft_wrap=True)
    with console.status(status) as shown:
        return work(lambda text: shown.update(escape(text)))
