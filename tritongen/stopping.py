"""Rounds that stop when the answer is known: paired ratios judged so that stopping early keeps its error.

A t interval rechecked after every round and stopped at the first that excludes 1 calls far
more than 5% of true ties different: each look is another chance. Here the look after round
n uses the interval at a *spent* level. With a cap of N rounds (``--max-rounds``; every use
here has one), the looks are rounds n0 … N (n0 = ``MIN_ROUNDS``, the first round with an
interval worth the name), and each gets an equal share of the error rate alpha,
``alpha / (N - n0 + 1)``. Without a cap, the look after round n gets ``alpha * n0 / (n * (n +
1))``, which adds up to alpha over every look however many there are (``sum n0 / (n (n + 1))
= 1`` from n0 on). Either way, by the union bound, the chance that any look calls a true tie
different is at most alpha (a time cap only ends the looks sooner, spending less). Equal
shares within the cap keep the late looks' intervals from widening as the rounds add up: with
the uncapped series, the 8th look's level is 99.79%, with equal shares over a cap of 8 it is
99.17%, so a difference that the rounds resolve only by then is still called.

A pair (a contender against its reference) is decided at the first look whose spent
interval of the ratio either excludes 1 (``different``) or lies inside the equivalence margin
``[1 / (1 + m), 1 + m]`` (``equivalent``: "equivalent within 5%"); at the cap it is
``undecided``, with the interval it reached.

A near tie whose spread is wider than the margin can never be called equivalent, and one
whose difference is inside the noise may never be called different: waiting for the cap then
only spends rounds. So each look also projects the cap from the rounds so far: the final mean
log ratio as the mean so far plus the rounds still to come, drawn with the spread measured so
far, and the interval at the cap's spent level around it. When that projection gives the pair
less than ``FUTILITY_CHANCE`` of a decision, it stops as ``unresolvable``: "no difference this
machine can resolve (±X%)", X being the half width the cap's interval would have. This only
stops pairs that would not have been called different, so the error rate stays within alpha;
it costs some power, which the simulations in the tests bound (a 10% difference is still found
in at least 90% of runs).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from statistics import NormalDist
from typing import Any, Literal

from tritongen.errors import ConfigError
from tritongen.intervals import DEFAULT_CONFIDENCE, Ratio, paired_ratio, t_quantile

MIN_ROUNDS = 3
"""The first look: a t interval of fewer rounds is too wide to decide anything."""
DEFAULT_EQUIVALENCE = 0.05
"""Two contenders whose ratio is known to lie within 5% of 1 are called equivalent."""
DEFAULT_MAX_ROUNDS = 20
BUSY_REPEATS = 3
"""``--rounds auto`` measures a round flagged busy again instead of counting it, this many times at most."""
DEFAULT_MAX_MINUTES = 10.0
"""No round of ``--rounds auto`` starts after this many minutes of rounds (decisions in minutes)."""

FUTILITY_CHANCE = 0.05
"""A pair stops as ``unresolvable`` once the cap, projected from the rounds so far, gives it less
than this chance of a decision."""
Side = Literal["both", "greater"]
"""What decides a pair: a difference either way and equivalence (``both``), or only whether A
can be shown greater than B (``greater``: a candidate that cannot beat its reference is done)."""
FUTILITY_FROM: dict[Side, int] = {"both": MIN_ROUNDS + 1, "greater": MIN_ROUNDS}
"""The first look at which a pair may stop as unresolvable, by what decides it. Whether a pair
can still be called equivalent rests on its spread, which 3 rounds give too roughly: one more.
Whether a candidate can still be shown better rests mostly on its mean: a tune drops a
near-tied finalist from the first look (the simulations in the tests keep the power)."""

Decision = Literal["different", "equivalent", "unresolvable", "undecided"]


def spent_confidence(
    rounds: int, confidence: float = DEFAULT_CONFIDENCE, first: int = MIN_ROUNDS, last: int | None = None
) -> float:
    """The confidence of the look after ``rounds`` rounds, so that all looks together keep ``confidence``.

    ``last``: the cap (the last round that may be looked at): an equal share per look.
    """
    alpha = 1.0 - confidence
    if last is not None and last >= first:
        return 1.0 - alpha / (last - first + 1)
    return 1.0 - alpha * first / (rounds * (rounds + 1))


@dataclass(frozen=True)
class Verdict:
    """What the rounds so far say of one pair: a decision and the interval it rests on."""

    decision: Decision | None
    """None: not decided yet (more rounds are wanted)."""
    ratio: Ratio | None
    """The pair's ratio with its interval at the spent level of this look."""
    margin: float
    resolvable: float | None = None
    """``unresolvable``: the half width (relative, 0.06 = ±6%) the interval would have at the cap."""

    def text(self) -> str:
        """``different: 1.12× [1.05, 1.19]``, ``equivalent within 5%: …``, ``undecided …``."""
        interval = self.ratio.text() if self.ratio is not None else "no interval yet"
        if self.decision == "equivalent":
            return f"equivalent within {self.margin:.0%}: {interval}"
        if self.decision == "unresolvable":
            return f"no difference this machine can resolve (±{self.resolvable or 0:.0%}): {interval}"
        if self.decision is None:
            return f"deciding: {interval} (stops once it excludes 1 or lies within ±{self.margin:.0%})"
        return f"{self.decision}: {interval}"


