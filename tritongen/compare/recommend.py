"""Which engine to choose, from the measured numbers alone.

Three situations, each judged on one figure: latency-bound online serving on the P99 of
single requests, throughput-bound batch serving on inferences/s at batch 32, memory-bound
edge deployment on peak memory. Nothing is known about any engine in advance: the winner
is the engine with the best figure, the reason is its ratio to the runner-up, and when
the two are closer than the machine's noise the next figure decides and says so.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tritongen.compare.result import EngineResult, Recommendation

NOISE = 0.05
"""Two figures closer than this (relative) are a tie: repeated runs differ by that much."""
TRADE_OFF = 1.5
"""A winner this much worse than the best on another figure gets that stated."""


@dataclass(frozen=True)
class Criterion:
    """One figure engines are judged on."""

    metric: str
    lower_is_better: bool
    better: str
    """The ratio's words, e.g. ``lower P99 than``."""
    unit: Callable[[float], str]

    def value(self, engine: EngineResult) -> float | None:
        """The engine's figure."""
        value = getattr(engine, self.metric)
        return float(value) if value is not None else None

    def ratio(self, best: float, other: float) -> float:
        """How much better ``best`` is than ``other`` (≥ 1)."""
        if self.lower_is_better:
            return other / best if best > 0 else float("inf")
        return best / other if other > 0 else float("inf")


def _ms(value: float) -> str:
    return f"{value:#.3g} ms" if value < 100 else f"{value:,.0f} ms"


def _per_s(value: float) -> str:
    return f"{value:,.0f} infer/s"


def _mb(value: float) -> str:
    return f"{value / 1e6:,.0f} MB"


CRITERIA = {
    "latency": Criterion("p99_ms_b1", True, "lower P99 than", _ms),
    "throughput": Criterion("infer_per_s_b32", False, "the throughput of", _per_s),
    "memory": Criterion("peak_mem_bytes", True, "less memory than", _mb),
}

SITUATIONS = (
    ("latency", "latency-bound online serving", "throughput"),
    ("throughput", "throughput-bound batch serving", "latency"),
    ("memory", "memory-bound edge deployment", "latency"),
)
"""(situation, title, tie-breaker)."""

RANK_KEYS = tuple(CRITERIA)


def rank(engines: list[EngineResult], by: str = "throughput") -> list[EngineResult]:
    """Measured engines best first on ``by``, then those without the figure, then the rest."""
    criterion = CRITERIA[by]

    def key(engine: EngineResult) -> tuple[int, float]:
        value = criterion.value(engine)
        if not engine.ok:
            return (2, 0.0)
        if value is None:
            return (1, 0.0)
        return (0, value if criterion.lower_is_better else -value)

    return sorted(engines, key=key)


def recommend(engines: list[EngineResult], max_drift: float | None = None) -> list[Recommendation]:
    """One recommendation per situation, computed from the measured engines.

    Reduced-precision engines drifting more than ``max_drift`` (relative RMS error against
    FP32) are left out; a reduced-precision winner's drift is stated next to its speed-up
    over the best FP32 engine, so speed is always weighed against accuracy in the text.
    """
    eligible = [e for e in engines if not _too_far(e, max_drift)]
    excluded = [e for e in engines if e.ok and _too_far(e, max_drift)]
    recommendations = []
    for situation, title, tie_breaker in SITUATIONS:
        rec = _recommend(situation, title, tie_breaker, eligible)
        if excluded and max_drift is not None:
            rec.reason += "; not considered: " + ", ".join(
                f"{e.label} (drift {e.drift:.2g} > {max_drift:g})" for e in excluded
            )
        recommendations.append(rec)
    return recommendations


def _too_far(engine: EngineResult, max_drift: float | None) -> bool:
    return max_drift is not None and engine.drift is not None and engine.drift > max_drift


