"""PNG plots of results (matplotlib, imported only when a plot is asked for)."""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tritongen.compare.result import CompareReport
from tritongen.errors import RepositoryError
from tritongen.loadtest.result import LoadTestReport
from tritongen.tune.document import TuneDocument

TunePoint = tuple[str, float, float, bool, bool]
"""(label, infer_per_s, p99_ms, feasible, on_front) of one measured trial."""


@dataclass(frozen=True)
class ConfirmedPoint:
    """A config confirmed in rounds: medians and interval bounds of throughput and P99 (ms)."""

    label: str
    infer_per_s: float
    infer_low: float | None
    infer_high: float | None
    p99_ms: float
    p99_low: float | None
    p99_high: float | None
    current: bool
    best: bool


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_latency_vs_throughput(report: LoadTestReport, path: Path, slo_p99_ms: float | None = None) -> Path:
    """Plot P50/P99 latency against inferences/s, one point per run, levels annotated."""
    return _save(latency_figure(report, slo_p99_ms), path)


def latency_figure(report: LoadTestReport, slo_p99_ms: float | None = None) -> Any:
    """The latency-vs-throughput figure of a load test."""
    plt = _pyplot()
    runs = [r for r in report.runs if r.latency_us]
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=120)
    if report.rounds > 1:
        _level_intervals(ax, report, slo_p99_ms)
        return fig
    for key, style in (("p50", "o-"), ("p99", "s-")):
        xs = [r.infer_per_s for r in runs]
        ys = [r.latency_us[key] / 1000 for r in runs if r.latency_us]
        ax.plot(xs, ys, style, label=key.upper())
    for run in runs:
        if run.latency_us:
            label = f"c={run.concurrency}" if run.mode == "concurrency" else f"{run.target_rate:g}/s"
            ax.annotate(
                label,
                (run.infer_per_s, run.latency_us["p99"] / 1000),
                textcoords="offset points",
                xytext=(4, 4),
                fontsize=8,
            )
    _latency_axes(ax, f"{report.model} ({report.protocol})", slo_p99_ms)
    return fig


def tune_points(document: TuneDocument) -> tuple[list[TunePoint], tuple[float, float] | None]:
    """The measured trials of a tune, and its current config's measurement (infer/s, P99 ms)."""
    front = set(document.front)
    points = [
        (t.key, t.infer_per_s, t.p99_us / 1000, t.feasible, t.key in front)
        for t in document.trials
        if t.p99_us is not None
    ]
    base = document.baseline
    reference = None
    if base is not None and base.p99_us is not None:
        reference = (float(base.infer_per_s), float(base.p99_us) / 1000)
    return points, reference


def confirmed_points(document: TuneDocument) -> list[ConfirmedPoint]:
    """The contenders of a tune's confirmation (none for ``tritongen.tune/1``)."""
    confirmed = {} if document.confirmation is None else document.confirmation.contenders
    best = None if document.best is None else document.best.key
    points = []
    for key, entry in confirmed.items():
        infer, p99 = entry.infer_per_s, entry.p99_us
        if infer is None or p99 is None:
            continue

        def ms(value: float | None) -> float | None:
            return None if value is None else float(value) / 1000

        points.append(
            ConfirmedPoint(
                label=key,
                infer_per_s=infer.median,
                infer_low=infer.low,
                infer_high=infer.high,
                p99_ms=p99.median / 1000,
                p99_low=ms(p99.low),
                p99_high=ms(p99.high),
                current=entry.current,
                best=key == best,
            )
        )
    return points


def plot_tune(
    points: list[TunePoint],
    path: Path,
    title: str,
    slo_p99_ms: float | None,
    baseline: tuple[float, float] | None = None,
    confirmed: list[ConfirmedPoint] | None = None,
) -> Path:
    """Plot each trial's throughput against its P99 (see :func:`tune_figure`) into ``path``."""
    return _save(tune_figure(points, title, slo_p99_ms, baseline, confirmed), path)