def judge(
    a: Sequence[float | None],
    b: Sequence[float | None],
    confidence: float = DEFAULT_CONFIDENCE,
    margin: float = DEFAULT_EQUIVALENCE,
    final: bool = False,
    last: int | None = None,
    side: Side = "both",
) -> Verdict:
    """The verdict on A/B after the rounds so far (``a[i]``, ``b[i]`` measured in round i).

    ``final``: the cap is reached, so a pair not decided is ``undecided``. ``last``: the
    cap of rounds, which spends the error rate in equal shares over the looks up to it, and
    lets a pair that the cap cannot decide stop early as ``unresolvable``. ``side``: what
    decides (see :data:`Side`).
    """
    usable = sum(1 for x, y in zip(a, b, strict=False) if x and y and x > 0 and y > 0)
    if usable < MIN_ROUNDS:
        return Verdict("undecided" if final else None, paired_ratio(a, b, confidence), margin)
    ratio = paired_ratio(a, b, spent_confidence(usable, confidence, last=last))
    if ratio is None or ratio.low is None or ratio.high is None:
        return Verdict("undecided" if final else None, ratio, margin)
    if ratio.low > 1.0 or ratio.high < 1.0:
        return Verdict("different", ratio, margin)
    if 1.0 / (1.0 + margin) <= ratio.low and ratio.high <= 1.0 + margin:
        return Verdict("equivalent", ratio, margin)
    # Before the cap (the rounds may also have ended early: a time cap, or every other pair
    # decided), a pair the cap could not decide either is unresolvable rather than open.
    if last is not None and FUTILITY_FROM[side] <= usable < last:
        projection = project(ratio, last, confidence, margin, side)
        if projection.chance < FUTILITY_CHANCE:
            return Verdict("unresolvable", ratio, margin, resolvable=math.expm1(projection.half_width))
    return Verdict("undecided" if final else None, ratio, margin)


@dataclass(frozen=True)
class Projection:
    """What the cap would likely say of a pair, projected from the rounds so far."""

    chance: float
    """The chance that the interval at the cap decides the pair (by ``side``)."""
    half_width: float
    """The half width of the cap's interval of the mean log ratio."""


