"""What each load kind adds to a load test's tables: LLM notes, the streaming table, the sequence table.

One function per kind, so that each can move to its kind's own module.
"""

from __future__ import annotations

from tritongen.loadtest.result import LoadTestReport, RunResult
from tritongen.loadtest.sequences import sequence_figures
from tritongen.metrics.vllm import vllm_text
from tritongen.report.table_data import TableData, ms_cell, percentile_ms, run_label, run_style


def llm_notes(run: RunResult) -> list[str]:
    """An LLM run's token figures: TTFT, ITL, TPOT (P50 / P99 ms), tokens/s, goodput; vLLM's figures."""
    if run.output_tokens_per_s is None:
        return []
    parts = [
        f"{label} {percentile_ms(figures, 'p50')} / {percentile_ms(figures, 'p99')} ms"
        for figures, label in ((run.ttft_us, "TTFT"), (run.itl_us, "ITL"), (run.tpot_us, "TPOT"))
    ]
    server = [vllm_text(run.llm_server)] if run.llm_server else []
    return [
        f"{', '.join(parts)} (P50 / P99); {run.output_tokens_per_s:,.1f} output tokens/s, goodput "
        f"{run.goodput_per_s or 0:,.2f} req/s (tokens counted from {run.output_token_source})",
        *server,
    ]


def llm_line(level: str, run: RunResult) -> str:
    """The console's line of an LLM run: TTFT, ITL and TPOT (P50 / P99, ms), tokens/s, goodput."""

    def ms(figures: dict[str, float] | None) -> str:
        if not figures:
            return "–"
        return f"{figures['p50'] / 1000:.2f} / {figures['p99'] / 1000:.2f} ms"

    per_user = run.output_tokens_per_s_per_user
    return (
        f"{level} TTFT {ms(run.ttft_us)}, ITL {ms(run.itl_us)}, TPOT {ms(run.tpot_us)} (P50 / P99); "
        f"{run.output_tokens_per_s or 0:,.1f} output tokens/s"
        + (f" ({per_user:,.1f} per user)" if per_user is not None else "")
        + f", goodput {run.goodput_per_s or 0:,.2f} req/s; tokens counted from {run.output_token_source}"
    )


def streaming_table(report: LoadTestReport) -> TableData | None:
    """Per streaming run: responses, time to first response, time between responses, total (else ``None``)."""
    headers = ("level", "req/s", "resp/s", "resp/req", "first P50", "first P99", "first P99.9", "gap P50",
               "gap P99", "gap P99.9", "total P50", "total P99", "err")  # fmt: skip
    rows: list[tuple[str, ...]] = []
    styles: list[str | None] = []
    for run in report.runs:
        if not run.streaming:
            continue
        first = run.latencies_us.get("first_response")
        between = run.latencies_us.get("between_responses")
        per_request = run.responses_per_request
        per_request_text = "–" if per_request is None else f"{per_request:.3g}"
        rows.append(
            (run_label(run, report.rounds), f"{run.qps:,.1f}", f"{run.responses_per_s or 0.0:,.1f}",
             per_request_text, *(percentile_ms(first, k) for k in ("p50", "p99", "p999")),
             *(percentile_ms(between, k) for k in ("p50", "p99", "p999")),
             percentile_ms(run.latency_us, "p50"), percentile_ms(run.latency_us, "p99"), str(run.errors))
        )  # fmt: skip
        styles.append(run_style(run))
    if not rows:
        return None
    return TableData(
        title=f"{report.model} streaming (decoupled, gRPC), latency in ms",
        headers=headers,
        rows=rows,
        right=(True,) * len(headers),
        notes=[
            "first: send to the first response; gap: from one response to the next; total: send to the "
            "final response; resp/req: responses with outputs per request that finished without error"
        ],
        styles=styles,
    )


def sequence_table(report: LoadTestReport) -> TableData | None:
    """Per run of a sequence model: sequences/s, requests per sequence and sequence time (else ``None``)."""
    headers = ("level", "seq/s", "req/seq", "seq P50", "seq P90", "seq P99", "seq P99.9", "req/s",
               "req P99", "seq err", "err")  # fmt: skip
    rows: list[tuple[str, ...]] = []
    styles: list[str | None] = []
    for run in report.runs:
        figures = sequence_figures(run.latencies_us, run.counts, run.duration_s)
        if figures is None:
            continue
        per_sequence = figures["requests_per_sequence"]
        per_sequence_text = "–" if per_sequence is None else f"{per_sequence:.3g}"
        rows.append(
            (run_label(run, report.rounds), f"{figures['sequences_per_s'] or 0.0:,.1f}", per_sequence_text,
             *(ms_cell(figures[f"sequence_{k}_us"]) for k in ("p50", "p90", "p99", "p999")),
             f"{run.qps:,.0f}", percentile_ms(run.latency_us, "p99"),
             str(figures["sequence_errors"]), str(run.errors))
        )  # fmt: skip
        styles.append(run_style(run))
    if not rows:
        return None
    return TableData(
        title=f"{report.model} sequences (stateful), time in ms",
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
