"""The result tables, built once from the results and shown in the console, Markdown and HTML."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tritongen.compare.recommend import rank_labels
from tritongen.compare.result import CompareReport
from tritongen.compare.result import EngineResult as CompareEngine
from tritongen.convert.accuracy import task_figure
from tritongen.intervals import DEFAULT_CONFIDENCE, Ratio, Summary, format_summary
from tritongen.loadtest.result import SweepStop, gpu_source_text
from tritongen.loadtest.validation import validation_lines
from tritongen.metrics.vllm import vllm_text


@dataclass(frozen=True)
class TableData:
    """A table as text cells: what every output form shows."""

    title: str
    headers: tuple[str, ...]
    rows: list[tuple[str, ...]]
    right: tuple[bool, ...]
    """Per column: right-aligned (numbers)."""
    notes: list[str] = field(default_factory=list)
    styles: list[str | None] = field(default_factory=list)
    """Per row: ``good``, ``bad`` or ``None`` (colour in the console and HTML)."""


def _num(value: float | None, digits: int = 3) -> str:
    if value is None:
        return "–"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:#.{digits}g}"


def _ms(us: float | None) -> str:
    return f"{us / 1000:.2f}" if us is not None else "–"


def compare_table(report: CompareReport) -> TableData:
    """Engines in ranked order: latency, throughput, memory, cold start, precision, error."""
    batch = report.settings.get("batch_size_throughput", 32)
    kinds = {e.memory_kind for e in report.engines if e.memory_kind}
    memory = "memory MB" + (" (GPU)" if kinds == {"gpu"} else " (RSS)" if kinds == {"cpu_rss"} else "")
    headers = (
        "#",
        "engine",
        "status",
        "P99 ms b1",
        f"infer/s b{batch}",
        memory,
        "cold start s",
        "precision",
        "max abs err",
        "drift vs FP32",
    )
    rows: list[tuple[str, ...]] = []
    styles: list[str | None] = []
    notes = []
    ranked_by = report.settings.get("rank_by", "throughput")
    confidence = float(report.settings.get("confidence", DEFAULT_CONFIDENCE))
    ranks = rank_labels(report.engines, ranked_by, report.verdict_confidence())
    for engine, rank in zip(report.engines, ranks, strict=True):
        rows.append(
            (
                rank,
                f"{engine.label} ({engine.build})" if engine.build else engine.label,
                engine.status,
                _over_rounds(engine, "p99_ms_b1"),
                _over_rounds(engine, "infer_per_s_b32"),
                _num(engine.peak_mem_bytes / 1e6 if engine.peak_mem_bytes is not None else None),
                _num(engine.first_infer_s),
                engine.precision or "–",
                f"{engine.max_abs_err:.1e}" if engine.max_abs_err is not None else "–",
                engine.drift_headline or "–",
            )
        )
        styles.append(None if engine.ok else "bad" if engine.status == "failed" else "muted")
        if not engine.ok and engine.reason:
            notes.append(f"{engine.label} {engine.status}: {engine.reason}")
        elif engine.batch_size_throughput not in (None, batch):
            notes.append(
                f"{engine.label}: throughput at batch {engine.batch_size_throughput} (its max batch)"
            )
    notes += _gpu_memory_note(report.engines) + _rounds_notes(report, confidence)
    return TableData(
        title=f"{report.name}: engines ranked by {ranked_by}",
        headers=headers,
        rows=rows,
        right=(True, False, False, True, True, True, True, False, True, False),
        notes=notes,
        styles=styles,
    )


def _rounds_notes(report: CompareReport, confidence: float) -> list[str]:
    """What the figures are over, and with ``--rounds auto`` why the rounds stopped."""
    rounds = max((e.rounds for e in report.engines), default=0)
    if not rounds:
        return []
    notes = [
        f"P99 and throughput: median ± half the {confidence:.0%} interval over {rounds} interleaved "
        f"round(s); '=' ranks an engine level with the one above (their paired ratio's interval holds 1)"
    ]
    return notes + stopping_notes(report.settings.get("stopping"), confidence)


def _repeated_note(entry: dict[str, Any]) -> str:
    """``round 2 measured again: a run of mlp_onnx was flagged busy (other processes used 1.20 cores)``."""
    cores = entry.get("other_cpu")
    used = f" (other processes used up to {cores:.2f} cores)" if cores is not None else ""
    return (
        f"round {entry.get('round')} measured again, not counted: a run of "
        f"{', '.join(entry.get('busy') or [])} was flagged busy{used}"
    )


def stopping_notes(stopping: Any, confidence: float) -> list[str]:
    """``--rounds auto``: why the rounds stopped, and each pair's verdict at the rule's level."""
    if not isinstance(stopping, dict) or "pairs" not in stopping:
        return []
    level = float(stopping.get("confidence") or DEFAULT_CONFIDENCE)
    notes = [
        f"--rounds auto: {stopping.get('rounds')} round(s), {stopping.get('stopped')}; "
        f"pairs judged at {level:.2%} (spent at that look: stopping early keeps {confidence:.0%})"
    ]
    notes += [f"{pair['pair']}: {pair['text']}" for pair in stopping["pairs"]]
    on = " and ".join(stopping.get("decided_on") or [])
    notes += [
        f"{pair['pair']}: {pair['text']} (not a stopping figure: the rounds stop on {on})"
        for pair in stopping.get("other_pairs") or []
    ]
    notes += [_repeated_note(entry) for entry in stopping.get("busy_rounds_repeated") or []]
    return notes


def _over_rounds(engine: CompareEngine, metric: str) -> str:
    """A figure as ``median ± half-interval`` when it was measured in rounds, else its value."""
    summary = engine.summary(metric)
    if summary is None:
        return _num(getattr(engine, metric))
    return format_summary(summary)


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


def _run_notes(run: dict[str, Any], level: str) -> list[str]:
    """A run's notes below the table: its errors by kind, its check of the responses, its warnings."""
    notes = [f"{level} errors: {run['errors_by_kind']}"] if run.get("errors_by_kind") else []
    notes += [f"{level} {line}" for line in validation_lines(run.get("validation"))]
    notes += [f"{level} {line}" for line in _llm_note(run)]
    return notes + [f"{level}: {w}" for w in run.get("warnings", [])]


