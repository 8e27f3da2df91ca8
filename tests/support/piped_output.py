"""Run the CLI with its output in pipes, and check that no text and no table cell in it was cut."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tritongen.report.table_data import TableData

WIDTHS = ("80", "200", None)
"""``COLUMNS`` for each piped run: narrow, wide, and unset (the pipe default)."""
TERMINAL_HINTS = ("COLUMNS", "LINES", "FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "TERMINAL_WIDTH")


@dataclass(frozen=True)
class Piped:
    """What a command printed with stdout and stderr pipes."""

    code: int
    stdout: str
    stderr: str


def run_piped(argv: Sequence[str | Path], columns: str | None, timeout_s: float = 120) -> Piped:
    """``python -m tritongen ARGV`` (``python -c ...`` if ARGV starts with ``-c``), ``COLUMNS`` as given."""
    env = {k: v for k, v in os.environ.items() if k not in TERMINAL_HINTS}
    if columns is not None:
        env["COLUMNS"] = columns
    args = [str(a) for a in argv]
    command = [sys.executable, *args] if args[:1] == ["-c"] else [sys.executable, "-m", "tritongen", *args]
    done = subprocess.run(
        command, stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env, timeout=timeout_s
    )
    return Piped(done.returncode, done.stdout, done.stderr)


def words(text: str) -> str:
    """``text`` with every run of white space as one space: how wrapped and unwrapped text compare."""
    return " ".join(text.split())


def assert_whole(text: str, output: str) -> None:
    """Every word of ``text`` is in ``output``, whole and in order (on one line or wrapped at spaces)."""
    if words(text) in words(output):
        return
    tokens = set(output.split())
    missing = [word for word in text.split() if word not in tokens]
    raise AssertionError(f"not whole in the output: {text!r}; words missing or cut: {missing}\n{output}")


@dataclass(frozen=True)
class DrawnTable:
    """A table as it was drawn: each column's header and cells, their fragments joined at spaces."""

    headers: list[str]
    columns: list[str]
    body_lines: int
    lines: list[str]


def drawn_tables(output: str) -> list[DrawnTable]:
    """The box-drawn tables in ``output`` (rich's default box: ``┃`` in the header, ``│`` in the body)."""
    tables: list[DrawnTable] = []
    block: list[str] | None = None
    for line in output.splitlines():
        if line.startswith("┏"):
            block = []
        if block is None:
            continue
        block.append(line)
        if line.startswith("└"):
            tables.append(_parse(block))
            block = None
    return tables


def _parse(block: list[str]) -> DrawnTable:
    header = [line.split("┃")[1:-1] for line in block if line.startswith("┃")]
    body = [line.split("│")[1:-1] for line in block if line.startswith("│")]
    assert header and all(len(parts) == len(header[0]) for parts in header + body), "\n".join(block)
    count = len(header[0])
    return DrawnTable(
        headers=[words(" ".join(parts[j] for parts in header)) for j in range(count)],
        columns=[words(" ".join(parts[j] for parts in body)) for j in range(count)],
        body_lines=len(body),
        lines=block,
    )


def assert_table_whole(table: TableData, output: str, *, one_line_rows: bool = False) -> DrawnTable:
    """``table`` is drawn in ``output`` with every header and cell complete: no word cut, no ellipsis.

    Cells wrap only at spaces, so joining each column's fragments gives its cells back, in
    order. With ``one_line_rows`` every row takes one line.
    """
    expected = [words(h) for h in table.headers]
    found = [drawn for drawn in drawn_tables(output) if drawn.headers == expected]
    assert len(found) == 1, f"table {table.title!r} with headers {expected} not drawn whole in:\n{output}"
    drawn = found[0]
    shown = "\n".join(drawn.lines)
    assert "…" not in shown, shown
    for index, header in enumerate(expected):
        cells = words(" ".join(row[index] for row in table.rows))
        assert drawn.columns[index] == cells, f"column {header!r} cut: {drawn.columns[index]!r}\n{shown}"
    if one_line_rows:
        assert drawn.body_lines == len(table.rows), f"rows wrapped though they fit:\n{shown}"
    assert_whole(table.title, output)
    return drawn
