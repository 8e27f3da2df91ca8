"""``compare --rounds auto``: which pairs of engines the rounds so far decide, and when to stop.

Every pair of engines is judged on both deciding figures, P99 of single requests and
throughput, by :func:`tritongen.stopping.judge` (an interval at a spent level, so that stopping
at the first decided look keeps the error rate). The rounds stop when every pair is decided:
different, or equivalent within the margin.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from tritongen.compare.result import EngineResult
from tritongen.loadtest.rounds import Rounds
from tritongen.stopping import MIN_ROUNDS, StopRule, Verdict, first_open, judge, spent_confidence

CRITERIA = {"p99_ms_b1": "P99 at batch 1", "infer_per_s_b32": "throughput"}
"""The deciding figures (keys of each engine's ``round_figures``) and how the messages name them."""


def pair_verdicts(
    engines: Sequence[EngineResult], rule: StopRule, confidence: float, final: bool = False
) -> list[tuple[str, Verdict]]:
    """Each pair's verdict on each deciding figure, named ``P99 at batch 1: A vs B``."""
    verdicts = []
    for name, label in CRITERIA.items():
        for first, second in itertools.combinations(engines, 2):
            a = first.round_figures.get(name, [])
            b = second.round_figures.get(name, [])
            verdict = judge(a, b, confidence, rule.margin, final=final)
            verdicts.append((f"{label}: {first.label} vs {second.label}", verdict))
    return verdicts


def progress_text(verdicts: Sequence[tuple[str, Verdict]]) -> str:
    """The pair furthest from a decision and its interval, e.g. ``throughput: A vs B deciding: …``."""
    found = first_open(verdicts)
    if found is None:
        return "every pair decided"
    open_count = sum(v.decision is None for _, v in verdicts)
    return f"{open_count} pair(s) open; {found[0]} {found[1].text()}"


def record(
    engines: Sequence[EngineResult], rounds: Rounds, rule: StopRule, confidence: float
) -> dict[str, Any]:
    """What the rounds decided, for the report: the rule, why they stopped and every pair's verdict.

    The engines' ``round_figures`` are those of ``rounds``.
    """
    verdicts = pair_verdicts(engines, rule, confidence, final=True)
    if not verdicts:
        why = "one engine: no pair to decide"
    elif rounds.stopped_by == "decided":
        why = "every pair decided"
    elif rounds.stopped_by == "max-minutes":
        why = f"--max-minutes {rule.max_minutes:g} reached"
    elif rounds.status != "ok":
        why = f"rounds {rounds.status}"
    else:
        why = f"--max-rounds {rule.max_rounds} reached"
    return {
        "rule": rule.text(),
        "stopped": why,
        "rounds": rounds.completed,
        "confidence": spent_confidence(max(rounds.completed, MIN_ROUNDS), confidence),
        "pairs": [
            {
                "pair": name,
                "decision": v.decision,
                "text": v.text(),
                "ratio": v.ratio.estimate if v.ratio else None,
                "low": v.ratio.low if v.ratio else None,
                "high": v.ratio.high if v.ratio else None,
            }
            for name, v in verdicts
        ],
    }