def project(ratio: Ratio, last: int, confidence: float, margin: float, side: Side = "both") -> Projection:
    """The chance that the cap's interval decides the pair, if the rounds to come are like those so far.

    The final mean log ratio is drawn as the mean so far plus ``last - n`` rounds around it,
    with the spread measured so far; its interval has the spread's width at the cap's spent level.
    """
    logs = [math.log(r) for r in ratio.ratios]
    n = len(logs)
    mean = sum(logs) / n
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / (n - 1))
    half = t_quantile(spent_confidence(last, confidence, last=last), last - 1) * sd / math.sqrt(last)
    spread = sd * math.sqrt(last - n) / last
    if spread <= 0.0:
        return Projection(0.0 if abs(mean) <= half else 1.0, half)
    normal = NormalDist(mean, spread)
    chance = 1.0 - normal.cdf(half)
    if side == "both":
        chance += normal.cdf(-half)
        room = math.log1p(margin) - half
        if room > 0:
            chance += normal.cdf(room) - normal.cdf(-room)
    return Projection(min(chance, 1.0), half)


def check_stopping(max_rounds: int, margin: float) -> None:
    """Refuse a cap that leaves no room to decide, or a margin outside (0, 50%).

    Raises:
        ConfigError: ``--max-rounds`` below ``MIN_ROUNDS``, or ``--equivalence`` outside (0, 0.5).
    """
    if max_rounds < MIN_ROUNDS:
        raise ConfigError(
            f"--rounds auto with --max-rounds {max_rounds}: it decides from {MIN_ROUNDS} rounds on",
            f"give --max-rounds {MIN_ROUNDS} or more, or a number of rounds",
        )
    if not 0.0 < margin < 0.5:
        raise ConfigError(f"--equivalence {margin:.0%} is outside (0, 50%)", "e.g. --equivalence 5%")


@dataclass(frozen=True)
class StopRule:
    """``--rounds auto``: rounds are added until every pair is decided or a cap is reached."""

    max_rounds: int = DEFAULT_MAX_ROUNDS
    max_minutes: float | None = None
    """Wall-clock cap of the rounds (``None``: only ``max_rounds``)."""
    margin: float = DEFAULT_EQUIVALENCE
    busy_repeats: int = BUSY_REPEATS
    """A round with a run flagged busy is measured again instead of counted, this many times at most."""

    def check(self) -> None:
        """Refuse caps that leave no room to decide, and a margin outside (0, 50%).

        Raises:
            ConfigError: as :func:`check_stopping`, or a non-positive ``--max-minutes``.
        """
        check_stopping(self.max_rounds, self.margin)
        if self.max_minutes is not None and self.max_minutes <= 0:
            raise ConfigError(f"--max-minutes {self.max_minutes:g} must be positive", "e.g. --max-minutes 10")
        if self.busy_repeats < 0:
            raise ConfigError(
                f"--busy-repeats {self.busy_repeats} must not be negative", "e.g. --busy-repeats 3"
            )

    def text(self) -> str:
        """How the rounds stop, for the progress line and the report."""
        cap = f"{self.max_rounds} rounds" + (f" or {self.max_minutes:g} min" if self.max_minutes else "")
        return f"until each pair differs or is equivalent within {self.margin:.0%} (cap {cap})"


def parse_rounds(text: str | None) -> int | Literal["auto"] | None:
    """``--rounds``: a count, ``auto``, or ``None`` when not given.

    Raises:
        ConfigError: neither a whole number nor ``auto``.
    """
    if text is None:
        return None
    if text.strip().lower() == "auto":
        return "auto"
    try:
        return int(text)
    except ValueError:
        raise ConfigError(
            f"--rounds {text!r} is neither a number nor auto", "e.g. --rounds 5 or --rounds auto"
        ) from None


def parse_margin(text: str) -> float:
    """``--equivalence``: ``5%`` or ``0.05``.

    Raises:
        ConfigError: not a number, or outside (0, 50%).
    """
    raw = text.strip()
    try:
        value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        raise ConfigError(f"--equivalence {text!r} is not a share", "e.g. --equivalence 5%") from None
    if not 0.0 < value < 0.5:
        raise ConfigError(f"--equivalence {text} is outside (0, 50%)", "e.g. --equivalence 5%")
    return value


