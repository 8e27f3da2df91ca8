"""What ``compare`` of an LLM found: each contender's figures, Triton over vLLM's server, the ranking.

Figures per contender: the median over rounds of goodput, output tokens/s, TTFT and ITL
(P50, P99), its cold start and peak memory. Triton's over vLLM's server per figure is a
paired ratio over the rounds with its interval; goodput decides the ranking, as ``compare``
decides (different, equivalent within the margin, or not decided: a tie).
"""

from __future__ import annotations

from typing import Any

from tritongen import __version__
from tritongen.compare.llm.contenders import LABELS, TRITON, VLLM, LlmCompareReport
from tritongen.compare.llm.figures import FIGURES, goodput_verdict, median, series
from tritongen.compare.llm.runner import LlmCompareRequest
from tritongen.intervals import paired_ratio
from tritongen.loadtest.result import RunResult
from tritongen.stopping import Verdict

SCHEMA = "tritongen.compare-llm/1"


def ranking(report: LlmCompareReport, verdict: Verdict) -> list[dict[str, Any]]:
    """The contenders by median goodput; a pair not shown different shares its rank (a tie)."""
    measured = [k for k in (VLLM, TRITON) if report.contenders[k].runs]
    ordered = sorted(measured, key=lambda k: -(median(series(report, k, "goodput_per_s")) or 0.0))
    tie = verdict.decision != "different"
    rows = []
    for index, key in enumerate(ordered):
        rank = 1 if tie or index == 0 else 2
        rows.append({"rank": rank, "contender": key, "label": LABELS[key]})
    for key, contender in report.contenders.items():
        if contender.unavailable is not None:
            rows.append(
                {"rank": None, "contender": key, "label": LABELS[key], "unavailable": contender.unavailable}
            )
    return rows


def _contender(report: LlmCompareReport, key: str) -> dict[str, Any]:
    contender = report.contenders[key]
    runs: list[RunResult] = contender.runs
    return {
        "label": LABELS[key],
        "unavailable": contender.unavailable,
        "cold_start_s": contender.cold_start_s,
        "memory_peak_bytes": contender.memory_peak_bytes,
        "rounds": len(runs),
        "errors": sum(r.errors for r in runs),
        "token_source": sorted({r.output_token_source for r in runs if r.output_token_source}),
        "medians": {figure: median(series(report, key, figure)) for figure in FIGURES},
        "per_round": {figure: series(report, key, figure) for figure in FIGURES},
    }


def compare_document(report: LlmCompareReport, request: LlmCompareRequest) -> dict[str, Any]:
    """The ``tritongen.compare-llm/1`` document."""
    verdict = goodput_verdict(report, request.rule, final=True, last=request.rounds)
    ratios = {}
    for figure in FIGURES:
        ratio = paired_ratio(series(report, TRITON, figure), series(report, VLLM, figure))
        ratios[figure] = ratio.to_json() if ratio is not None else None
    llm = request.spec.llm
    return {
        "schema": SCHEMA,
        "tritongen_version": __version__,
        "source": str(request.source),
        "engine_settings": report.settings.to_json() if report.settings else None,
        "load": {
            "mode": request.spec.mode,
            "level": request.spec.levels[0],
            "duration_s": request.spec.duration_s,
            "slo": llm.slo.text() if llm is not None else "",
        },
        "rounds": report.rounds,
        "contenders": {key: _contender(report, key) for key in report.contenders},
        "triton_over_vllm": ratios,
        "decision": {"figure": "goodput_per_s", "decision": verdict.decision, "verdict": verdict.text()},
        "ranking": ranking(report, verdict),
        "wall_s": report.wall_s,
    }
