"""``compare --rounds auto``: which pairs of engines the rounds so far decide, and when to stop.

Every pair of engines is judged on the figures the rounds decide (``--decide``: by default the
one the table is ranked by, throughput or the P99 of single requests) by
:func:`tritongen.stopping.judge` (an interval at a spent level, so that stopping at the first
decided look keeps the error rate). The rounds stop when every such pair is decided:
different, or equivalent within the margin. The other timed figure is reported with the
interval its pairs reached by then, and decides nothing about when to stop.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from tritongen.compare.result import EngineResult
from tritongen.errors import ConfigError
from tritongen.loadtest.rounds import Rounds
from tritongen.stopping import Ending, PairRecord, StopRule, Verdict, judge, progress_text, stopping_record

__all__ = ["CRITERIA", "FIGURES", "decided_figures", "pair_verdicts", "progress_text", "record"]

CRITERIA = {"p99_ms_b1": "P99 at batch 1", "infer_per_s_b32": "throughput"}
"""The figures measured in rounds (keys of each engine's ``round_figures``) and how the messages name them."""
FIGURES = {"latency": "p99_ms_b1", "throughput": "infer_per_s_b32", "trace": "p99_ms_trace"}
"""``--decide`` names (those of ``--rank-by``) of the figures rounds can decide."""


def decided_figures(names: Sequence[str] | None, rank_by: str) -> tuple[str, ...]:
    """The ``round_figures`` keys the rounds decide: ``names``, else the ``--rank-by`` figure.

    Ranked by memory (read, not timed), the rounds decide its tie-breaker, the P99.

    Raises:
        ConfigError: a name that is not a figure measured in rounds.
    """
    chosen = tuple(names) if names else (rank_by if rank_by in FIGURES else "latency",)
    unknown = [name for name in chosen if name not in FIGURES]
    if unknown:
        raise ConfigError(
            f"--decide {','.join(unknown)}: rounds decide only {' and '.join(FIGURES)}",
            "e.g. --decide throughput or --decide latency,throughput",
        )
    return tuple(FIGURES[name] for name in dict.fromkeys(chosen))


def pair_verdicts(
    engines: Sequence[EngineResult],
    rule: StopRule,
    confidence: float,
    final: bool = False,
    figures: Sequence[str] = tuple(CRITERIA),
) -> list[tuple[str, Verdict]]:
    """Each pair's verdict on each of ``figures``, named ``P99 at batch 1: A vs B``."""
    verdicts = []
    for name in figures:
        label = CRITERIA[name]
        for first, second in itertools.combinations(engines, 2):
            a = first.round_figures.get(name, [])
            b = second.round_figures.get(name, [])
            verdict = judge(a, b, confidence, rule.margin, final=final, last=rule.max_rounds)
            verdicts.append((f"{label}: {first.label} vs {second.label}", verdict))
    return verdicts


def record(
    engines: Sequence[EngineResult],
    rounds: Rounds,
    rule: StopRule,
    confidence: float,
    figures: Sequence[str] = tuple(CRITERIA),
) -> dict[str, Any]:
    """What the rounds decided, for the report: the rule, why they stopped and every pair's verdict.

    ``pairs`` are those of the deciding ``figures``; ``other_pairs`` those of the other timed
    figure, with the interval they reached (at the same spent level). The engines'
    ``round_figures`` are those of ``rounds``.
    """
    verdicts = pair_verdicts(engines, rule, confidence, final=True, figures=figures)
    ending = Ending(rounds.completed, rounds.stopped_by, rounds.status, tuple(rounds.repeated))
    found = stopping_record(rule, verdicts, ending, confidence, nothing="one engine: no pair to decide")
    others = [name for name in CRITERIA if name not in figures]
    other = pair_verdicts(engines, rule, confidence, final=True, figures=others)
    decided_on = tuple(CRITERIA[name] for name in figures)
    return replace(
        found,
        rule=f"{rule.text()}, on {' and '.join(decided_on)}",
        decided_on=decided_on,
        other_pairs=tuple(PairRecord.of(name, v) for name, v in other),
    ).to_json()
