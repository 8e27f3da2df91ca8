"""Progress on stderr while a load runs: one live line, rewritten as each run's figures come in."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from rich.live import Live
from rich.text import Text

from tritongen.cli.console import err_console
from tritongen.loadtest.runner import Progress

ProgressShown = Callable[[Progress], None]


@contextlib.contextmanager
def live_line(text: Callable[[Progress], str]) -> Iterator[ProgressShown]:
    """A transient line on stderr for the block; the callback given rewrites it with ``text(progress)``."""
    line = Text("starting")

    def show(progress: Progress) -> None:
        line.plain = text(progress)

    with Live(line, console=err_console, refresh_per_second=4, transient=True):
        yield show


def figures_text(progress: Progress) -> str:
    """``warm-up 3/10 s  1,234 req/s  P99 4.20 ms``: a run's phase, time and live figures."""
    qps = f"{progress.qps:,.0f} req/s" if progress.qps is not None else "…"
    p99 = f"P99 {progress.p99_us / 1000:.2f} ms" if progress.p99_us is not None else ""
    return f"{progress.phase} {progress.measured_s:.0f}/{progress.target_s:.0f} s  {qps}  {p99}"


def run_text(progress: Progress) -> str:
    """A load test's line: the level, :func:`figures_text`, the errors and whether it is stable yet."""
    stable = "stable" if progress.stable else "settling"
    return f"{progress.label}: {figures_text(progress)}  errors {progress.errors}  {stable}"


def sweep_text(progress: Progress) -> str:
    """perf-analyzer's line: the level, its phase, the seconds measured and the requests/s."""
    qps = f"{progress.qps:,.0f} req/s" if progress.qps is not None else "…"
    return f"{progress.label}: {progress.phase} {progress.measured_s:.0f} s  {qps}"
