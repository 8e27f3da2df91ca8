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

from tritongen import stopping
from tritongen.compare.result import EngineResult
from tritongen.loadtest.rounds import Rounds
from tritongen.stopping import Ending, StopRule, Verdict, judge, progress_text

__all__ = ["CRITERIA", "pair_verdicts", "progress_text", "record"]

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


def record(
    engines: Sequence[EngineResult], rounds: Rounds, rule: StopRule, confidence: float
) -> dict[str, Any]:
    """What the rounds decided, for the report: the rule, why they stopped and every pair's verdict.

    The engines' ``round_figures`` are those of ``rounds``.
    """
    verdicts = pair_verdicts(engines, rule, confidence, final=True)
    ending = Ending(rounds.completed, rounds.stopped_by, rounds.status, tuple(rounds.repeated))
    return stopping.record(rule, verdicts, ending, confidence, nothing="one engine: no pair to decide")