def first_open(verdicts: Sequence[tuple[str, Verdict]]) -> tuple[str, Verdict] | None:
    """The pair still being decided whose interval is furthest from a decision, or ``None``."""
    open_ = [(name, v) for name, v in verdicts if v.decision is None]
    if not open_:
        return None

    def width(item: tuple[str, Verdict]) -> float:
        ratio = item[1].ratio
        if ratio is None or ratio.low is None or ratio.high is None:
            return float("inf")
        return ratio.high / ratio.low

    return max(open_, key=width)


def progress_text(verdicts: Sequence[tuple[str, Verdict]]) -> str:
    """The pair furthest from a decision and its interval, e.g. ``throughput: A vs B deciding: …``."""
    found = first_open(verdicts)
    if found is None:
        return "every pair decided"
    open_count = sum(v.decision is None for _, v in verdicts)
    return f"{open_count} pair(s) open; {found[0]} {found[1].text()}"


@dataclass(frozen=True)
class Ending:
    """How a run of ``--rounds auto`` rounds ended (what :func:`record` says of it)."""

    completed: int
    """Rounds in which every contender was measured."""
    stopped_by: str | None = None
    """``decided``, ``max-minutes`` or ``None`` (the count ran out, or the rounds failed)."""
    status: str = "ok"
    """``ok``, ``interrupted`` or ``aborted``."""
    repeated: tuple[dict[str, Any], ...] = ()
    """Rounds measured again because a run was flagged busy (``Rounds.repeated``)."""


def stopped_text(
    rule: StopRule, verdicts: Sequence[tuple[str, Verdict]], ending: Ending, nothing: str
) -> str:
    """Why the rounds stopped: every pair decided, a cap reached, or the rounds ended otherwise."""
    if not verdicts:
        return nothing
    if ending.stopped_by == "decided":
        return "every pair decided"
    if ending.stopped_by == "max-minutes":
        return f"--max-minutes {rule.max_minutes:g} reached"
    if ending.status != "ok":
        return f"rounds {ending.status}"
    if all(v.decision in ("different", "equivalent", "unresolvable") for _, v in verdicts):
        return "every pair decided"  # by the last round the cap allowed
    return f"--max-rounds {rule.max_rounds} reached"


