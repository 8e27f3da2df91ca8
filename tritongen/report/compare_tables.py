"""The table of ``tritongen compare``: engines in ranked order, with their notes."""

from __future__ import annotations

from tritongen.compare.recommend import rank_labels
from tritongen.compare.result import CompareReport, CompareSettings
from tritongen.compare.result import EngineResult as CompareEngine
from tritongen.intervals import format_summary
from tritongen.loadtest.result import gpu_source_text
from tritongen.report.rounds_notes import stopping_notes
from tritongen.report.table_data import TableData, number_cell


def compare_table(report: CompareReport) -> TableData:
    """Engines in ranked order: latency, throughput, memory, cold start, precision, error."""
    settings = report.compare_settings()
    batch = settings.batch_size_throughput
    kinds = {e.memory_kind for e in report.engines if e.memory_kind}
    memory = "memory MB" + (" (GPU)" if kinds == {"gpu"} else " (RSS)" if kinds == {"cpu_rss"} else "")
    headers: tuple[str, ...] = (
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
    traced = any(
        e.p99_ms_trace is not None for e in report.engines
    )  # --trace: P99 under it, after the throughput
    if traced:
        headers = (*headers[:5], "P99 ms trace", *headers[5:])
    rows: list[tuple[str, ...]] = []
    styles: list[str | None] = []
    notes = []
    ranked_by = settings.rank_by
    ranks = rank_labels(report.engines, ranked_by, report.verdict_confidence())
    for engine, rank in zip(report.engines, ranks, strict=True):
        rows.append(
            (
                rank,
                f"{engine.label} ({engine.build})" if engine.build else engine.label,
                engine.status,
                _over_rounds(engine, "p99_ms_b1"),
                _over_rounds(engine, "infer_per_s_b32"),
                *((_over_rounds(engine, "p99_ms_trace"),) if traced else ()),
                number_cell(engine.peak_mem_bytes / 1e6 if engine.peak_mem_bytes is not None else None),
                number_cell(engine.first_infer_s),
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
    notes += _gpu_memory_note(report.engines) + _rounds_notes(report, settings)
    return TableData(
        title=f"{report.name}: engines ranked by {ranked_by}",
        headers=headers,
        rows=rows,
        right=(True, False, False, True, True, *((True,) if traced else ()), True, True, False, True, False),
        notes=notes,
        styles=styles,
    )


def measured_rounds(report: CompareReport) -> str | None:
    """How many interleaved rounds the figures rest on, as measured: ``4``, or ``3-5`` where engines differ.

    ``None`` before any round.
    """
    counts = sorted({e.rounds for e in report.engines if e.rounds})
    if not counts:
        return None
    return str(counts[0]) if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"


def rounds_fact(report: CompareReport, settings: CompareSettings) -> str:
    """The rounds behind each figure as measured, and the cap where ``--rounds auto`` chose them."""
    rounds = measured_rounds(report)
    cap = f" (--rounds auto, at most {settings.rounds})" if settings.stopping is not None else ""
    if rounds is None:
        return f"no round measured yet{cap}"
    return f"{rounds} interleaved round(s) per figure{cap}, {settings.confidence:.0%} intervals"


def _rounds_notes(report: CompareReport, settings: CompareSettings) -> list[str]:
    """What the figures are over, and with ``--rounds auto`` why the rounds stopped."""
    rounds = measured_rounds(report)
    if rounds is None:
        return []
    notes = [
        f"P99 and throughput: median ± half the {settings.confidence:.0%} interval over {rounds} "
        f"interleaved round(s); '=' ranks an engine level with the one above (their paired ratio's "
        "interval holds 1)"
    ]
    return notes + stopping_notes(settings.stopping, settings.confidence)


def _over_rounds(engine: CompareEngine, metric: str) -> str:
    """A figure as ``median ± half-interval`` when it was measured in rounds, else its value."""
    summary = engine.summary(metric)
    if summary is None:
        return number_cell(getattr(engine, metric))
    return format_summary(summary)


def _gpu_memory_note(engines: list[CompareEngine]) -> list[str]:
    """Where the engines' GPU memory came from, once; none where no engine is judged on GPU memory."""
    on_gpu = next((e for e in engines if e.memory_kind == "gpu" and e.gpu_memory_source), None)
    if on_gpu is None:
        return []
    return [f"GPU memory {gpu_source_text(on_gpu.gpu_memory_source, on_gpu.gpu_memory_scope)}"]
