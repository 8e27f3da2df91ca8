"""PNG plots of results (matplotlib, imported only when a plot is asked for)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tritongen.errors import RepositoryError
from tritongen.loadtest.result import LoadTestReport


def plot_latency_vs_throughput(report: LoadTestReport, path: Path, slo_p99_ms: float | None = None) -> Path:
    """Plot P50/P99 latency against inferences/s, one point per run, levels annotated."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = [r for r in report.runs if r.latency_us]
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=120)
    for key, style in (("p50", "o-"), ("p99", "s-")):
        xs = [r.infer_per_s for r in runs]
        ys = [r.latency_us[key] / 1000 for r in runs if r.latency_us]
        ax.plot(xs, ys, style, label=key.upper())
    for run in runs:
        if run.latency_us:
            label = f"c={run.concurrency}" if run.mode == "concurrency" else f"{run.target_rate:g}/s"
            ax.annotate(label, (run.infer_per_s, run.latency_us["p99"] / 1000), textcoords="offset points",
                        xytext=(4, 4), fontsize=8)  # fmt: skip
    if slo_p99_ms is not None:
        ax.axhline(slo_p99_ms, color="red", linestyle="--", linewidth=1, label=f"P99 SLO {slo_p99_ms:g} ms")
    ax.set_xlabel("inferences / s")
    ax.set_ylabel("latency (ms)")
    ax.set_title(f"{report.model} ({report.protocol})")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    return _save(fig, path)


def plot_tune(
    points: list[tuple[str, float, float, bool, bool]],
    path: Path,
    title: str,
    slo_p99_ms: float | None,
    baseline: tuple[float, float] | None = None,
) -> Path:
    """Plot each trial's throughput against its P99: feasible region shaded, the front joined.

    ``points``: (label, infer_per_s, p99_ms, feasible, on_front) per measured trial;
    ``baseline``: (infer_per_s, p99_ms) of the baseline, drawn as a star.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=120)
    if slo_p99_ms is not None:
        ax.axhspan(0, slo_p99_ms, color="green", alpha=0.08, label=f"feasible (P99 ≤ {slo_p99_ms:g} ms)")
        ax.axhline(slo_p99_ms, color="red", linestyle="--", linewidth=1)
    for ok, marker, name in ((True, "o", "feasible"), (False, "x", "over the SLO")):
        chosen = [p for p in points if p[3] is ok]
        if chosen:
            ax.scatter([p[1] for p in chosen], [p[2] for p in chosen], marker=marker, label=name)
    if baseline is not None:
        ax.scatter([baseline[0]], [baseline[1]], marker="*", s=120, color="grey", label="baseline")
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
    return _save(fig, path)


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
