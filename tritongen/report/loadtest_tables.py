"""The tables of ``tritongen loadtest``: runs, levels over rounds, a mix's models, the server's models."""

from __future__ import annotations

from typing import Any

from tritongen.intervals import DEFAULT_CONFIDENCE, Summary, format_summary
from tritongen.loadtest.result import SweepStop, gpu_source_text
from tritongen.loadtest.validation import validation_lines
from tritongen.report.kind_tables import llm_notes
from tritongen.report.table_data import TableData, count_cell, ms_cell, number_cell, run_level, us_cell


def loadtest_table(document: dict[str, Any]) -> TableData:
    """One row per run of a ``tritongen.loadtest/1`` document (latency in ms)."""
    headers = (
        "level",
        "req/s",
        "infer/s",
        "P50",
        "P90",
        "P99",
        "P99.9",
        "max",
        "err",
        "queue µs",
        "infer µs",
        "batch",
        "CPU%",
        "stable",
    )
    rows: list[tuple[str, ...]] = []
    notes: list[str] = []
    styles: list[str | None] = []
    for run in document.get("runs", []):
        latency = run.get("latency_us") or {}
        server = run.get("server_us") or {}
        cpu = (run.get("cpu") or {}).get("util_mean")
        level = run_level(run)
        if int(document.get("rounds") or 1) > 1:
            level += f" r{run.get('round', 1)}"
        rows.append(
            (
                level,
                f"{run['qps']:,.0f}",
                f"{run['infer_per_s']:,.0f}",
                ms_cell(latency.get("p50")),
                ms_cell(latency.get("p90")),
                ms_cell(latency.get("p99")),
                ms_cell(latency.get("p999")),
                ms_cell(latency.get("max")),
                str(run.get("errors", 0)),
                f"{server['queue']:.0f}" if server.get("queue") is not None else "–",
                f"{server['compute_infer']:.0f}" if server.get("compute_infer") is not None else "–",
                f"{run['avg_batch']:.2f}" if run.get("avg_batch") is not None else "–",
                f"{cpu * 100:.0f}" if cpu is not None else "–",
                "yes" if run.get("stable") else "no",
            )
        )
        styles.append("bad" if run.get("errors") or run.get("status", "ok") != "ok" else None)
        notes += _run_notes(run, level)
    notes += _gpu_figures_note(document.get("runs", []))
    if document.get("sweep_stop"):
        notes.append(SweepStop.from_json(document["sweep_stop"]).summary())
    where = f"{document.get('protocol')} ({document.get('url')})"
    return TableData(
        title=f"{document.get('model')} over {where}, latency in ms",
        headers=headers,
        rows=rows,
        right=(True,) * len(headers),
        notes=notes,
        styles=styles,
    )


def _run_notes(run: dict[str, Any], level: str) -> list[str]:
    """A run's notes below the table: its errors by kind, its check of the responses, its warnings."""
    notes = [f"{level} errors: {run['errors_by_kind']}"] if run.get("errors_by_kind") else []
    notes += [f"{level} {line}" for line in validation_lines(run.get("validation"))]
    notes += [f"{level} {line}" for line in llm_notes(run)]
    return notes + [f"{level}: {w}" for w in run.get("warnings", [])]


def _gpu_figures_note(runs: list[dict[str, Any]]) -> list[str]:
    """Where the runs' GPU figures came from (Triton's metrics or NVML), once; none without them."""
    gpu = next((run["gpu"] for run in runs if run.get("gpu")), None)
    return [f"GPU figures {gpu_source_text(gpu.get('source'), gpu.get('memory_scope'))}"] if gpu else []


def loadtest_rounds_table(document: dict[str, Any]) -> TableData | None:
    """Each level's figures over its rounds (``None`` for a one-round load test)."""
    levels = document.get("levels") or []
    if int(document.get("rounds") or 1) < 2 or not levels:
        return None
    rows: list[tuple[str, ...]] = []
    for level in levels:
        latency = level.get("latency_us") or {}

        def ms(key: str, latency: dict[str, Any] = latency) -> str:
            data = latency.get(key)
            if not data:
                return "–"
            summary = Summary.from_json(data)
            scaled = Summary(
                tuple(v / 1000 for v in summary.values), summary.median / 1000, summary.mean / 1000,
                None if summary.low is None else summary.low / 1000,
                None if summary.high is None else summary.high / 1000, summary.cv, summary.confidence,
            )  # fmt: skip
            return format_summary(scaled)

        infer = level.get("infer_per_s")
        summary = Summary.from_json(infer) if infer else None
        rows.append(
            (
                run_level(level),
                str(level.get("rounds", 0)),
                format_summary(summary),
                "–" if summary is None or summary.cv is None else f"{summary.cv:.1%}",
                ms("p50"),
                ms("p99"),
                ms("p999"),
            )
        )
    confidence = float(document.get("confidence") or DEFAULT_CONFIDENCE)
    return TableData(
        title=f"{document.get('model')} over {document.get('rounds')} rounds: median ± half the "
        f"{confidence:.0%} interval, latency in ms",
        headers=("level", "rounds", "infer/s", "CV", "P50", "P99", "P99.9"),
        rows=rows,
        right=(True,) * 7,
    )


