"""``--timeslice`` and stages: each run's figures over time (tables, a CSV, a plot); the schedule kept."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

from tritongen.io.files import write_output
from tritongen.loadtest.result import LoadTestReport, RunResult
from tritongen.report.table_data import TableData, run_label

CSV_COLUMNS = [
    "model", "level", "round", "start_s", "duration_s", "requests", "sent", "errors", "qps",
    "p50_us", "p90_us", "p99_us", "ttft_p50_us", "ttft_p99_us", "itl_p50_us", "itl_p99_us",
]  # fmt: skip


def _ms(figures: dict[str, float] | None, key: str) -> str:
    value = (figures or {}).get(key)
    return "–" if value is None else f"{value / 1000:.2f}"


def timeslice_table(report: LoadTestReport) -> TableData | None:
    """One row per slice of each run: its time, throughput, latency and errors (ms)."""
    runs = [run for run in report.runs if run.timeslices]
    if not runs:
        return None
    llm = any("ttft_us" in row for run in runs for row in run.timeslices)
    headers = ("level", "from s", "req/s", "P50", "P90", "P99", "err") + (
        ("TTFT P50", "ITL P50") if llm else ()
    )
    rows = []
    for run in runs:
        for row in run.timeslices:
            latency = [_ms(row["latency_us"], key) for key in ("p50", "p90", "p99")]
            cells = (run_label(run, report.rounds), f"{row['start_s']:g}", f"{row['qps']:,.0f}", *latency,
                     str(row["errors"]))  # fmt: skip
            if llm:
                cells += (_ms(row.get("ttft_us"), "p50"), _ms(row.get("itl_us"), "p50"))
            rows.append(cells)
    return TableData(
        title="Over time (--timeslice; latency in ms)",
        headers=headers,
        rows=rows,
        right=(False, *(True,) * (len(headers) - 1)),
    )


def stage_table(report: LoadTestReport) -> TableData | None:
    """One row per stage of each shaped run: the rate asked, the throughput and latency it got (ms)."""
    runs = [
        run for run in report.runs if len(run.stages) > 1 or (run.stages and ".." in run.stages[0]["rate"])
    ]
    if not runs:
        return None
    headers = ("level", "stage", "from s", "rate asked", "sent/s", "req/s", "P50", "P90", "P99", "err")
    rows = []
    for run in runs:
        for row in run.stages:
            latency = [_ms(row["latency_us"], key) for key in ("p50", "p90", "p99")]
            cells = (run_label(run, report.rounds), row["stage"], f"{row['start_s']:g}", f"{row['rate']}/s")
            sent = f"{row['sent'] / row['duration_s']:,.0f}" if row.get("sent") is not None else "–"
            rows.append((*cells, sent, f"{row['qps']:,.0f}", *latency, str(row["errors"])))
    return TableData(
        title="Stages (latency in ms)",
        headers=headers,
        rows=rows,
        right=(False, *(True,) * (len(headers) - 1)),
    )


def schedule_lines(report: LoadTestReport) -> list[str]:
    """Per open-loop run whose load was shaped or whose sends ran late: how late its sends left."""
    lines = []
    for run in report.runs:
        fidelity = run.schedule
        if not fidelity or ("shape" not in fidelity and fidelity["kept"] and not run.late_sends):
            continue
        lateness = fidelity["lateness_us"]
        shape = f"{fidelity['shape']}; " if "shape" in fidelity else ""
        lines.append(
            f"{run_label(run, report.rounds)} {shape}sends left late by "
            f"{lateness['p50'] / 1000:.3f} ms at P50, "
            f"{lateness['p99'] / 1000:.2f} ms at P99, {lateness['max'] / 1000:.1f} ms at most; "
            f"{fidelity['late_share']:.1%} over 1 ms" + ("" if fidelity["kept"] else " (schedule NOT kept)")
        )
    return lines


def _cells(model: str, run: RunResult, row: dict[str, Any]) -> dict[str, Any]:
    latency, ttft, itl = row["latency_us"] or {}, row.get("ttft_us") or {}, row.get("itl_us") or {}
    return {
        "model": model, "level": run.concurrency if run.mode == "concurrency" else run.target_rate,
        "round": run.round, "start_s": row["start_s"], "duration_s": row["duration_s"],
        "requests": row["requests"], "sent": row.get("sent"), "errors": row["errors"],
        "qps": round(row["qps"], 3),
        "p50_us": latency.get("p50"), "p90_us": latency.get("p90"), "p99_us": latency.get("p99"),
        "ttft_p50_us": ttft.get("p50"), "ttft_p99_us": ttft.get("p99"),
        "itl_p50_us": itl.get("p50"), "itl_p99_us": itl.get("p99"),
    }  # fmt: skip


def timeslices_path(path: Path, suffix: str) -> Path:
    """Where a run's slices go beside ``path``: ``run.csv`` → ``run.timeslices.csv``."""
    return path.with_name(f"{path.stem}.timeslices{suffix}")


def write_timeslices_csv(report: LoadTestReport, path: Path) -> Path | None:
    """One row per slice of each run, beside the run's CSV at ``path``; None when no run has slices."""
    if not any(run.timeslices for run in report.runs):
        return None
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=CSV_COLUMNS)
    writer.writeheader()
    for run in report.runs:
        for row in run.timeslices:
            writer.writerow(_cells(report.model, run, row))
    target = timeslices_path(path, ".csv")
    write_output(target, buffer.getvalue())
    return target


def plot_timeslices(report: LoadTestReport, path: Path) -> Path | None:
    """Throughput and P99 over time, a line per run, beside the plot at ``path``; None without slices."""
    runs = [run for run in report.runs if run.timeslices]
    if not runs:
        return None
    from tritongen.report.plots import _pyplot, _save

    plt = _pyplot()
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7, 5.5), dpi=120, sharex=True)
    for run in runs:
        label = run_label(run, report.rounds)
        starts = [row["start_s"] for row in run.timeslices]
        top.plot(starts, [row["qps"] for row in run.timeslices], "o-", label=label)
        p99 = [(row["latency_us"] or {}).get("p99") for row in run.timeslices]
        bottom.plot(starts, [None if v is None else v / 1000 for v in p99], "s-", label=label)
    top.set_ylabel("requests/s")
    bottom.set_ylabel("P99 ms")
    bottom.set_xlabel("seconds into the measured time")
    top.legend(fontsize=8)
    top.set_title(f"{report.model} over time")
    return _save(fig, timeslices_path(path, ".png"))
