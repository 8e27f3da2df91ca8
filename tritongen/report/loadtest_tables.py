"""The tables of ``tritongen loadtest``: runs, levels over rounds, a mix's models, the server's models."""

from __future__ import annotations

from collections.abc import Mapping

from tritongen.intervals import DEFAULT_CONFIDENCE, Summary, format_summary
from tritongen.loadtest.result import LevelSummary, LoadTestReport, RunResult, gpu_source_text
from tritongen.loadtest.validation import validation_lines
from tritongen.metrics.prometheus import UtilisationSummary
from tritongen.report.kind_tables import llm_notes, sequence_table, streaming_table
from tritongen.report.table_data import (
    TableData,
    count_cell,
    number_cell,
    percentile_ms,
    run_label,
    run_style,
    us_cell,
)
from tritongen.report.timeslice_report import stage_table, timeslice_table
from tritongen.report.trace_report import server_trace_table
from tritongen.report.wire_report import client_time_notes, wire_table


def loadtest_report_tables(report: LoadTestReport) -> list[TableData]:
    """Every table of a load test, in the order shown: runs, levels over rounds, each kind's, the models."""
    found = [
        loadtest_rounds_table(report),
        streaming_table(report),
        sequence_table(report),
        loadtest_models_table(report),
        server_models_table(report),
        server_trace_table(report),
        wire_table(report),
        stage_table(report),
        timeslice_table(report),
    ]
    return [loadtest_table(report), *(table for table in found if table is not None)]


def loadtest_table(report: LoadTestReport) -> TableData:
    """One row per run of a load test (latency in ms)."""
    headers = ("level", "req/s", "infer/s", "P50", "P90", "P99", "P99.9", "max", "err", "queue µs",
               "infer µs", "batch", "CPU%", "stable")  # fmt: skip
    rows: list[tuple[str, ...]] = []
    notes: list[str] = []
    styles: list[str | None] = []
    for run in report.runs:
        server = run.server_times()
        cpu = run.cpu_summary()
        cpu_mean = None if cpu is None else cpu.util_mean
        level = run_label(run, report.rounds)
        rows.append(
            (level, f"{run.qps:,.0f}", f"{run.infer_per_s:,.0f}",
             *(percentile_ms(run.latency_us, key) for key in ("p50", "p90", "p99", "p999", "max")),
             str(run.errors),
             f"{server.queue_us:.0f}" if server.queue_us is not None else "–",
             f"{server.compute_infer_us:.0f}" if server.compute_infer_us is not None else "–",
             f"{run.avg_batch:.2f}" if run.avg_batch is not None else "–",
             f"{cpu_mean * 100:.0f}" if cpu_mean is not None else "–",
             "–" if "shape" in (run.schedule or {}) else "yes" if run.stable else "no")
        )  # fmt: skip
        styles.append(run_style(run))
        notes += _run_notes(run, level)
    notes += _gpu_figures_note(report.runs)
    if report.sweep_stop is not None:
        notes.append(report.sweep_stop.summary())
    if report.find_max is not None:
        notes.append(report.find_max.summary())
    return TableData(
        title=f"{report.model} over {report.protocol} ({report.url}), latency in ms",
        headers=headers,
        rows=rows,
        right=(True,) * len(headers),
        notes=notes,
        styles=styles,
    )


def _run_notes(run: RunResult, level: str) -> list[str]:
    """A run's notes below the table: its errors by kind, its check of the responses, its warnings."""
    notes = [f"{level} errors: {run.errors_by_kind}"] if run.errors_by_kind else []
    notes += [f"{level} {line}" for line in validation_lines(run.validation)]
    notes += [f"{level} {line}" for line in llm_notes(run)]
    notes += client_time_notes(run, level)
    return notes + [f"{level}: {w}" for w in run.warnings]


def _gpu_figures_note(runs: list[RunResult]) -> list[str]:
    """Where the runs' GPU figures came from (Triton's metrics or NVML), once; none without them."""
    gpu = next((found for run in runs if (found := run.gpu_summary()) is not None), None)
    return [f"GPU figures {gpu_source_text(gpu.source, gpu.memory_scope)}"] if gpu else []


def gpu_line(level: str, gpu: UtilisationSummary) -> str:
    """The console's line of a run's GPU figures and where they came from (Triton's metrics or NVML)."""
    source = gpu_source_text(gpu.source, gpu.memory_scope)
    if gpu.devices:
        source += ": " + ", ".join(gpu.devices)
    return (
        f"{level} GPU util mean {gpu.util_mean} max {gpu.util_max}, "
        f"memory max {gpu.mem_max_bytes} B ({source})"
    )


def level_label(level: LevelSummary) -> str:
    """A load level: ``c=8`` or ``500/s``."""
    return f"c={int(level.level)}" if level.mode == "concurrency" else f"{level.level:g}/s"


def _summary_ms(summary: Summary | None) -> str:
    """A µs figure over rounds as ``median ± half-interval`` in ms (``–`` where not measured)."""
    if summary is None:
        return "–"
    scaled = Summary(
        tuple(v / 1000 for v in summary.values), summary.median / 1000, summary.mean / 1000,
        None if summary.low is None else summary.low / 1000,
        None if summary.high is None else summary.high / 1000, summary.cv, summary.confidence,
    )  # fmt: skip
    return format_summary(scaled)