def _llm_note(run: dict[str, Any]) -> list[str]:
    """An LLM run's token figures: TTFT, ITL, TPOT (P50 / P99 ms), tokens/s, goodput; vLLM's figures."""
    if run.get("output_tokens_per_s") is None:
        return []
    parts = []
    for key, label in (("ttft_us", "TTFT"), ("itl_us", "ITL"), ("tpot_us", "TPOT")):
        figures = run.get(key) or {}
        parts.append(f"{label} {_ms(figures.get('p50'))} / {_ms(figures.get('p99'))} ms")
    server = [vllm_text(run["llm_server"])] if run.get("llm_server") else []
    return [
        f"{', '.join(parts)} (P50 / P99); {run['output_tokens_per_s']:,.1f} output tokens/s, goodput "
        f"{run.get('goodput_per_s') or 0:,.2f} req/s (tokens counted from {run.get('output_token_source')})",
        *server,
    ]


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
                _ms(latency.get("p50")),
                _ms(latency.get("p90")),
                _ms(latency.get("p99")),
                _ms(latency.get("p999")),
                _ms(latency.get("max")),
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


def _gpu_figures_note(runs: list[dict[str, Any]]) -> list[str]:
    """Where the runs' GPU figures came from (Triton's metrics or NVML), once; none without them."""
    gpu = next((run["gpu"] for run in runs if run.get("gpu")), None)
    return [f"GPU figures {gpu_source_text(gpu.get('source'), gpu.get('memory_scope'))}"] if gpu else []


def _gpu_memory_note(engines: list[CompareEngine]) -> list[str]:
    """Where the engines' GPU memory came from, once; none where no engine is judged on GPU memory."""
    on_gpu = next((e for e in engines if e.memory_kind == "gpu" and e.gpu_memory_source), None)
    if on_gpu is None:
        return []
    return [f"GPU memory {gpu_source_text(on_gpu.gpu_memory_source, on_gpu.gpu_memory_scope)}"]


