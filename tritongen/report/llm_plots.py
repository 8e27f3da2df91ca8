"""Token-level plots of an LLM load test: TTFT and ITL, and output tokens/s, against the load.

One point per level (its concurrency, or its target rate): the median over the level's rounds
that finished, with a bar from the least to the most of those rounds where there are several.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tritongen.loadtest.result import LoadTestReport, RunResult, run_level
from tritongen.report.plots import _pyplot, _save

LATENCIES = (("ttft_us", "TTFT"), ("itl_us", "ITL"))
"""The token latencies plotted, each at P50 and P99."""


def is_llm_report(report: LoadTestReport) -> bool:
    """Whether any run measured tokens (its time to first token)."""
    return any(run.ttft_us for run in report.runs)


def plot_tokens(report: LoadTestReport, path: Path) -> Path:
    """Write :func:`tokens_figure` to ``path`` as PNG."""
    return _save(tokens_figure(report), path)


def _levels(report: LoadTestReport) -> list[tuple[float, list[RunResult]]]:
    """Each level (in first-seen order) with its runs that finished."""
    found: dict[float, list[RunResult]] = {}
    for run in report.runs:
        found.setdefault(run_level(run), [])
        if run.status == "ok":
            found[run_level(run)].append(run)
    return [(level, runs) for level, runs in found.items() if runs]


def _series(
    levels: list[tuple[float, list[RunResult]]], value: Callable[[RunResult], float | None]
) -> tuple[list[float], list[float], list[list[float]]]:
    """The levels with a value, each level's median, and its bars down to the least and up to the most."""
    xs, ys, low, high = [], [], [], []
    for level, runs in levels:
        values = [v for v in (value(run) for run in runs) if v is not None]
        if not values:
            continue
        median = statistics.median(values)
        xs.append(level)
        ys.append(median)
        low.append(median - min(values))
        high.append(max(values) - median)
    return xs, ys, [low, high]


def _percentile(key: str, pct: str) -> Callable[[RunResult], float | None]:
    def value(run: RunResult) -> float | None:
        figures = getattr(run, key) or {}
        found = figures.get(pct)
        return None if found is None else float(found) / 1000.0

    return value


def tokens_figure(report: LoadTestReport) -> Any:
    """Two panels against the load: TTFT and ITL (P50, P99, ms), and output tokens/s (in all)."""
    plt = _pyplot()
    levels = _levels(report)
    mode = next((run.mode for run in report.runs), "concurrency")
    fig, (latency, tokens) = plt.subplots(1, 2, figsize=(10, 4.2), dpi=120)
    for key, name in LATENCIES:
        for pct, style in (("p50", "o-"), ("p99", "s--")):
            xs, ys, bars = _series(levels, _percentile(key, pct))
            if xs:
                latency.errorbar(xs, ys, yerr=bars, fmt=style, capsize=3, label=f"{name} {pct.upper()}")
    xs, ys, bars = _series(levels, lambda run: run.output_tokens_per_s)
    if xs:
        tokens.errorbar(xs, ys, yerr=bars, fmt="o-", capsize=3, label="output tokens/s")
    goodput = _series(levels, lambda run: run.goodput_per_s)
    if goodput[0]:
        twin = tokens.twinx()
        twin.errorbar(*goodput[:2], yerr=goodput[2], fmt="^:", color="tab:green", capsize=3, label="goodput")
        twin.set_ylabel("requests / s within --slo")
    axis = "concurrency" if mode == "concurrency" else "request rate (/s)"
    rounds = f", median of {report.rounds} rounds (bars: least to most)" if report.rounds > 1 else ""
    for ax, title, unit in ((latency, "token latency", "ms"), (tokens, "output tokens / s", "tokens / s")):
        ax.set_xlabel(axis)
        ax.set_ylabel(unit)
        ax.set_title(f"{report.model}: {title}{rounds}", fontsize=9)
        ax.grid(True, alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    fig.tight_layout()
    return fig