def loadtest_models_table(document: dict[str, Any]) -> TableData | None:
    """Each model's figures and the server's per run of a mixed load test, then the total (else ``None``)."""
    headers = ("level", "model", "share", "load", "requests", "err", "req/s", "infer/s", "P50", "P90", "P99",
               "P99.9", "queue µs", "infer µs", "batch")  # fmt: skip
    rows: list[tuple[str, ...]] = []
    styles: list[str | None] = []
    rounds = int(document.get("rounds") or 1)
    for run in document.get("runs", []):
        models: dict[str, dict[str, Any]] = run.get("models") or {}
        if not models:
            continue
        level = run_level(run) + (f" r{run.get('round', 1)}" if rounds > 1 else "")
        for index, (name, entry) in enumerate([*models.items(), ("total", run)]):
            rows.append((level if index == 0 else "", name, *_model_cells(entry, total=name == "total")))
            styles.append("bad" if entry.get("errors") else "muted" if index == len(models) else None)
    if not rows:
        return None
    return TableData(
        title=f"{document.get('model')}: each model's share of the load, latency in ms",
        headers=headers,
        rows=rows,
        right=(False, False, *(True,) * 13),
        notes=[
            "load: each model's in-flight streams (c=) or requests/s; queue and infer: the server's µs "
            "per request (statistics API)"
        ],
        styles=styles,
    )


def _model_cells(entry: dict[str, Any], total: bool) -> tuple[str, ...]:
    """One model's (or the total's) cells of the mixed load test table."""
    latency = entry.get("latency_us") or {}
    server = entry.get("server_us") or {}
    if entry.get("mode", "rate" if entry.get("concurrency") is None else "concurrency") == "rate":
        load = f"{float(entry.get('target_rate') or 0.0):g}/s"
    else:
        load = f"c={entry.get('concurrency')}"
    return (
        "" if total else f"{float(entry.get('share') or 0.0):.0%}",
        load,
        count_cell(entry.get("requests")),
        str(entry.get("errors", 0)),
        f"{float(entry.get('qps') or 0.0):,.1f}",
        f"{float(entry.get('infer_per_s') or 0.0):,.1f}",
        *(ms_cell(latency.get(key)) for key in ("p50", "p90", "p99", "p999")),
        us_cell(server.get("queue")),
        us_cell(server.get("compute_infer")),
        number_cell(entry.get("avg_batch")),
    )


def server_models_table(document: dict[str, Any]) -> TableData | None:
    """Per run, the server's figures of each model the requests touched, as a tree (``None`` if one model).

    Reads each run's ``server_models``; runs that touched a single model are left out.
    """
    headers = ("level", "model", "requests", "executions", "batch", "queue µs", "input µs", "infer µs",
               "output µs")  # fmt: skip
    rows: list[tuple[str, ...]] = []
    rounds = int(document.get("rounds") or 1)
    for run in document.get("runs", []):
        models = run.get("server_models") or {}
        if len(models) < 2:
            continue
        level = run_level(run) + (f" r{run.get('round', 1)}" if rounds > 1 else "")
        for index, (name, label) in enumerate(tree_labels(models)):
            entry = models[name]
            rows.append(
                (level if index == 0 else "", label, count_cell(entry.get("requests")),
                 count_cell(entry.get("executions")), number_cell(entry.get("avg_batch")),
                 *(us_cell(entry.get(f"{phase}_us")) for phase in
                   ("queue", "compute_input", "compute_infer", "compute_output")))
            )  # fmt: skip
    if not rows:
        return None
    return TableData(
        title=f"Server per model under {document.get('model')} (statistics API, per request)",
        headers=headers,
        rows=rows,
        right=(False, False, *(True,) * 7),
        notes=[
            "under an ensemble: its steps; under any other model: models it called (BLS) or that other "
            "traffic on the server reached while this run was measured",
            "an ensemble's queue and compute times include its steps'",
        ],
    )


def tree_labels(models: dict[str, dict[str, Any]]) -> list[tuple[str, str]]:
    """Each model of a ``server_models`` object in tree order with its label (``├─ name``, indented)."""
    from tritongen.metrics.composing import children_of

    children = children_of(models)
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

    for top in [*children.get(None, []), *models]:  # then any model a loop of parents cut off
        if top not in seen:
            walk(top, "", last=True, root=True)
    return labels