def loadtest_rounds_table(report: LoadTestReport) -> TableData | None:
    """Each level's figures over its rounds (``None`` for a one-round load test)."""
    levels = report.levels()
    if report.rounds < 2 or not levels:
        return None
    rows: list[tuple[str, ...]] = []
    for level in levels:
        infer = level.infer_per_s
        rows.append(
            (
                level_label(level),
                str(level.rounds),
                format_summary(infer),
                "–" if infer is None or infer.cv is None else f"{infer.cv:.1%}",
                *(_summary_ms(level.latency_us.get(key)) for key in ("p50", "p99", "p999")),
            )
        )
    confidence = report.confidence or DEFAULT_CONFIDENCE
    return TableData(
        title=f"{report.model} over {report.rounds} rounds: median ± half the "
        f"{confidence:.0%} interval, latency in ms",
        headers=("level", "rounds", "infer/s", "CV", "P50", "P99", "P99.9"),
        rows=rows,
        right=(True,) * 7,
    )


def loadtest_models_table(report: LoadTestReport) -> TableData | None:
    """Each model's figures and the server's per run of a mixed load test, then the total (else ``None``)."""
    headers = ("level", "model", "share", "load", "requests", "err", "req/s", "infer/s", "P50", "P90", "P99",
               "P99.9", "queue µs", "infer µs", "batch")  # fmt: skip
    rows: list[tuple[str, ...]] = []
    styles: list[str | None] = []
    for run in report.runs:
        parts = run.model_parts()
        if not parts:
            continue
        level = run_label(run, report.rounds)
        for index, (name, part) in enumerate(parts.items()):
            rows.append((level if index == 0 else "", name, f"{part.share:.0%}", *_model_cells(part.run)))
            styles.append("bad" if part.run.errors else None)
        rows.append(("", "total", "", *_model_cells(run, mode=run.mode)))
        styles.append("bad" if run.errors else "muted")
    if not rows:
        return None
    return TableData(
        title=f"{report.model}: each model's share of the load, latency in ms",
        headers=headers,
        rows=rows,
        right=(False, False, *(True,) * 13),
        notes=[
            "load: each model's in-flight streams (c=) or requests/s; queue and infer: the server's µs "
            "per request (statistics API)"
        ],
        styles=styles,
    )


def _model_cells(run: RunResult, mode: str | None = None) -> tuple[str, ...]:
    """One model's (or the total's) cells of the mixed load test table, from its load on.

    A model's part has no mode of its own: it runs at a rate where it has no concurrency.
    """
    server = run.server_times()
    if (mode or ("rate" if run.concurrency is None else "concurrency")) == "rate":
        load = f"{float(run.target_rate or 0.0):g}/s"
    else:
        load = f"c={run.concurrency}"
    return (
        load,
        count_cell(run.requests),
        str(run.errors),
        f"{float(run.qps or 0.0):,.1f}",
        f"{float(run.infer_per_s or 0.0):,.1f}",
        *(percentile_ms(run.latency_us, key) for key in ("p50", "p90", "p99", "p999")),
        us_cell(server.queue_us),
        us_cell(server.compute_infer_us),
        number_cell(run.avg_batch),
    )


def server_models_table(report: LoadTestReport) -> TableData | None:
    """Per run, the server's figures of each model the requests touched, as a tree (``None`` if one model).

    Reads each run's ``server_models``; runs that touched a single model are left out.
    """
    headers = ("level", "model", "requests", "executions", "batch", "queue µs", "input µs", "infer µs",
               "output µs")  # fmt: skip
    rows: list[tuple[str, ...]] = []
    for run in report.runs:
        models = run.server_model_figures()
        if len(models) < 2:
            continue
        level = run_label(run, report.rounds)
        for index, (name, label) in enumerate(tree_labels({n: f.parent for n, f in models.items()})):
            figures = models[name]
            rows.append(
                (level if index == 0 else "", label, count_cell(figures.requests),
                 count_cell(figures.executions), number_cell(figures.avg_batch),
                 *(us_cell(figures.phase_us(phase)) for phase in
                   ("queue", "compute_input", "compute_infer", "compute_output")))
            )  # fmt: skip
    if not rows:
        return None
    return TableData(
        title=f"Server per model under {report.model} (statistics API, per request)",
        headers=headers,
        rows=rows,
        right=(False, False, *(True,) * 7),
        notes=[
            "under an ensemble: its steps; under any other model: models it called (BLS) or that other "
            "traffic on the server reached while this run was measured",
            "an ensemble's queue and compute times include its steps'",
        ],
    )


def tree_labels(parents: Mapping[str, str | None]) -> list[tuple[str, str]]:
    """Each model in tree order with its label (``├─ name``, indented), from each model's parent."""
    from tritongen.metrics.composing import children_of

    children = children_of({name: {"parent": parent} for name, parent in parents.items()})
    labels: list[tuple[str, str]] = []
    space = "\u00a0"  # kept by HTML, where plain spaces collapse

    seen: set[str] = set()

    def walk(name: str, prefix: str, last: bool, root: bool) -> None:
        seen.add(name)
        branch = "" if root else prefix + ("└─" if last else "├─") + space
        labels.append((name, branch + name))
        below = [child for child in children.get(name, []) if child not in seen]
        inner = "" if root else prefix + (space * 3 if last else "│" + space * 2)
        for index, child in enumerate(below):
            walk(child, inner, index == len(below) - 1, root=False)

    for top in [*children.get(None, []), *parents]:  # then any model a loop of parents cut off
        if top not in seen:
            walk(top, "", last=True, root=True)
    return labels
