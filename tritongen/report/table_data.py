"""Tables as text cells (what the console, Markdown and HTML all show) and the cells' shared formats."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tritongen.loadtest.result import RunResult


@dataclass(frozen=True)
class TableData:
    """A table as text cells: what every output form shows."""

    title: str
    headers: tuple[str, ...]
    rows: list[tuple[str, ...]]
    right: tuple[bool, ...]
    """Per column: right-aligned (numbers)."""
    notes: list[str] = field(default_factory=list)
    styles: list[str | None] = field(default_factory=list)
    """Per row: ``good``, ``bad`` or ``None`` (colour in the console and HTML)."""


def number_cell(value: float | None, digits: int = 3) -> str:
    """A figure with ``digits`` significant digits, whole with thousands separators from 100 up."""
    if value is None:
        return "–"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:#.{digits}g}"


def ms_cell(us: float | None) -> str:
    """Microseconds shown in milliseconds with two decimals (``–`` when not measured)."""
    return f"{us / 1000:.2f}" if us is not None else "–"


def count_cell(value: Any) -> str:
    """A count with thousands separators (``–`` when not a number)."""
    return f"{int(value):,}" if isinstance(value, int | float) else "–"


def us_cell(value: Any) -> str:
    """Microseconds, whole, with thousands separators (``–`` when not a number)."""
    return f"{float(value):,.0f}" if isinstance(value, int | float) else "–"


def percentile_ms(figures: Mapping[str, float] | None, key: str) -> str:
    """One figure of a latency object (``p50`` … ``max``, µs) in ms (``–`` where it has none)."""
    return ms_cell(None if figures is None else figures.get(key))


def run_level(run: RunResult) -> str:
    """A run's level: ``c=8``, ``seq=4`` (sequences in flight) or ``500/s``."""
    if run.mode == "rate":
        return f"{run.target_rate:g}/s"
    if run.sequences_per_s is not None:  # a sequence model: N sequences in flight
        return f"seq={run.concurrency}"
    return f"c={run.concurrency}"


def run_label(run: RunResult, rounds: int) -> str:
    """A run's level, with its round where the levels were measured in several (``c=8 r2``)."""
    return run_level(run) + (f" r{run.round}" if rounds > 1 else "")


def run_style(run: RunResult) -> str | None:
    """``bad`` for a run with errors or that did not finish, else no style."""
    return "bad" if run.errors or run.status != "ok" else None


def to_markdown(table: TableData) -> str:
    """The table as GitHub-flavoured Markdown, its notes as a list below it."""

    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    lines = [f"**{cell(table.title)}**", ""]
    lines.append("| " + " | ".join(cell(h) for h in table.headers) + " |")
    lines.append("|" + "|".join("---:" if r else ":---" for r in table.right) + "|")
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in table.rows]
    if table.notes:
        lines.append("")
        lines += [f"- {cell(note)}" for note in table.notes]
    return "\n".join(lines) + "\n"


def to_rich(table: TableData) -> Any:
    """The table for a ``rich`` console, laid out so that no word is cut (cells wrap at spaces)."""
    from rich.table import Table
    from rich.text import Text

    from tritongen.report.table_layout import WholeWordTable

    out = Table(title=Text(table.title) if table.title else None)
    for header, right in zip(table.headers, table.right, strict=True):
        out.add_column(header, justify="right" if right else "left")
    colours = {"good": "bold green", "bad": "red", "muted": "dim"}
    for index, row in enumerate(table.rows):
        style = table.styles[index] if index < len(table.styles) else None
        out.add_row(*map(Text, row), style=colours.get(style or ""))  # cells are data, not markup
    return WholeWordTable(out)