@dataclass(frozen=True)
class PairRecord:
    """One pair's verdict as a record keeps it: its decision, its text, the ratio and interval reached."""

    pair: str
    decision: str | None
    text: str
    ratio: float | None = None
    low: float | None = None
    high: float | None = None

    @classmethod
    def of(cls, name: str, verdict: Verdict) -> PairRecord:
        """The record of ``verdict`` on the pair ``name``."""
        ratio = verdict.ratio
        figures = (ratio.estimate, ratio.low, ratio.high) if ratio else (None, None, None)
        return cls(name, verdict.decision, verdict.text(), *figures)

    def to_json(self) -> dict[str, Any]:
        """``{"pair", "decision", "text", "ratio", "low", "high"}``."""
        return {
            "pair": self.pair,
            "decision": self.decision,
            "text": self.text,
            "ratio": self.ratio,
            "low": self.low,
            "high": self.high,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PairRecord:
        """Read what :meth:`to_json` wrote."""
        return cls(
            pair=str(data["pair"]),
            decision=data.get("decision"),
            text=str(data.get("text", "")),
            ratio=data.get("ratio"),
            low=data.get("low"),
            high=data.get("high"),
        )


@dataclass(frozen=True)
class RepeatedRound:
    """A round measured again because a run was flagged busy: which contenders, and how busy it was."""

    round: int
    busy: tuple[str, ...]
    other_cpu: float | None = None
    """The most cores other processes used in one of its runs (``None`` where not sampled)."""

    def to_json(self) -> dict[str, Any]:
        """``{"round", "busy", "other_cpu"}``."""
        return {"round": self.round, "busy": list(self.busy), "other_cpu": self.other_cpu}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RepeatedRound:
        """Read what :meth:`to_json` (or ``Rounds.repeated``) wrote."""
        return cls(int(data["round"]), tuple(str(b) for b in data.get("busy") or ()), data.get("other_cpu"))


@dataclass(frozen=True)
class StoppingRecord:
    """What ``--rounds auto`` decided: the rule, why the rounds stopped, the level, every pair's verdict."""

    settings: dict[str, Any]
    """The rule's own settings as recorded (``max_rounds``, ``max_minutes``, ``margin``, ``busy_repeats``)."""
    rule: str
    """The rule in words."""
    stopped: str
    """Why the rounds stopped, in words."""
    rounds: int
    confidence: float
    """The level spent at the last look."""
    busy_rounds_repeated: tuple[RepeatedRound, ...]
    pairs: tuple[PairRecord, ...]
    decided_on: tuple[str, ...] | None = None
    """The figures the rounds stopped on, where a record names them (compare)."""
    other_pairs: tuple[PairRecord, ...] | None = None
    """The pairs of the figures the rounds did not stop on (compare), with the interval they reached."""

    def to_json(self) -> dict[str, Any]:
        """The record's JSON: the rule's settings, then ``rule``, ``stopped``, … ``pairs``."""
        data = {
            **self.settings,
            "rule": self.rule,
            "stopped": self.stopped,
            "rounds": self.rounds,
            "confidence": self.confidence,
            "busy_rounds_repeated": [r.to_json() for r in self.busy_rounds_repeated],
            "pairs": [p.to_json() for p in self.pairs],
        }
        if self.decided_on is not None:
            data["decided_on"] = list(self.decided_on)
        if self.other_pairs is not None:
            data["other_pairs"] = [p.to_json() for p in self.other_pairs]
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> StoppingRecord:
        """Read what :meth:`to_json` wrote."""
        decided_on, other_pairs = data.get("decided_on"), data.get("other_pairs")
        return cls(
            settings={k: v for k, v in data.items() if k not in _RECORD_KEYS},
            rule=str(data.get("rule", "")),
            stopped=str(data.get("stopped", "")),
            rounds=int(data.get("rounds") or 0),
            confidence=float(data.get("confidence") or DEFAULT_CONFIDENCE),
            busy_rounds_repeated=tuple(
                RepeatedRound.from_json(r) for r in data.get("busy_rounds_repeated") or ()
            ),
            pairs=tuple(PairRecord.from_json(p) for p in data.get("pairs") or ()),
            decided_on=None if decided_on is None else tuple(str(d) for d in decided_on),
            other_pairs=None if other_pairs is None else tuple(PairRecord.from_json(p) for p in other_pairs),
        )


_RECORD_KEYS = frozenset(f.name for f in fields(StoppingRecord)) - {"settings"}


def read_stopping(data: Any) -> StoppingRecord | None:
    """A record read, or ``None`` where there is none (not a record, or the rule alone: nothing decided)."""
    return StoppingRecord.from_json(data) if isinstance(data, dict) and "pairs" in data else None


def stopping_record(
    rule: StopRule,
    verdicts: Sequence[tuple[str, Verdict]],
    ending: Ending,
    confidence: float,
    nothing: str = "no pair to decide",
) -> StoppingRecord:
    """What the rounds decided: the rule, why they stopped, the level and every pair's verdict.

    ``verdicts`` are final (taken with ``final=True``); ``nothing`` says why there was no pair.
    """
    return StoppingRecord(
        settings=asdict(rule),
        rule=rule.text(),
        stopped=stopped_text(rule, verdicts, ending, nothing),
        rounds=ending.completed,
        confidence=spent_confidence(max(ending.completed, MIN_ROUNDS), confidence, last=rule.max_rounds),
        busy_rounds_repeated=tuple(RepeatedRound.from_json(r) for r in ending.repeated),
        pairs=tuple(PairRecord.of(name, v) for name, v in verdicts),
    )


def record(
    rule: StopRule,
    verdicts: Sequence[tuple[str, Verdict]],
    ending: Ending,
    confidence: float,
    nothing: str = "no pair to decide",
) -> dict[str, Any]:
    """The JSON of :func:`stopping_record`."""
    return stopping_record(rule, verdicts, ending, confidence, nothing).to_json()
