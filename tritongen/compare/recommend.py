"""Which engine to choose, from the measured numbers alone, and only where they differ beyond the noise.

Three situations, each judged on one figure: latency-bound online serving on the P99 of
single requests, throughput-bound batch serving on inferences/s at batch 32, memory-bound
edge deployment on peak memory. Timed figures are samples of interleaved rounds: the
winner is the engine with the best median, and it is *claimed* only when the paired
ratio to the runner-up (taken per round) has an interval that excludes 1. Otherwise the
two are a tie: the next figure decides if it differs beyond the noise, else the
recommendation says that no engine is measurably better. Memory is read, not timed:
two resident sizes within :data:`MEMORY_TOLERANCE` are a tie.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tritongen.compare.result import EngineResult, Recommendation
from tritongen.intervals import DEFAULT_CONFIDENCE, half_text, paired_ratio

MEMORY_TOLERANCE = 0.05
"""Memory figures closer than this (relative) are a tie (resident sizes vary by a few pages)."""
TRADE_OFF = 1.5
"""A winner this much worse than the best on another figure (beyond the noise) gets that stated."""


@dataclass(frozen=True)
class Criterion:
    """One figure engines are judged on."""

    metric: str
    lower_is_better: bool
    better: str
    """The ratio's words, e.g. ``lower P99 than``."""
    unit: Callable[[float], str]
    words: str
    """The figure in words, e.g. ``P99 at batch 1``."""
    timed: bool = True
    """Measured in rounds (paired ratios); memory is read once."""

    def value(self, engine: EngineResult) -> float | None:
        """The engine's figure (its median over rounds)."""
        value = getattr(engine, self.metric)
        return float(value) if value is not None else None

    def ratio(self, best: float, other: float) -> float:
        """How much better ``best`` is than ``other`` (≥ 1)."""
        if self.lower_is_better:
            return other / best if best > 0 else float("inf")
        return best / other if other > 0 else float("inf")

    def figure(self, engine: EngineResult) -> str:
        """The engine's figure for a sentence: ``61,880 ± 900 infer/s`` over rounds, else the value."""
        value = self.value(engine)
        if value is None:
            return "–"
        summary = engine.summary(self.metric)
        half = summary.half_width if summary is not None else None
        text = self.unit(value)
        if half is None:
            return text
        number, _, unit = text.partition(" ")
        return f"{number} ± {half_text(half, number)} {unit}".rstrip()


def _ms(value: float) -> str:
    return f"{value:#.3g} ms" if value < 100 else f"{value:,.0f} ms"


def _per_s(value: float) -> str:
    return f"{value:,.0f} infer/s"


def _mb(value: float) -> str:
    return f"{value / 1e6:,.0f} MB"


CRITERIA = {
    "latency": Criterion("p99_ms_b1", True, "lower P99 than", _ms, "P99 at batch 1"),
    "throughput": Criterion("infer_per_s_b32", False, "the throughput of", _per_s, "throughput"),
    "memory": Criterion("peak_mem_bytes", True, "less memory than", _mb, "memory", timed=False),
    "trace": Criterion(
        "p99_ms_trace", True, "lower P99 under the trace than", _ms, "P99 under the recorded trace"
    ),
}

SITUATIONS = (
    ("latency", "latency-bound online serving", "throughput"),
    ("throughput", "throughput-bound batch serving", "latency"),
    ("memory", "memory-bound edge deployment", "latency"),
    ("trace", "the traffic recorded in --trace", "throughput"),
)
"""(situation, title, tie-breaker)."""

RANK_KEYS = tuple(CRITERIA)


@dataclass(frozen=True)
class Verdict:
    """How much better one engine is than another on one figure, and whether that is beyond the noise."""

    factor: float
    """≥ 1 when the first engine is better."""
    low: float | None
    high: float | None
    significant: bool
    noise: float | None
    """Half the interval's relative width (0.04 = ±4%); ``None`` without an interval."""
    rounds: int
    timed: bool = True
    """A timed figure (memory is read once, judged with :data:`MEMORY_TOLERANCE`)."""

    @classmethod
    def unpaired(
        cls, factor: float, significant: bool = False, rounds: int = 0, *, timed: bool = True
    ) -> Verdict:
        """A verdict without an interval: memory (one reading each), or no rounds to pair."""
        return cls(
            factor, low=None, high=None, significant=significant, noise=None, rounds=rounds, timed=timed
        )

    def text(self) -> str:
        """``1.30× [1.21, 1.39]`` (paired over rounds), or ``1.30×`` (memory, or one round)."""
        if self.low is None or self.high is None:
            return f"{self.factor:.2f}×"
        return f"{self.factor:.2f}× [{self.low:.2f}, {self.high:.2f}]"

    def within(self) -> str:
        """Why a difference is not claimed, e.g. ``within noise (±4.1%)``."""
        if self.noise is not None:
            return (
                f"within noise ({self.text()}, ±{self.noise:.0%})"
                if self.noise < 1
                else f"within noise ({self.text()})"
            )
        if not self.timed:
            return f"within {MEMORY_TOLERANCE:.0%}"
        if self.rounds == 0:
            return "not established (not measured in paired rounds)"
        return "not established (one round: no interval; measure with --rounds 3 or more)"