def _recommend(situation: str, title: str, tie_breaker: str, engines: list[EngineResult]) -> Recommendation:
    criterion = CRITERIA[situation]
    measured = [(e, v) for e in engines if e.ok and (v := criterion.value(e)) is not None]
    if not measured:
        return Recommendation(
            situation, title, None, criterion.metric, None, None, None, None,
            f"no engine has a {criterion.metric} figure",
        )  # fmt: skip
    ordered = sorted(measured, key=lambda ev: ev[1] if criterion.lower_is_better else -ev[1])
    best, best_value = ordered[0]
    if len(ordered) == 1:
        return Recommendation(
            situation, title, best.format, criterion.metric, best_value, None, None, None,
            f"{best.label}: the only engine measured ({criterion.unit(best_value)})"
            + _accuracy(best, engines, criterion, None), best.model,
        )  # fmt: skip
    runner, runner_value = ordered[1]
    ratio = criterion.ratio(best_value, runner_value)
    if ratio < 1 + NOISE:
        best, runner, reason = _break_tie(criterion, tie_breaker, best, runner)
        best_value = criterion.value(best) or best_value
        runner_value = criterion.value(runner) or runner_value
        ratio = criterion.ratio(best_value, runner_value) if best_value and runner_value else 1.0
    else:
        reason = (
            f"{best.label}: {ratio:.1f}× {criterion.better} {runner.label} "
            f"({criterion.unit(best_value)} vs {criterion.unit(runner_value)})"
        )
    reason += _trade_offs(best, engines, situation)
    reason += _accuracy(best, engines, criterion, runner)
    return Recommendation(
        situation,
        title,
        best.format,
        criterion.metric,
        best_value,
        runner.format,
        runner_value,
        ratio,
        reason,
        best.model,
    )


def _break_tie(
    criterion: Criterion, tie_breaker: str, first: EngineResult, second: EngineResult
) -> tuple[EngineResult, EngineResult, str]:
    """Two engines within the noise: the tie-breaking figure picks one."""
    a, b = criterion.value(first), criterion.value(second)
    assert a is not None and b is not None
    figures = f"{criterion.unit(a)} vs {criterion.unit(b)}"
    tie = f"{first.label} and {second.label} are within {NOISE:.0%} ({figures})"
    other = CRITERIA[tie_breaker]
    x, y = other.value(first), other.value(second)
    if x is None or y is None or other.ratio(x, y) == 1.0:
        return first, second, f"{first.label}: {tie}, a tie on this machine"
    if (x < y) == other.lower_is_better:
        winner, loser, wv, lv = first, second, x, y
    else:
        winner, loser, wv, lv = second, first, y, x
    return (
        winner,
        loser,
        (
            f"{winner.label}: {tie}; {winner.label} has {other.ratio(wv, lv):.1f}× {other.better} "
            f"{loser.label} ({other.unit(wv)} vs {other.unit(lv)})"
        ),
    )


def _trade_offs(winner: EngineResult, engines: list[EngineResult], situation: str) -> str:
    """What the winner gives up on the other figures, where it gives up much."""
    notes = []
    for other_situation, criterion in CRITERIA.items():
        if other_situation == situation:
            continue
        mine = criterion.value(winner)
        values = [(e, v) for e in engines if e.ok and (v := criterion.value(e)) is not None]
        if mine is None or not values:
            continue
        best, best_value = min(values, key=lambda ev: ev[1] if criterion.lower_is_better else -ev[1])
        if best is winner:
            continue
        ratio = criterion.ratio(best_value, mine)
        if ratio >= TRADE_OFF:
            amount = (
                {"latency": f"{ratio:.1f}× the P99", "memory": f"{ratio:.1f}× the memory"}[other_situation]
                + f" of {best.label}"
                if criterion.lower_is_better
                else f"{ratio:.1f}× less throughput than {best.label}"
            )
            notes.append(amount)
    return f"; trade-off: {', '.join(notes)}" if notes else ""


def _accuracy(
    engine: EngineResult, engines: list[EngineResult], criterion: Criterion, runner: EngineResult | None
) -> str:
    """What a reduced-precision winner costs in accuracy, beside what it gains over FP32.

    The gain over the best FP32 engine is stated unless that engine is the runner-up,
    whose ratio the reason gives already.
    """
    if not engine.reduced:
        return ""
    if engine.drift_headline is not None or engine.drift is not None:
        cost = (
            f"; {engine.precision} drifts from FP32: {engine.drift_headline or f'rel RMS {engine.drift:.2g}'}"
        )
    elif engine.max_abs_err is not None:
        cost = f"; {engine.precision}, max error {engine.max_abs_err:.1e} against the source"
    else:
        cost = f"; {engine.precision}, accuracy not measured"
    mine = criterion.value(engine)
    full = [(e, v) for e in engines if e.ok and not e.reduced and (v := criterion.value(e)) is not None]
    if mine is None or not full:
        return cost
    best, value = min(full, key=lambda ev: ev[1] if criterion.lower_is_better else -ev[1])
    if best is runner:
        return cost
    ratio = criterion.ratio(mine, value)
    return (
        cost
        + f"; {ratio:.1f}× {criterion.better} the best FP32 engine, {best.label} ({criterion.unit(value)})"
    )
