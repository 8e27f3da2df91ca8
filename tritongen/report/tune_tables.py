"""The table of ``tritongen tune``: the current config, the confirmed finalists, the other trials."""

from __future__ import annotations

from tritongen.intervals import Summary, format_summary
from tritongen.report.rounds_notes import stopping_notes
from tritongen.report.table_data import TableData, ms_cell
from tritongen.tune.document import BackgroundSummary, ContenderEntry, TrialEntry, TuneDocument


def tune_table(document: TuneDocument) -> TableData:
    """The current config, the confirmed finalists, then the other trials by throughput, of a tune.

    The search columns hold each config's one measurement. Where a confirmation ran
    (``tritongen.tune/2``), its contenders also show ``median ± half-interval`` over the
    rounds and their throughput over the current config's with its interval.
    """
    front = set(document.front)
    best = None if document.best is None else document.best.key
    confirmation = document.confirmation
    confirmed = {} if confirmation is None else confirmation.contenders
    trials = sorted(document.trials, key=lambda t: (t.key not in confirmed, -float(t.infer_per_s or 0.0)))
    rows: list[tuple[str, ...]] = []
    styles: list[str | None] = []
    for trial in ([document.baseline] if document.baseline else []) + trials:
        row = _trial_cells(trial, front)
        if confirmed:
            row += _confirmed_cells(confirmed.get(trial.key))
        rows.append(row)
        styles.append("good" if trial.key == best else "bad" if trial.status == "failed" else None)
    notes = [f"{t.key} failed: {t.reason}" for t in trials if t.status == "failed" and t.reason]
    title = f"{document.model}: {len(trials)} trials ({document.strategy})"
    headers: tuple[str, ...] = ("config", "infer/s", "P99 ms", "feasible", "front")
    if confirmation is not None and confirmed:
        level = confirmation.confidence
        title += f", {len(confirmed)} configs confirmed over {confirmation.completed_rounds} rounds"
        headers += ("rounds infer/s", "rounds P99 ms", "vs current")
        versus = (
            "the current config's P99 over this one's (the load set its own rate: the lower P99 decides)"
            if confirmation.judged_by == "p99"
            else "throughput over the current config's"
        )
        notes.append(
            f"rounds: median ± half the {level:.0%} interval over interleaved rounds; vs current: {versus}, "
            "paired by round, with its interval"
        )
        notes += stopping_notes(confirmation.stopping, level)
    return TableData(
        title=title,
        headers=headers,
        rows=rows,
        right=(False,) + (True,) * (len(headers) - 1),
        notes=notes,
        styles=styles,
    )


def _trial_cells(trial: TrialEntry, front: set[str]) -> tuple[str, ...]:
    """A search trial's one measurement: config, throughput, P99, whether feasible and on the front."""
    return (
        trial.key,
        f"{float(trial.infer_per_s or 0.0):,.0f}",
        "-" if trial.p99_us is None else f"{trial.p99_us / 1000:.2f}",
        "yes" if trial.feasible else "no",
        "●" if trial.key in front else "",
    )


def _confirmed_cells(entry: ContenderEntry | None) -> tuple[str, str, str]:
    """A confirmed contender's figures over the rounds and its ratio to the current config (blank if none)."""
    if entry is None:
        return ("", "", "")
    if entry.current:
        versus = "baseline"
    elif entry.ratio is None:
        versus = "–"
    else:
        versus = entry.ratio.text()
    if not entry.eligible:
        versus += " (over the SLO)" if not entry.feasible else " (incomplete)"
    return (format_summary(entry.infer_per_s), _summary_ms(entry.p99_us), versus)


def _summary_ms(summary: Summary | None) -> str:
    """A µs figure over rounds as ``median ± half-interval`` in ms."""
    if summary is None:
        return "–"
    half = summary.half_width
    if half is None:
        return f"{summary.median / 1000:.2f}"
    return f"{summary.median / 1000:.2f} ± {half / 1000:.2f}"


def background_text(background: BackgroundSummary) -> str:
    """One line on a tune's background load: its models and level, its throughput, P99 and errors."""
    load = f"c={background.level:g}" if background.mode == "concurrency" else f"{background.level:g}/s"
    line = (
        f"background {', '.join(background.models)} ({load}) over {background.duration_s:.0f} s: "
        f"{background.qps:,.1f} req/s, P99 {ms_cell(background.p99_us)} ms, "
        f"{background.errors} errors of {background.requests}"
    )
    if background.status != "ok":
        line += f"; failed: {background.reason}"
    return line


def background_facts(document: TuneDocument) -> list[tuple[str, str]]:
    """The background load line of a tune, as a fact (none without a background load)."""
    background = document.background_summary()
    return [("background load", background_text(background))] if background is not None else []