def run_level(run: dict[str, Any]) -> str:
    """A run's level: ``c=8``, ``seq=4`` (sequences in flight) or ``500/s``."""
    if run.get("mode") == "rate":
        return f"{run.get('target_rate'):g}/s"
    if run.get("sequences_per_s") is not None:  # a sequence model: N sequences in flight
        return f"seq={run.get('concurrency')}"
    return f"c={run.get('concurrency')}"


def streaming_table(document: dict[str, Any]) -> TableData | None:
    """Per streaming run: responses, time to first response, time between responses, total (else ``None``)."""
    headers = ("level", "req/s", "resp/s", "resp/req", "first P50", "first P99", "first P99.9", "gap P50",
               "gap P99", "gap P99.9", "total P50", "total P99", "err")  # fmt: skip
    rows: list[tuple[str, ...]] = []
    styles: list[str | None] = []
    rounds = int(document.get("rounds") or 1)
    for run in document.get("runs", []):
        if not run.get("streaming"):
            continue
        extra = run.get("latencies_us") or {}
        first = extra.get("first_response") or {}
        between = extra.get("between_responses") or {}
        total = run.get("latency_us") or {}
        per_request = run.get("responses_per_request")
        per_request_text = "–" if per_request is None else f"{per_request:.3g}"
        rows.append(
            (run_level(run) + (f" r{run.get('round', 1)}" if rounds > 1 else ""), f"{run['qps']:,.1f}",
             f"{run.get('responses_per_s') or 0.0:,.1f}", per_request_text,
             *(_ms(first.get(k)) for k in ("p50", "p99", "p999")),
             *(_ms(between.get(k)) for k in ("p50", "p99", "p999")),
             _ms(total.get("p50")), _ms(total.get("p99")), str(run.get("errors", 0)))
        )  # fmt: skip
        styles.append("bad" if run.get("errors") or run.get("status", "ok") != "ok" else None)
    if not rows:
        return None
    return TableData(
        title=f"{document.get('model')} streaming (decoupled, gRPC), latency in ms",
        headers=headers,
        rows=rows,
        right=(True,) * len(headers),
        notes=[
            "first: send to the first response; gap: from one response to the next; total: send to the "
            "final response; resp/req: responses with outputs per request that finished without error"
        ],
        styles=styles,
    )


