"""The ``tritongen.tune-llm/1`` document of a tune of a local vLLM model."""

from __future__ import annotations

from typing import Any

from tritongen import __version__
from tritongen.tune.llm.runner import LlmTuneReport, LlmTuneRequest

SCHEMA = "tritongen.tune-llm/1"


def tune_document(report: LlmTuneReport, request: LlmTuneRequest) -> dict[str, Any]:
    """Everything measured: the load, the baseline, each trial and its restart, the rounds, the winner."""
    llm = request.spec.llm
    confirmation = report.confirmation
    best = report.best_trial
    return {
        "schema": SCHEMA,
        "tritongen_version": __version__,
        "model": report.model,
        "objective": "goodput_per_s",
        "slo": llm.slo.text() if llm is not None else "",
        "load": {
            "api": llm.api if llm is not None else None,
            "mode": request.spec.mode,
            "level": request.spec.levels[0],
            "duration_s": request.spec.duration_s,
            "warmup_s": request.spec.warmup_s,
        },
        "baseline": {
            "settings": report.baseline.to_json(),
            "key": report.baseline.key,
            "measurement": report.baseline_measurement.to_json() if report.baseline_measurement else None,
        },
        "trials": [
            {
                "key": t.candidate.key,
                "settings": t.candidate.to_json(),
                "reload_s": t.reload_s,
                "measurement": t.measurement.to_json(),
            }
            for t in report.trials
        ],
        "skipped": report.skipped,
        "best_trial": best.candidate.key if best is not None else None,
        "confirmation": _confirmation(report) if confirmation is not None else None,
        "winner": {"key": report.winner.key, "settings": report.winner.to_json()} if report.winner else None,
        "winner_is_baseline": report.winner == report.baseline,
        "costs": {
            "server_start_s": report.server_start_s,
            "reloads_s": report.reload_total_s,
            "reload_per_trial_s": [t.reload_s for t in report.trials],
            "wall_s": report.wall_s,
        },
    }


def _confirmation(report: LlmTuneReport) -> dict[str, Any]:
    confirmation = report.confirmation
    assert confirmation is not None
    verdict = confirmation.verdict
    return {
        "finalist": confirmation.finalist.key,
        "rounds": len(confirmation.baseline_goodput),
        "baseline_goodput_per_s": confirmation.baseline_goodput,
        "finalist_goodput_per_s": confirmation.finalist_goodput,
        "ratio": confirmation.ratio.to_json() if confirmation.ratio is not None else None,
        "decision": verdict.decision if verdict is not None else None,
        "verdict": verdict.text() if verdict is not None else None,
        "finalist_reload_s": confirmation.reload_s,
        "runs": confirmation.runs,
    }