def verdict(
    criterion: Criterion, first: EngineResult, second: EngineResult, confidence: float = DEFAULT_CONFIDENCE
) -> Verdict | None:
    """How much better ``first`` is than ``second`` on ``criterion``; ``None`` when either lacks it.

    Timed figures are paired round by round (the interval of the mean log ratio); memory is
    one reading each, a tie within :data:`MEMORY_TOLERANCE`.
    """
    a, b = criterion.value(first), criterion.value(second)
    if a is None or b is None:
        return None
    factor = criterion.ratio(a, b)
    if not criterion.timed:
        significant = factor >= 1 + MEMORY_TOLERANCE or factor <= 1 / (1 + MEMORY_TOLERANCE)
        return Verdict.unpaired(factor, significant, rounds=1, timed=False)
    ratio = paired_ratio(
        first.round_figures.get(criterion.metric, []),
        second.round_figures.get(criterion.metric, []),
        confidence,
    )
    if ratio is None:  # not measured in rounds (an older report, or stopped before a round): nothing claimed
        return Verdict.unpaired(factor)
    if criterion.lower_is_better:
        ratio = ratio.inverse()
    return Verdict(ratio.estimate, ratio.low, ratio.high, ratio.significant, ratio.noise, ratio.rounds)


def rank(engines: list[EngineResult], by: str = "throughput") -> list[EngineResult]:
    """Measured engines best first on ``by`` (medians), then those without the figure, then the rest."""
    criterion = CRITERIA[by]

    def key(engine: EngineResult) -> tuple[int, float]:
        value = criterion.value(engine)
        if not engine.ok:
            return (2, 0.0)
        if value is None:
            return (1, 0.0)
        return (0, value if criterion.lower_is_better else -value)

    return sorted(engines, key=key)


def rank_labels(engines: list[EngineResult], by: str, confidence: float = DEFAULT_CONFIDENCE) -> list[str]:
    """The rank column of ranked ``engines``: ``1``, ``=1`` for a tie with the engine above, then ``3``.

    An engine shares a rank when its paired ratio with the first engine of that rank does
    not exclude 1. Engines that were not measured get an empty label.
    """
    criterion = CRITERIA[by]
    measured = [e for e in engines if e.ok and criterion.value(e) is not None]
    if criterion.timed and not any(e.rounds for e in measured):
        # Measured once (an older report): positions only, no claim either way.
        positions = iter(range(1, len(measured) + 1))
        return [str(next(positions)) if e in measured else "" for e in engines]
    labels: list[str] = []
    leader: EngineResult | None = None
    shared = 0
    for position, engine in enumerate(engines, start=1):
        if engine not in measured:
            labels.append("")
            continue
        # Level with the first engine of the shared rank, not only with the one just above.
        found = verdict(criterion, leader, engine, confidence) if leader is not None else None
        if found is not None and not found.significant:
            labels.append(f"={shared}")
        else:
            shared, leader = position, engine
            labels.append(str(position))
    return labels


def recommend(
    engines: list[EngineResult], max_drift: float | None = None, confidence: float = DEFAULT_CONFIDENCE
) -> list[Recommendation]:
    """One recommendation per situation, computed from the measured engines.

    Reduced-precision engines drifting more than ``max_drift`` (relative RMS error against
    FP32) are left out; a reduced-precision winner's drift is stated next to its speed-up
    over the best FP32 engine, so speed is always weighed against accuracy in the text.
    """
    eligible = [e for e in engines if not _too_far(e, max_drift)]
    excluded = [e for e in engines if e.ok and _too_far(e, max_drift)]
    recommendations = []
    for situation, title, tie_breaker in SITUATIONS:
        if situation == "trace" and not any(CRITERIA["trace"].value(e) is not None for e in engines):
            continue  # no trace replayed
        rec = _recommend(situation, title, tie_breaker, eligible, confidence)
        if excluded and max_drift is not None:
            rec.reason += "; not considered: " + ", ".join(
                f"{e.label} (drift {e.drift:.2g} > {max_drift:g})" for e in excluded
            )
        recommendations.append(rec)
    return recommendations


def _too_far(engine: EngineResult, max_drift: float | None) -> bool:
    return max_drift is not None and engine.drift is not None and engine.drift > max_drift


