"""Tables as text cells (what the console, Markdown and HTML all show) and the cells' shared formats."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


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


def run_level(run: dict[str, Any]) -> str:
    """A run's level: ``c=8``, ``seq=4`` (sequences in flight) or ``500/s``."""
    if run.get("mode") == "rate":
        return f"{run.get('target_rate'):g}/s"
    if run.get("sequences_per_s") is not None:  # a sequence model: N sequences in flight
        return f"seq={run.get('concurrency')}"
    return f"c={run.get('concurrency')}"


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