def sequence_table(document: dict[str, Any]) -> TableData | None:
    """Per run of a sequence model: sequences/s, requests per sequence and sequence time (else ``None``)."""
    from tritongen.loadtest.sequences import sequence_figures

    headers = ("level", "seq/s", "req/seq", "seq P50", "seq P90", "seq P99", "seq P99.9", "req/s",
               "req P99", "seq err", "err")  # fmt: skip
    rows: list[tuple[str, ...]] = []
    styles: list[str | None] = []
    rounds = int(document.get("rounds") or 1)
    for run in document.get("runs", []):
        figures = sequence_figures(run.get("latencies_us") or {}, run.get("counts") or {}, run["duration_s"])
        if figures is None:
            continue
        per_sequence = figures["requests_per_sequence"]
        per_sequence_text = "–" if per_sequence is None else f"{per_sequence:.3g}"
        rows.append(
            (run_level(run) + (f" r{run.get('round', 1)}" if rounds > 1 else ""),
             f"{figures['sequences_per_s'] or 0.0:,.1f}", per_sequence_text,
             *(_ms(figures[f"sequence_{k}_us"]) for k in ("p50", "p90", "p99", "p999")),
             f"{run['qps']:,.0f}", _ms((run.get("latency_us") or {}).get("p99")),
             str(figures["sequence_errors"]), str(run.get("errors", 0)))
        )  # fmt: skip
        styles.append("bad" if run.get("errors") or run.get("status", "ok") != "ok" else None)
    if not rows:
        return None
    return TableData(
        title=f"{document.get('model')} sequences (stateful), time in ms",
        headers=headers,
        rows=rows,
        right=(True,) * len(headers),
        notes=[
            "seq=N: N sequences in flight, each request waiting for the previous one; seq: a sequence's "
            "first send to its last response, over the sequences that finished in the measured time; "
            "seq err: sequences a failed request ended (the next one starts on a new ID)"
        ],
        styles=styles,
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
                (level if index == 0 else "", label, _count(entry.get("requests")),
                 _count(entry.get("executions")), _num(entry.get("avg_batch")),
                 *(_us(entry.get(f"{phase}_us")) for phase in
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


def _count(value: Any) -> str:
    return f"{int(value):,}" if isinstance(value, int | float) else "–"


def _us(value: Any) -> str:
    return f"{float(value):,.0f}" if isinstance(value, int | float) else "–"


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
        notes += stopping_notes(confirmation.get("stopping"), level)
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
        _count(entry.get("requests")),
        str(entry.get("errors", 0)),
        f"{float(entry.get('qps') or 0.0):,.1f}",
        f"{float(entry.get('infer_per_s') or 0.0):,.1f}",
        *(_ms(latency.get(key)) for key in ("p50", "p90", "p99", "p999")),
        _us(server.get("queue")),
        _us(server.get("compute_infer")),
        _num(entry.get("avg_batch")),
    )


def background_text(background: dict[str, Any]) -> str:
    """One line on a tune's background load: its models and level, its throughput, P99 and errors."""
    level = float(background.get("level") or 0.0)
    load = f"c={level:g}" if background.get("mode") == "concurrency" else f"{level:g}/s"
    p99 = (background.get("latency_us") or {}).get("p99")
    seconds, qps = float(background.get("duration_s") or 0.0), float(background.get("qps") or 0.0)
    line = (
        f"background {', '.join(background.get('models') or [])} ({load}) over "
        f"{seconds:.0f} s: {qps:,.1f} req/s, "
        f"P99 {_ms(p99)} ms, {background.get('errors', 0)} errors of {background.get('requests', 0)}"
    )
    if background.get("status") != "ok":
        line += f"; failed: {background.get('reason')}"
    return line


def background_facts(document: dict[str, Any]) -> list[tuple[str, str]]:
    """The background load line of a tune document, as a fact (none without a background load)."""
    background = document.get("background")
    return [("background load", background_text(background))] if isinstance(background, dict) else []


def to_markdown(table: TableData) -> str:
    """The table as GitHub-flavoured Markdown, its notes as a list below it."""

    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    lines = [f"**{cell(table.title)}**", ""]
    lines.append("| " + " | ".join(cell(h) for h in table.headers) + " |")
    lines.append("|" + "|".join("---:" if r else ":---" for r in table.right) + "|")
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in table.rows]
    if table.notes:
        lines.append("")
        lines += [f"- {cell(note)}" for note in table.notes]
    return "\n".join(lines) + "\n"


def to_rich(table: TableData) -> Any:
    """The table for a ``rich`` console, laid out so that no word is cut (cells wrap at spaces)."""
    from rich.table import Table
    from rich.text import Text

    from tritongen.report.table_layout import WholeWordTable

    out = Table(title=Text(table.title) if table.title else None)
    for header, right in zip(table.headers, table.right, strict=True):
        out.add_column(header, justify="right" if right else "left")
    colours = {"good": "bold green", "bad": "red", "muted": "dim"}
    for index, row in enumerate(table.rows):
        style = table.styles[index] if index < len(table.styles) else None
        out.add_row(*map(Text, row), style=colours.get(style or ""))  # cells are data, not markup
    return WholeWordTable(out)


def verification_table(outcomes: list[dict[str, Any]]) -> TableData:
    """Each model directory of a ``tritongen.convert/1`` document against the source."""
    rows: list[tuple[str, ...]] = []
    styles: list[str | None] = []
    for outcome in outcomes:
        check = outcome.get("verification") or {}
        outputs = check.get("outputs") or []
        tolerance = (
            f"rel RMS ≤ {check['rms']:g}"
            if check.get("rms") is not None
            else f"{check.get('atol', 0):g} + {check.get('rtol', 0):g}·|ref|"
            if check
            else ""
        )
        style = {"built": None, "kept": "bad", "failed": "bad"}.get(outcome["status"], "muted")
        if not outputs:
            rows.append((str(outcome["label"]), str(outcome["status"]), "–", "–", "–", "–", ""))
            styles.append(style)
        for i, output in enumerate(outputs):
            rows.append(
                (
                    str(outcome["label"]) if i == 0 else "",
                    str(outcome["status"]) if i == 0 else "",
                    str(output["name"]),
                    f"{output['max_abs_err']:.2e}",
                    f"{output['max_rel_err']:.2e}",
                    f"{output.get('rel_rms_err', 0.0):.2e}",
                    tolerance if i == 0 else "",
                )
            )
            styles.append(style)
    return TableData(
        title="verification against the source",
        headers=("model", "status", "output", "max abs err", "max rel err", "rel RMS", "tolerance"),
        rows=rows,
        right=(False, False, False, True, True, True, False),
        styles=styles,
    )


def accuracy_table(entries: list[tuple[str, dict[str, Any]]]) -> TableData:
    """Drift of reduced-precision variants from FP32: ``(label, precision report JSON)`` each."""
    rows: list[tuple[str, ...]] = []
    notes: list[str] = []
    for label, report in entries:
        accuracy = report.get("accuracy") or {}
        calibration = report.get("calibration") or {}
        kept = report.get("kept_fp32") or []
        calibrated = (
            f"{calibration.get('samples')} ({report.get('calibration_method')})"
            + (", random" if calibration.get("random") else "")
            if calibration
            else "–"
        )
        outputs = accuracy.get("outputs") or []
        if not outputs:
            rows.append((label, "–", "–", "–", "–", "–", calibrated, str(len(kept))))
        for i, output in enumerate(outputs):
            rows.append(
                (
                    label if i == 0 else "",
                    str(output["name"]),
                    task_figure(output),
                    f"{output['rel_rms_err']:.2e}",
                    f"{output['max_abs_err']:.2e}",
                    str(accuracy.get("samples", "–")) if i == 0 else "",
                    calibrated if i == 0 else "",
                    str(len(kept)) if i == 0 else "",
                )
            )
        if report.get("accuracy_data"):
            of = report.get("accuracy_of")
            where = f" ({of})" if of and of != "the artifact" else ""
            notes.append(f"{label}: measured on {report['accuracy_data']}{where}")
        if calibration.get("random"):
            notes.append(
                f"{label}: calibrated on random noise, not on real inputs; expect drift on real data"
            )
        if kept:
            shown = ", ".join(kept[:6]) + (f" and {len(kept) - 6} more" if len(kept) > 6 else "")
            notes.append(f"{label}: kept in FP32: {shown}")
    return TableData(
        title="accuracy against FP32",
        headers=(
            "variant",
            "output",
            "task figure",
            "rel RMS",
            "max abs",
            "samples",
            "calibrated on",
            "FP32 nodes",
        ),
        rows=rows,
        right=(False, False, False, True, True, True, False, True),
        notes=notes,
    )


def mixed_precision_table(label: str, mixed: dict[str, Any]) -> TableData:
    """The steps of the mixed-precision search: nodes kept in FP32, error and latency at each."""
    rows: list[tuple[str, ...]] = []
    styles: list[str | None] = []
    budget = float(mixed.get("max_error") or 0.0)
    for index, step in enumerate(mixed.get("steps") or []):
        rows.append(
            (
                str(index),
                str(step.get("added") or "(all reduced)"),
                str(len(step.get("kept") or [])),
                f"{float(step['error']):.3g}",
                f"{float(step['latency_ms']):.3f}",
            )
        )
        styles.append("good" if float(step["error"]) <= budget else None)
    return TableData(
        title=f"{label}: mixed precision, budget {mixed.get('metric')} ≤ {budget:g} "
        f"({mixed.get('candidates')} candidate nodes)",
        headers=("step", "node kept in FP32", "FP32 nodes", "error", "latency ms"),
        rows=rows,
        right=(True, False, True, True, True),
        styles=styles,
    )
