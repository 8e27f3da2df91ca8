"""What each load kind adds to a load test's tables: LLM notes, the streaming table, the sequence table.

One function per kind, so that each can move to its kind's own module.
"""

from __future__ import annotations

from typing import Any

from tritongen.metrics.vllm import vllm_text
from tritongen.report.table_data import TableData, ms_cell, run_level


def llm_notes(run: dict[str, Any]) -> list[str]:
    """An LLM run's token figures: TTFT, ITL, TPOT (P50 / P99 ms), tokens/s, goodput; vLLM's figures."""
    if run.get("output_tokens_per_s") is None:
        return []
    parts = []
    for key, label in (("ttft_us", "TTFT"), ("itl_us", "ITL"), ("tpot_us", "TPOT")):
        figures = run.get(key) or {}
        parts.append(f"{label} {ms_cell(figures.get('p50'))} / {ms_cell(figures.get('p99'))} ms")
    server = [vllm_text(run["llm_server"])] if run.get("llm_server") else []
    return [
        f"{', '.join(parts)} (P50 / P99); {run['output_tokens_per_s']:,.1f} output tokens/s, goodput "
        f"{run.get('goodput_per_s') or 0:,.2f} req/s (tokens counted from {run.get('output_token_source')})",
        *server,
    ]


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
             *(ms_cell(first.get(k)) for k in ("p50", "p99", "p999")),
             *(ms_cell(between.get(k)) for k in ("p50", "p99", "p999")),
             ms_cell(total.get("p50")), ms_cell(total.get("p99")), str(run.get("errors", 0)))
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
             *(ms_cell(figures[f"sequence_{k}_us"]) for k in ("p50", "p90", "p99", "p999")),
             f"{run['qps']:,.0f}", ms_cell((run.get("latency_us") or {}).get("p99")),
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