def _recommend(
    situation: str, title: str, tie_breaker: str, engines: list[EngineResult], confidence: float
) -> Recommendation:
    criterion = CRITERIA[situation]
    measured = [(e, v) for e in engines if e.ok and (v := criterion.value(e)) is not None]
    if not measured:
        return Recommendation(
            situation, title, format=None, metric=criterion.metric, value=None, runner_up=None,
            runner_up_value=None, ratio=None, reason=f"no engine has a {criterion.metric} figure",
        )  # fmt: skip
    ordered = sorted(measured, key=lambda ev: ev[1] if criterion.lower_is_better else -ev[1])
    best, best_value = ordered[0]
    if len(ordered) == 1:
        return Recommendation(
            situation, title, best.format, criterion.metric, best_value, runner_up=None, runner_up_value=None,
            ratio=None, reason=f"{best.label}: the only engine measured ({criterion.figure(best)})"
            + _accuracy(best, engines, criterion, runner=None, confidence=confidence), model=best.model,
            significant=True,
        )  # fmt: skip
    runner = ordered[1][0]
    found = verdict(criterion, best, runner, confidence) or Verdict.unpaired(1.0)
    if found.significant and found.factor < 1:
        # The paired ratio (geometric mean over rounds) disagrees with the medians: it decides.
        best, runner = runner, best
        found = verdict(criterion, best, runner, confidence) or found
    decided_by = criterion.metric
    if found.significant:
        figures = _pair(criterion, best, runner)
        reason = f"{best.label}: {found.text()} {criterion.better} {runner.label} ({figures})"
        chosen = found
    else:
        best, runner, reason, chosen, decided_by = _break_tie(
            criterion, tie_breaker, best, runner, found, confidence
        )
    if chosen.significant:  # a winner: what it gives up, and what it costs in accuracy
        reason += _trade_offs(best, engines, situation, confidence)
        reason += _accuracy(best, engines, criterion, runner, confidence)
    return Recommendation(
        situation,
        title,
        best.format,
        criterion.metric,
        criterion.value(best),
        runner.format,
        criterion.value(runner),
        chosen.factor,
        reason,
        best.model,
        significant=chosen.significant,
        ratio_low=chosen.low,
        ratio_high=chosen.high,
        decided_by=decided_by,
    )


def _pair(criterion: Criterion, first: EngineResult, second: EngineResult) -> str:
    return f"{criterion.figure(first)} vs {criterion.figure(second)}"


def _break_tie(
    criterion: Criterion,
    tie_breaker: str,
    first: EngineResult,
    second: EngineResult,
    tie: Verdict,
    confidence: float,
) -> tuple[EngineResult, EngineResult, str, Verdict, str]:
    """Two engines within the noise: the tie-breaking figure picks one if it differs beyond its noise.

    Returns (winner, loser, reason, the verdict given, the metric that verdict is about).
    """
    figures = _pair(criterion, first, second)
    words = f"{first.label} and {second.label} are {tie.within()} on {criterion.words} ({figures})"
    other = CRITERIA[tie_breaker]
    found = verdict(other, first, second, confidence)
    if found is None or not found.significant:
        also = f"; {other.words} does not separate them either" if found is not None else ""
        return first, second, f"no engine is measurably better: {words}{also}", tie, criterion.metric
    winner, loser = (first, second) if found.factor > 1 else (second, first)
    if winner is second:
        found = verdict(other, second, first, confidence) or found
    reason = (
        f"{winner.label}: {words}; {winner.label} has {found.text()} {other.better} {loser.label} "
        f"({_pair(other, winner, loser)})"
    )
    return winner, loser, reason, found, other.metric


def _trade_offs(winner: EngineResult, engines: list[EngineResult], situation: str, confidence: float) -> str:
    """What the winner gives up on the other figures, where it gives up much, beyond the noise."""
    notes = []
    for other_situation, criterion in CRITERIA.items():
        if other_situation == situation:
            continue
        values = [(e, v) for e in engines if e.ok and (v := criterion.value(e)) is not None]
        if criterion.value(winner) is None or not values:
            continue
        best, _ = min(values, key=lambda ev: ev[1] if criterion.lower_is_better else -ev[1])
        if best is winner:
            continue
        found = verdict(criterion, best, winner, confidence)
        if found is None or found.factor < TRADE_OFF or not found.significant:
            continue
        ratio = found.text()
        amount = (
            {"latency": f"{ratio} the P99", "memory": f"{ratio} the memory"}[other_situation]
            + f" of {best.label}"
            if criterion.lower_is_better
            else f"{ratio} less throughput than {best.label}"
        )
        notes.append(amount)
    return f"; trade-off: {', '.join(notes)}" if notes else ""


def _accuracy(
    engine: EngineResult,
    engines: list[EngineResult],
    criterion: Criterion,
    runner: EngineResult | None,
    confidence: float,
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
    full = [(e, v) for e in engines if e.ok and not e.reduced and (v := criterion.value(e)) is not None]
    if criterion.value(engine) is None or not full:
        return cost
    best, _ = min(full, key=lambda ev: ev[1] if criterion.lower_is_better else -ev[1])
    if best is runner:
        return cost
    found = verdict(criterion, engine, best, confidence)
    if found is None:
        return cost
    if not found.significant:
        return (
            cost + f"; {found.within()} against the best FP32 engine, {best.label} ({criterion.figure(best)})"
        )
    return (
        cost
        + f"; {found.text()} {criterion.better} the best FP32 engine, {best.label} ({criterion.figure(best)})"
    )
