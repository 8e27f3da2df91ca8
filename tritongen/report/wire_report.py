"""``loadtest --wire`` and the client's own time: each run's latency set against the wire's, as a table."""

from __future__ import annotations

from tritongen.loadtest.result import LoadTestReport, RunResult
from tritongen.report.table_data import TableData, run_label

FIGURES = (("p50", "P50"), ("p90", "P90"), ("p99", "P99"), ("p999", "P99.9"))
BUSY_SHARE = 0.10
"""A run's P99 whose client-side share is at least this gets a note: the client, not the server, is slow."""


def _us(value: float | None) -> str:
    return "–" if value is None else f"{value:,.0f}"


def _rows(run: RunResult, label: str) -> list[tuple[str, ...]]:
    wire = run.wire or {}
    if not wire.get("matched"):
        return []
    agreement = wire.get("agreement") or {}
    overhead = run.client_overhead_us or {}
    rows: list[tuple[str, ...]] = []
    for key, name in FIGURES:
        row = agreement.get(key) or {}
        reported = (run.latency_us or {}).get(key)
        on_wire = wire["wire_us"][key]
        gap = row.get("gap", None if reported is None else reported - on_wire)  # gRPC: reported - wire
        within = "–" if not row else "yes" if row["within"] else "no"
        rows.append(
            (f"{label} {name}", f"{wire['matched']:,}", _us(reported), _us(on_wire),
             _us(overhead.get(key)), _us(None if gap is None else float(gap)), _us(row.get("bound")), within)
        )  # fmt: skip
    return rows


def wire_table(report: LoadTestReport) -> TableData | None:
    """Per checked run and figure: the reported latency, the wire's, the client's own time, the gap (µs)."""
    rows = [row for run in report.runs for row in _rows(run, run_label(run, report.rounds))]
    if not rows:
        return None
    headers = ("level", "matched", "reported", "wire", "client", "gap", "bound", "agrees")
    return TableData(
        title="Checked against the wire (loopback capture; µs)",
        headers=headers,
        rows=rows,
        right=(False, *(True,) * (len(headers) - 2), False),
        notes=[
            "wire: the same requests' first byte out to their response's last byte back, on the capture; "
            "client: the client's own time after the response arrived (the latency less the kernel's receive "
            "stamp; plain HTTP only); gap: reported - (wire + client), to agree within the bound, "
            "max(2%, 100 µs). Over gRPC the client library owns the socket: its own time is not separable, "
            "and gap is reported - wire"
        ],
    )


def client_time_notes(run: RunResult, level: str) -> list[str]:
    """A note where the client's own time is much of a run's P99 (a busy client, not a slow server)."""
    overhead = (run.client_overhead_us or {}).get("p99")
    p99 = (run.latency_us or {}).get("p99")
    if overhead is None or not p99 or overhead < BUSY_SHARE * p99:
        return []
    return [
        f"{level}: {overhead:,.0f} µs of P99 {p99:,.0f} µs ({overhead / p99:.0%}) is the client's own time "
        "after the response arrived (client_overhead_us): the load generator, not the server"
    ]
