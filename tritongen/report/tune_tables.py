"""The table of ``tritongen tune``: the current config, the confirmed finalists, the other trials."""

from __future__ import annotations

from typing import Any

from tritongen.intervals import DEFAULT_CONFIDENCE, Ratio, Summary, format_summary
from tritongen.report.rounds_notes import stopping_notes
from tritongen.report.table_data import TableData, ms_cell
from tritongen.stopping import read_stopping


def tune_table(document: dict[str, Any]) -> TableData:
    """The current config, the confirmed finalists, then the other trials by throughput, of a tune document.

    The search columns hold each config's one measurement. Where a confirmation ran
    (``tritongen.tune/2``), its contenders also show ``median ± half-interval`` over the
    rounds and their throughput over the current config's with its interval.
    """
    front = set(document.get("front") or [])
    best = (document.get("best") or {}).get("key")
    confirmation = document.get("confirmation") or {}
    confirmed: dict[str, Any] = confirmation.get("contenders") or {}
    trials = sorted(
        document.get("trials") or [],
        key=lambda t: (t["key"] not in confirmed, -float(t.get("infer_per_s") or 0.0)),
    )
    baseline = document.get("baseline")
    rows: list[tuple[str, ...]] = []
    styles: list[str | None] = []
    for trial in ([baseline] if baseline else []) + trials:
        row = _trial_cells(trial, front)
        if confirmed:
            row += _confirmed_cells(confirmed.get(trial["key"]))
        rows.append(row)
        styles.append("good" if trial["key"] == best else "bad" if trial.get("status") == "failed" else None)
    notes = [
        f"{t['key']} failed: {t['reason']}" for t in trials if t.get("status") == "failed" and t.get("reason")
    ]
    title = f"{document.get('model')}: {len(trials)} trials ({document.get('strategy')})"
    headers: tuple[str, ...] = ("config", "infer/s", "P99 ms", "feasible", "front")
    if confirmed:
        level = float(confirmation.get("confidence") or DEFAULT_CONFIDENCE)
        title += f", {len(confirmed)} configs confirmed over {confirmation.get('completed_rounds')} rounds"
        headers += ("rounds infer/s", "rounds P99 ms", "vs current")
        notes.append(
            f"rounds: median ± half the {level:.0%} interval over interleaved rounds; vs current: throughput "
            "over the current config's, paired by round, with its interval"
        )
        notes += stopping_notes(read_stopping(confirmation.get("stopping")), level)
    return TableData(
        title=title,
        headers=headers,
        rows=rows,
        right=(False,) + (True,) * (len(headers) - 1),
        notes=notes,
        styles=styles,
    )


def _trial_cells(trial: dict[str, Any], front: set[str]) -> tuple[str, ...]:
    """A search trial's one measurement: config, throughput, P99, whether feasible and on the front."""
    p99 = trial.get("p99_us")
    return (
        str(trial["key"]),
        f"{float(trial.get('infer_per_s') or 0.0):,.0f}",
        "-" if p99 is None else f"{p99 / 1000:.2f}",
        "yes" if trial.get("feasible") else "no",
        "●" if trial["key"] in front else "",
    )


def _confirmed_cells(entry: dict[str, Any] | None) -> tuple[str, str, str]:
    """A confirmed contender's figures over the rounds and its ratio to the current config (blank if none)."""
    if entry is None:
        return ("", "", "")
    infer = entry.get("infer_per_s")
    ratio = entry.get("ratio")
    if entry.get("current"):
        versus = "baseline"
    elif ratio is None:
        versus = "–"
    else:
        versus = Ratio.from_json(ratio).text()
    if not entry.get("eligible", True):
        versus += " (over the SLO)" if not entry.get("feasible") else " (incomplete)"
    return (
        format_summary(Summary.from_json(infer) if infer else None),
        _summary_ms(entry.get("p99_us")),
        versus,
    )


def _summary_ms(data: dict[str, Any] | None) -> str:
    """A µs summary from JSON as ``median ± half-interval`` in ms."""
    if not data:
        return "–"
    summary = Summary.from_json(data)
    half = summary.half_width
    if half is None:
        return f"{summary.median / 1000:.2f}"
    return f"{summary.median / 1000:.2f} ± {half / 1000:.2f}"


def background_text(background: dict[str, Any]) -> str:
    """One line on a tune's background load: its models and level, its throughput, P99 and errors."""
    level = float(background.get("level") or 0.0)
    load = f"c={level:g}" if background.get("mode") == "concurrency" else f"{level:g}/s"
    p99 = (background.get("latency_us") or {}).get("p99")
    seconds, qps = float(background.get("duration_s") or 0.0), float(background.get("qps") or 0.0)
    line = (
        f"background {', '.join(background.get('models') or [])} ({load}) over "
        f"{seconds:.0f} s: {qps:,.1f} req/s, "
        f"P99 {ms_cell(p99)} ms, {background.get('errors', 0)} errors of {background.get('requests', 0)}"
    )
    if background.get("status") != "ok":
        line += f"; failed: {background.get('reason')}"
    return line


def background_facts(document: dict[str, Any]) -> list[tuple[str, str]]:
    """The background load line of a tune document, as a fact (none without a background load)."""
    background = document.get("background")
    return [("background load", background_text(background))] if isinstance(background, dict) else []