def tune_figure(
    points: list[TunePoint],
    title: str,
    slo_p99_ms: float | None,
    baseline: tuple[float, float] | None = None,
    confirmed: list[ConfirmedPoint] | None = None,
) -> Any:
    """Each trial's throughput against its P99: feasible region shaded, the front joined.

    ``baseline``: (infer_per_s, p99_ms) of the current config's search measurement, drawn
    as a star. ``confirmed``: the configs measured in rounds, at their medians with error
    bars spanning their confidence intervals (the current config in grey, the best in green).
    """
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=120)
    if slo_p99_ms is not None:
        ax.axhspan(0, slo_p99_ms, color="green", alpha=0.08, label=f"feasible (P99 ≤ {slo_p99_ms:g} ms)")
        ax.axhline(slo_p99_ms, color="red", linestyle="--", linewidth=1)
    for ok, marker, name in ((True, "o", "feasible"), (False, "x", "over the SLO")):
        chosen = [p for p in points if p[3] is ok]
        if chosen:
            ax.scatter([p[1] for p in chosen], [p[2] for p in chosen], marker=marker, label=name)
    if baseline is not None:
        ax.scatter([baseline[0]], [baseline[1]], marker="*", s=120, color="grey", label="current config")
    _confirmed_bars(ax, confirmed or [])
    front = sorted((p for p in points if p[4]), key=lambda p: p[2])
    if front:
        ax.plot([p[1] for p in front], [p[2] for p in front], "-", color="black", linewidth=1, label="front")
        for label, x, y, _, _ in front:
            ax.annotate(label, (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7)
    ax.set_xlabel("inferences / s")
    ax.set_ylabel("P99 latency (ms)")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def _confirmed_bars(ax: Any, confirmed: list[ConfirmedPoint]) -> None:
    """Each confirmed config at its medians, error bars over its intervals, one legend entry per kind."""
    labelled: set[str] = set()
    for c in confirmed:
        colour = "grey" if c.current else "green" if c.best else "tab:purple"
        label = "current config, in rounds" if c.current else "confirmed in rounds"
        ax.errorbar(
            [c.infer_per_s],
            [c.p99_ms],
            xerr=_point_bar(c.infer_per_s, c.infer_low, c.infer_high),
            yerr=_point_bar(c.p99_ms, c.p99_low, c.p99_high),
            fmt="D",
            color=colour,
            markersize=5,
            capsize=3,
            label=None if label in labelled else f"{label} (interval)",
        )
        labelled.add(label)
        ax.annotate(
            c.label, (c.infer_per_s, c.p99_ms), textcoords="offset points", xytext=(4, -10), fontsize=7
        )


def _point_bar(median: float, low: float | None, high: float | None) -> list[list[float]] | None:
    """One point's error bar, ``[[below], [above]]`` the median; ``None`` without an interval."""
    if low is None or high is None:
        return None
    return [[max(median - low, 0.0)], [max(high - median, 0.0)]]


def _level_intervals(ax: Any, report: LoadTestReport, slo_p99_ms: float | None) -> None:
    """Per level, the median P50/P99 against the median throughput, both with their intervals."""
    levels = [level for level in report.levels() if level.infer_per_s is not None and level.latency_us]
    for key, style in (("p50", "o-"), ("p99", "s-")):
        points = [
            (level.infer_per_s, found)
            for level in levels
            if level.infer_per_s is not None and (found := level.latency_us.get(key)) is not None
        ]
        xs = [throughput.median for throughput, _ in points]
        ys = [s.median / 1000 for _, s in points]
        xerr = [_bar(throughput, 1.0) for throughput, _ in points]
        yerr = [_bar(s, 1000.0) for _, s in points]
        ax.errorbar(xs, ys, xerr=list(zip(*xerr, strict=True)) if xerr else None,
                    yerr=list(zip(*yerr, strict=True)) if yerr else None, fmt=style, capsize=3,
                    label=f"{key.upper()} (median, {report.confidence:.0%} interval)")  # fmt: skip
    for level in levels:
        p99 = level.latency_us.get("p99")
        if level.infer_per_s is not None and p99 is not None:
            label = f"c={level.level:g}" if level.mode == "concurrency" else f"{level.level:g}/s"
            ax.annotate(label, (level.infer_per_s.median, p99.median / 1000), textcoords="offset points",
                        xytext=(4, 4), fontsize=8)  # fmt: skip
    _latency_axes(ax, f"{report.model} ({report.protocol}), {report.rounds} rounds per level", slo_p99_ms)


def _latency_axes(ax: Any, title: str, slo_p99_ms: float | None) -> None:
    """Labels, SLO line, grid and legend of a latency-against-throughput plot."""
    if slo_p99_ms is not None:
        ax.axhline(slo_p99_ms, color="red", linestyle="--", linewidth=1, label=f"P99 SLO {slo_p99_ms:g} ms")
    ax.set_xlabel("inferences / s")
    ax.set_ylabel("latency (ms)")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend()
    ax.figure.tight_layout()


def _bar(summary: Any, scale: float) -> tuple[float, float]:
    """(below, above) the median of ``summary``'s interval, divided by ``scale``."""
    if summary is None or summary.low is None or summary.high is None:
        return (0.0, 0.0)
    return (max(0.0, summary.median - summary.low) / scale, max(0.0, summary.high - summary.median) / scale)


def engines_figure(report: CompareReport) -> Any:
    """Bars per engine: P99 of single requests, throughput at batch 32, peak memory."""
    plt = _pyplot()
    measured = [e for e in report.engines if e.ok]
    rounds = max((e.rounds for e in measured), default=0)
    over = f", median and {rounds}-round interval" if rounds > 1 else ""
    panels = (
        (f"P99 latency, batch 1 (ms{over})", [e.p99_ms_b1 for e in measured], "lower is better",
         _intervals(measured, "p99_ms_b1")),
        (f"inferences/s at batch 32{over}", [e.infer_per_s_b32 for e in measured], "higher is better",
         _intervals(measured, "infer_per_s_b32")),
        ("peak memory (MB)", [None if e.peak_mem_bytes is None else e.peak_mem_bytes / 1e6 for e in measured],
         "lower is better", None),
    )  # fmt: skip
    fig, axes = plt.subplots(1, 3, figsize=(11, max(2.2, 0.55 * len(measured) + 1.4)), dpi=110)
    labels = [e.label for e in measured]
    for ax, (title, values, note, errors) in zip(axes, panels, strict=True):
        heights = [v if v is not None else 0.0 for v in values]
        bars = ax.barh(labels, heights, color="#4c72b0", xerr=errors, capsize=3 if errors else 0)
        for bar, value in zip(bars, values, strict=True):
            text = "n/a" if value is None else (f"{value:,.0f}" if value >= 100 else f"{value:.3g}")
            ax.annotate(
                text,
                (bar.get_width(), bar.get_y() + bar.get_height() / 2),
                xytext=(3, 0),
                textcoords="offset points",
                va="center",
                fontsize=8,
            )
        ax.set_title(f"{title}\n({note})", fontsize=9)
        ax.invert_yaxis()
        ax.margins(x=0.25)
        ax.grid(True, axis="x", alpha=0.3)
    fig.suptitle(f"{report.name}: engines", fontsize=10)
    fig.tight_layout()
    return fig


def _intervals(engines: list[Any], metric: str) -> list[list[float]] | None:
    """Error bars (below, above the median) of each engine's interval; ``None`` when none has one."""
    below, above = [], []
    for engine in engines:
        summary = engine.summary(metric)
        if summary is None or summary.low is None or summary.high is None:
            below.append(0.0)
            above.append(0.0)
            continue
        below.append(max(0.0, summary.median - summary.low))
        above.append(max(0.0, summary.high - summary.median))
    return [below, above] if any(below) or any(above) else None


def compare_latency_figure(report: CompareReport) -> Any:
    """Per engine, P99 against inferences/s over its measured runs (batch 1, then the ramp)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=120)
    for engine in report.engines:
        runs = [r.run for r in engine.latency_runs if r.figure == "ramp" and r.run.latency_us]
        if not runs:
            continue
        ramp = [r for r in runs if r.batch_size > 1] or runs
        xs = [float(r.infer_per_s) for r in ramp]
        ys = [float((r.latency_us or {})["p99"]) / 1000 for r in ramp]
        line = ax.plot(xs, ys, "o-", label=f"{engine.label} (batch {ramp[0].batch_size})")[0]
        for r, x, y in zip(ramp, xs, ys, strict=True):
            ax.annotate(
                f"c={r.concurrency}",
                (x, y),
                textcoords="offset points",
                xytext=(4, 4),
                fontsize=7,
                color=line.get_color(),
            )
    ax.set_xlabel("inferences / s")
    ax.set_ylabel("P99 latency (ms)")
    ax.set_title(f"{report.name}: latency vs throughput per engine")
    ax.grid(True, alpha=0.3)
    if ax.lines:
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def png_bytes(fig: Any) -> bytes:
    """The figure as PNG bytes (for pages that embed their images); the figure is released."""
    plt = _pyplot()
    buffer = io.BytesIO()
    try:
        fig.savefig(buffer, format="png")
    finally:
        plt.close(fig)
    return buffer.getvalue()


def _save(fig: Any, path: Path) -> Path:
    """Write ``fig`` to ``path`` as PNG and release it."""
    import matplotlib.pyplot as plt

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path)
    except OSError as e:
        raise RepositoryError(f"cannot write {path}: {e.strerror}", "choose a writable --plot path") from e
    finally:
        plt.close(fig)
    return path
