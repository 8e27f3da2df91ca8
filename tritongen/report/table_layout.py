"""Rich tables laid out so that no word is cut: every column at least as wide as its longest word.

Rich shrinks the widest columns evenly when a table does not fit, below their longest word,
and then crops or ellipsises cells (``CPUExecu…``). Here each column gets at least its
longest word (header included), the spare width goes first to the columns that need little
to fit on one line, and cells wrap at spaces. Where the longest words do not fit, the cells
lose their padding; where they still do not fit, the table is drawn wider than the console
if the console prints lines in full (a pipe, a log), and with rich's own layout if it crops
(a terminal).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence

from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.measure import Measurement
from rich.table import Column, Table

WIDE = 100_000
"""A width no table reaches: measuring at it gives a cell's full, unwrapped width."""


def spread(minimums: Sequence[int], maximums: Sequence[int], room: int) -> list[int]:
    """Content widths of the columns in ``room`` cells: each at least its minimum, at most its maximum.

    Every column gets the same extra width over its minimum, capped at what it needs to fit
    on one line (so short columns fit whole and long ones share the rest). Where even the
    minimums do not fit, the minimums (the table is then wider than ``room``).
    """
    wanted = [max(high - low, 0) for low, high in zip(minimums, maximums, strict=True)]
    spare = room - sum(minimums)
    if spare >= sum(wanted):
        return [low + want for low, want in zip(minimums, wanted, strict=True)]
    if spare <= 0:
        return list(minimums)
    low_level, high_level = 0, max(wanted)
    while low_level < high_level:  # the largest equal extra that fits
        level = (low_level + high_level + 1) // 2
        if sum(min(want, level) for want in wanted) <= spare:
            low_level = level
        else:
            high_level = level - 1
    extra = [min(want, low_level) for want in wanted]
    left = spare - sum(extra)
    for index in sorted(range(len(wanted)), key=lambda i: extra[i] - wanted[i]):
        if left == 0:
            break
        if extra[index] < wanted[index]:
            extra[index] += 1
            left -= 1
    return [low + more for low, more in zip(minimums, extra, strict=True)]


class WholeWordTable:
    """A rich ``Table`` drawn with column widths from :func:`spread`: cells wrap at spaces, never cut."""

    def __init__(self, table: Table) -> None:
        self.table = table

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        # A console that prints text unwrapped (soft wrap) still wraps and centres the title.
        yield from console.render(
            self.laid_out(console, options), options.update(no_wrap=False, overflow="fold")
        )

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement.get(console, options, self.laid_out(console, options))

    def laid_out(self, console: Console, options: ConsoleOptions) -> Table:
        """A copy of the table with a fixed width per column, for the width ``options`` give.

        Where the longest words do not fit, the cells lose their padding; where they still do
        not fit, a console that prints lines in full gets that table wider than its width
        (each column its longest word), and one that crops (a terminal) gets rich's layout.
        """
        table = self.table
        if not table.columns:
            return table
        wide = options.update_width(WIDE)
        ranges = [_content_range(console, wide, table, column) for column in table.columns]
        minimums, maximums = [r.minimum for r in ranges], [r.maximum for r in ranges]
        available = table.width or options.max_width
        tight = copy.copy(table)
        tight.padding = (0, 0)
        for candidate in (table, tight):
            overhead = _overhead(console, wide, candidate)
            widths = spread(minimums, maximums, available - overhead)
            if sum(widths) + overhead <= available:
                return _with_widths(candidate, widths, width=table.width, console=console, wide=wide)
        if not console.soft_wrap:
            return table  # a console that crops: rich's layout (it ellipsises rather than loses columns)
        width = sum(minimums) + _overhead(console, wide, tight)
        return _with_widths(tight, minimums, width=width, console=console, wide=wide)


def _with_widths(
    table: Table, widths: list[int], *, width: int | None, console: Console, wide: ConsoleOptions
) -> Table:
    """A copy of ``table`` whose columns have ``widths`` and whose title wraps at spaces."""
    laid = copy.copy(table)
    laid.columns = [_fixed(column, size) for column, size in zip(table.columns, widths, strict=True)]
    laid.width = width
    laid.min_width = max(table.min_width or 0, _longest_word(console, wide, table.title)) or None
    return laid


def _cells(table: Table, column: Column) -> Iterable[RenderableType]:
    """What a column shows: its header and footer where the table shows them, and its cells."""
    if table.show_header:
        yield column.header
    if table.show_footer:
        yield column.footer
    yield from column.cells


def _content_range(console: Console, wide: ConsoleOptions, table: Table, column: Column) -> Measurement:
    """A column's longest word (the narrowest it may be) and its longest cell (one line each)."""
    found = [Measurement.get(console, wide, cell) for cell in _cells(table, column)]
    return Measurement(
        max((m.minimum for m in found), default=1) or 1, max((m.maximum for m in found), default=1) or 1
    )


def _longest_word(console: Console, wide: ConsoleOptions, title: RenderableType | None) -> int:
    """The title's longest word: the table is at least that wide, so the title wraps at spaces."""
    return 0 if title is None else Measurement.get(console, wide, title).minimum


def _overhead(console: Console, wide: ConsoleOptions, table: Table) -> int:
    """The width the table adds to its cells' content: padding and borders, as rich draws them."""
    probe = copy.copy(table)
    probe.columns = [_fixed(column, 1) for column in table.columns]
    probe.width = probe.min_width = None
    return Measurement.get(console, wide, probe).maximum - len(table.columns)


def _fixed(column: Column, width: int) -> Column:
    """A copy of ``column`` ``width`` cells wide whose cells wrap at spaces."""
    fixed = copy.copy(column)
    fixed.width, fixed.min_width, fixed.max_width = width, None, None
    fixed.no_wrap = False
    return fixed
