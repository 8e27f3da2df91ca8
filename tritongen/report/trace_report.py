"""``loadtest --server-trace``: the median and slowest 1% requests split into parts, as a table and bars."""

from __future__ import annotations

from typing import Any

from tritongen.loadtest.result import LoadTestReport, RunResult
from tritongen.loadtest.server_trace import CLIENT_PARTS, STEP_PARTS
from tritongen.report.table_data import TableData, run_label

PART_LABELS = {
    "client_send": "send",
    "http_recv": "read",
    "handling": "handle",
    "queue": "queue",
    "compute_input": "input",
    "infer": "infer",
    "compute_output": "output",
    "steps": "steps",
    "respond": "respond",
    "client_receive": "receive",
}
"""Each of :data:`~tritongen.loadtest.server_trace.CLIENT_PARTS` as a column or legend names it."""


def traced_rows(report: LoadTestReport) -> list[tuple[str, RunResult, dict[str, Any]]]:
    """(``c=8 median``, run, split) for each split of each traced run, in run order."""
    rows = []
    for run in report.runs:
        for split in (run.server_trace or {}).get("splits", []):
            rank = "P50" if split["label"] == "median" else "top 1%"
            rows.append((f"{run_label(run, report.rounds)} {rank}", run, split))
    return rows


def _us(value: float | None) -> str:
    return "–" if value is None else f"{value:,.0f}"


def server_trace_table(report: LoadTestReport) -> TableData | None:
    """One row per traced run and rank (median, slowest 1%): its latency and each part, in µs."""
    rows = traced_rows(report)
    if not rows:
        return None
    headers = ("level", "requests", "latency", *(PART_LABELS[part] for part in CLIENT_PARTS))
    cells = [
        (label, str(split["requests"]), _us(split["latency_us"]),
         *(_us(split["parts_us"].get(part)) for part in CLIENT_PARTS))
        for label, _, split in rows
    ]  # fmt: skip
    notes = [
        "send: the client's first byte to the server reading it; read … respond: the server's (HTTP or "
        "gRPC read, handling, queue, compute input, infer, compute output, an ensemble's or BLS model's "
        "steps, response written); receive: "
        "to the response complete on the client. P50: the median request by client latency; top 1%: "
        "the mean of the slowest 1%"
    ]
    notes += trace_lines(report)
    return TableData(
        title="Where the time went (server trace; µs, means over the requests at each rank)",
        headers=headers,
        rows=cells,
        right=(False, *(True,) * (len(headers) - 1)),
        notes=notes,
    )


def trace_lines(report: LoadTestReport) -> list[str]:
    """What the trace table's rows do not hold: each rank's steps (ensembles, BLS), each run's count."""
    lines = [
        note for label, _, split in traced_rows(report) if (note := _steps_note(label, split["steps_us"]))
    ]
    for run in report.runs:
        if run.server_trace:
            trace = run.server_trace
            lines.append(
                f"{run_label(run, report.rounds)}: {trace['joined']:,} of {trace['recorded']:,} measured "
                f"requests traced by the server (1 in {trace['rate']})"
            )
    return lines


def _steps_note(label: str, steps: dict[str, dict[str, float | None]]) -> str | None:
    """``c=2 P50 steps, µs: pre_scale ×1: queue 134, input 19, infer 164, output 47 (whole 380); …``."""
    if not steps:
        return None
    said = []
    for model, step in steps.items():
        parts = ", ".join(f"{PART_LABELS[p]} {_us(step.get(p))}" for p in STEP_PARTS)
        said.append(f"{model} ×{step.get('calls') or 0:g}: {parts} (whole {_us(step.get('total'))})")
    return f"{label} steps, µs: " + "; ".join(said)


def trace_figure(report: LoadTestReport) -> Any:
    """One stacked bar per traced run and rank: its parts, client send to client receive, in µs."""
    from tritongen.report.plots import _pyplot

    rows = traced_rows(report)
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(9, 0.5 + 0.45 * len(rows)))
    colours = plt.get_cmap("tab10")
    labels = [label for label, _, _ in rows]
    left = [0.0] * len(rows)
    for index, part in enumerate(CLIENT_PARTS):
        widths = [split["parts_us"].get(part) or 0.0 for _, _, split in rows]
        ax.barh(labels, widths, left=left, color=colours(index), label=PART_LABELS[part])
        left = [a + b for a, b in zip(left, widths, strict=True)]
    ax.invert_yaxis()
    ax.set_xlabel("µs")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.25 - 0.5 / max(1, len(rows))), ncol=5, fontsize=8)
    fig.tight_layout()
    return fig
