"""The confirmation phase of ``tritongen tune``: finalists against the current config, judged on rounds.

One measurement per search trial is enough to rank configs roughly, not to decide: the
noise of the machine is of the order of the gains. So the best finalists of the search
and the current config (the baseline) are measured again in interleaved rounds on the
same load, each round reloading each contender's config before measuring it. A finalist
replaces the current config only when its throughput over the current config's, taken
round by round (paired), has a confidence interval that lies above 1, and when its median
P99 over the rounds meets the SLO. Among such finalists the highest median throughput
wins; otherwise the current config stays.

With ``--rounds auto`` (a :class:`~tritongen.stopping.StopRule`) the decisions are those ratios,
one per finalist: each is judged by :func:`tritongen.stopping.judge` at the level spent at
that look, and the rounds stop once every finalist still in the running differs from the
current config, is equivalent to it within the margin, or cannot beat it: projected from the
rounds so far, the cap would give it too little chance of being shown better
(``unresolvable``, see :mod:`tritongen.stopping`). A finalist that cannot beat the current config
is dropped from the rounds that follow (its rounds so far stand). The choice among finalists that
beat the current config is by median throughput, not a paired decision, so it waits for none.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from tritongen import stopping
from tritongen.intervals import DEFAULT_CONFIDENCE, Ratio, Summary, paired_ratio, summarise
from tritongen.loadtest.result import RunResult
from tritongen.loadtest.rounds import Rounds
from tritongen.stopping import Ending, StoppingRecord, StopRule, Verdict
from tritongen.tune.objective import Measurement, feasible
from tritongen.tune.space import Candidate, Current

DEFAULT_FINALISTS = 3
"""How many of the search's best configs are confirmed against the current config."""


def run_infer_per_s(run: RunResult) -> float | None:
    """A run's throughput, or ``None`` when it did not finish cleanly (failed, errors, no latency)."""
    if run.status != "ok" or run.errors or not run.latency_us:
        return None
    return run.infer_per_s


def run_p99_us(run: RunResult) -> float | None:
    """A run's P99 latency, or ``None`` when it did not finish cleanly."""
    if run_infer_per_s(run) is None or not run.latency_us:
        return None
    return run.latency_us.get("p99")


def run_inverse_p99(run: RunResult) -> float | None:
    """A run's reciprocal P99 (1/s; more is better), the figure judged under a load that sets its rate."""
    p99 = run_p99_us(run)
    return 1e6 / p99 if p99 else None


@dataclass(frozen=True)
class Confirmed:
    """One contender of the confirmation: its rounds, their figures and its ratio to the current config."""

    key: str
    candidate: Candidate | Current
    level: float
    runs: tuple[RunResult, ...]
    infer_per_s: Summary | None
    p99_us: Summary | None
    ratio: Ratio | None
    """Throughput over the current config's, paired by round (``None`` for the current config); judged
    by latency, the current config's P99 over this one's (above 1: a lower P99)."""
    feasible: bool
    """Median P99 over the rounds within the SLO (and memory within the cap)."""
    eligible: bool
    """May be chosen: the current config always; a finalist when feasible and measured in every round."""
    verdict: Verdict | None = None
    """``--rounds auto``: the decision on ``ratio`` (then at the level spent at this look)."""
    by_latency: bool = False
    """Judged by the lower P99 (the load set its own rate), not by throughput."""

    @property
    def is_current(self) -> bool:
        """Whether this is the current config (the baseline)."""
        return isinstance(self.candidate, Current)

    @property
    def missed_a_round(self) -> bool:
        """A round did not measure it cleanly: a finalist that can no longer be chosen."""
        return any(run_infer_per_s(run) is None for run in self.runs)

    @property
    def beats_current(self) -> bool:
        """An eligible finalist whose ratio interval lies above 1 (with a rule: decided ``different``)."""
        return (
            not self.is_current
            and self.eligible
            and self.ratio is not None
            and self.ratio.significant
            and self.ratio.estimate > 1.0
            and (self.verdict is None or self.verdict.decision == "different")
        )

    @property
    def in_the_running(self) -> bool:
        """Whether the next rounds still measure it.

        The current config, a finalist not yet decided, or one shown better (the choice among
        those is by median throughput) are; a finalist that cannot beat the current config
        (decided equivalent, unresolvable or slower) or missed a round is dropped.
        """
        if self.is_current or self.verdict is None:
            return True
        if self.missed_a_round:
            return False
        return self.verdict.decision is None or self.beats_current

    def _decision_json(self) -> dict[str, Any]:
        """``--rounds auto``: the finalist's ``decision`` and ``verdict`` text (nothing without a rule)."""
        if self.verdict is None:
            return {}
        return {"decision": self.verdict.decision, "verdict": self.verdict.text()}

    def to_json(self) -> dict[str, Any]:
        """One entry of ``confirmation.contenders``: runs round by round, summaries, ratio, verdicts."""
        return {
            "key": self.key,
            "current": self.is_current,
            "config": self.candidate.to_json(),
            "level": self.level,
            "infer_per_s": None if self.infer_per_s is None else self.infer_per_s.to_json(),
            "p99_us": None if self.p99_us is None else self.p99_us.to_json(),
            "ratio": None if self.ratio is None else self.ratio.to_json(),
            "feasible": self.feasible,
            "eligible": self.eligible,
            **self._decision_json(),
            "runs": [asdict(run) for run in self.runs],
        }


@dataclass(frozen=True)
class Confirmation:
    """The confirmation's contenders (the current config first) and its verdict."""

    contenders: tuple[Confirmed, ...]
    rounds: int
    """Rounds asked for."""
    completed: int
    """Rounds measured (a finalist dropped once it could not beat the current config has fewer)."""
    status: str = "ok"
    """``ok``, ``interrupted`` (Ctrl-C) or ``aborted`` (the server went away)."""
    reason: str | None = None
    confidence: float = DEFAULT_CONFIDENCE
    rule: StopRule | None = None
    """``--rounds auto``: the rule that stops the rounds (``rounds`` is then its cap)."""
    stopped_by: str | None = None
    """Why the rounds ended before ``rounds``: ``decided`` or ``max-minutes``."""
    repeated: tuple[dict[str, Any], ...] = ()
    """Rounds measured again because a run was flagged busy (``Rounds.repeated``)."""

    @property
    def current(self) -> Confirmed:
        """The current config's entry."""
        return next(c for c in self.contenders if c.is_current)

    @property
    def finalists(self) -> tuple[Confirmed, ...]:
        """The finalists' entries, in search order."""
        return tuple(c for c in self.contenders if not c.is_current)

    @property
    def finished(self) -> bool:
        """Whether every round was measured (with a rule: every one it wanted)."""
        return self.status == "ok" and (self.completed >= self.rounds or self.stopped_by is not None)

    @property
    def verdicts(self) -> list[tuple[str, Verdict]]:
        """``--rounds auto``: each finalist's decision against the current config (none without a rule)."""
        found = []
        for c in self.finalists:
            if c.verdict is not None:
                out = " (out: a round failed)" if c.missed_a_round else ""
                found.append((f"{self.judged_by}: {c.key} vs current{out}", c.verdict))
        return found

    @property
    def by_latency(self) -> bool:
        """Whether the contenders are judged by the lower P99 (the load set its own rate)."""
        return self.current.by_latency

    @property
    def judged_by(self) -> str:
        """``throughput`` or ``p99``: the figure the finalists are compared with the current config by."""
        return "p99" if self.by_latency else "throughput"

    @property
    def measured_next(self) -> set[str]:
        """The contenders the next round measures (``--rounds auto``; without a rule, every one)."""
        return {c.key for c in self.contenders if c.in_the_running}

    @property
    def decided(self) -> bool:
        """``--rounds auto``: no finalist still in the running is waiting for a decision."""
        return self.rule is not None and all(
            c.verdict is None or c.verdict.decision is not None or c.missed_a_round for c in self.finalists
        )

    def stopping(self) -> StoppingRecord | None:
        """``--rounds auto``: the rule, why the rounds stopped, the spent level, each finalist's verdict."""
        if self.rule is None:
            return None
        ending = Ending(self.completed, self.stopped_by, self.status, self.repeated)
        return stopping.stopping_record(self.rule, self.verdicts, ending, self.confidence)

    def stopping_record(self) -> dict[str, Any] | None:
        """The JSON of :meth:`stopping` (``None`` without ``--rounds auto``)."""
        found = self.stopping()
        return None if found is None else found.to_json()

    @property
    def winner(self) -> Confirmed | None:
        """The finalist that beat the current config significantly, with the highest median throughput.

        When the current config misses the SLO over the rounds, any eligible finalist (within
        the SLO, measured in every round) beats it. ``None`` when none did, or when the
        rounds did not all finish.
        """
        if not self.finished:
            return None
        better = [c for c in self.finalists if c.beats_current]
        if not better and not self.current.feasible and self.rounds > 1:
            # The current config misses the SLO (or failed): a finalist that meets it wins outright.
            better = [c for c in self.finalists if c.eligible]
        if not better:
            return None
        if self.by_latency:
            return min(better, key=lambda c: c.p99_us.median if c.p99_us else float("inf"))
        return max(better, key=lambda c: c.infer_per_s.median if c.infer_per_s else 0.0)

    @property
    def best(self) -> Confirmed:
        """The winner, or the current config."""
        return self.winner or self.current

    @property
    def best_finalist(self) -> Confirmed | None:
        """The finalist with the highest ratio, eligible ones first (what the verdict names when it keeps)."""
        rated = [c for c in self.finalists if c.ratio is not None]
        if not rated:
            return self.finalists[0] if self.finalists else None
        return max(rated, key=lambda c: (c.eligible, c.ratio.estimate if c.ratio else 0.0))

    def to_json(self) -> dict[str, Any]:
        """The ``confirmation`` object of the tune JSON: contenders by key, the current config first."""
        return {
            "status": self.status,
            "reason": self.reason,
            "rounds": self.rounds,
            "completed_rounds": self.completed,
            "confidence": self.confidence,
            "judged_by": self.judged_by,
            **({} if self.rule is None else {"stopping": self.stopping_record()}),
            "contenders": {c.key: c.to_json() for c in self.contenders},
        }


@dataclass(frozen=True)
class Entry:
    """A contender to judge: its key, what it is, and the load level it is measured at."""

    key: str
    candidate: Candidate | Current
    level: float


@dataclass(frozen=True)
class Judging:
    """How the rounds are judged: the SLO and memory cap, the level, and the rule of ``--rounds auto``."""

    slo_p99_ms: float | None
    max_memory_mb: float | None = None
    confidence: float = DEFAULT_CONFIDENCE
    rule: StopRule | None = None
    final: bool = True
    """The rounds are over: with a rule, a finalist not decided is ``undecided``."""
    by_latency: bool = False
    """The load set its own rate: the finalists are compared by the reciprocal of their P99."""

    @property
    def figure(self) -> Callable[[RunResult], float | None]:
        """The per-round figure a finalist's ratio to the current config is taken on."""
        return run_inverse_p99 if self.by_latency else run_infer_per_s


def judge(
    rounds: Rounds,
    entries: Sequence[Entry],
    rounds_asked: int,
    slo_p99_ms: float | None,
    max_memory_mb: float | None = None,
    confidence: float = DEFAULT_CONFIDENCE,
    rule: StopRule | None = None,
    final: bool = True,
    by_latency: bool = False,
) -> Confirmation:
    """Summarise each contender's rounds and compare each finalist with the current config, round by round.

    ``entries`` must hold exactly one :class:`Current`; ``rounds`` may be partial
    (interrupted): the figures are then those of the rounds measured. With ``rule``
    (``--rounds auto``) each finalist's ratio is judged at the level spent at this look;
    ``final`` says the rounds are over; ``by_latency``: the load set its own rate, and the ratios
    are taken on the reciprocal P99 (above 1: a lower P99 than the current config's).
    """
    how = Judging(slo_p99_ms, max_memory_mb, confidence, rule, final, by_latency)
    current = next(e for e in entries if isinstance(e.candidate, Current))
    base_figures = rounds.figures(current.key, how.figure)
    ordered = sorted(entries, key=lambda e: not isinstance(e.candidate, Current))
    return Confirmation(
        contenders=tuple(_judged(rounds, e, None if e is current else base_figures, how) for e in ordered),
        rounds=rounds_asked,
        completed=rounds.completed,
        status=rounds.status,
        reason=rounds.reason,
        confidence=confidence,
        rule=rule,
        stopped_by=rounds.stopped_by,
        repeated=tuple(rounds.repeated),
    )


def _judged(rounds: Rounds, entry: Entry, base_figures: list[float | None] | None, how: Judging) -> Confirmed:
    """One contender's summaries and feasibility; a finalist's ratio to the current config's figures."""
    runs = tuple(rounds.runs.get(entry.key, []))
    throughput = rounds.figures(entry.key, run_infer_per_s)
    judged = rounds.figures(entry.key, how.figure)
    infer = summarise([v for v in throughput if v is not None], how.confidence)
    p99 = summarise([v for v in rounds.figures(entry.key, run_p99_us) if v is not None], how.confidence)
    memory = [int(m) for m in ((r.gpu or {}).get("mem_max_bytes") for r in runs) if m is not None]
    measured = Measurement(
        infer_per_s=infer.median if infer else 0.0,
        p99_us=p99.median if p99 else None,
        memory_bytes=max(memory) if memory else None,
        failed=infer is None,
        by_latency=how.by_latency,
    )
    ok = feasible(measured, how.slo_p99_ms, how.max_memory_mb)
    ratio, verdict = None, None
    if base_figures is not None and how.rule is not None:
        rule = how.rule
        verdict = stopping.judge(
            judged,
            base_figures,
            how.confidence,
            rule.margin,
            final=how.final,
            last=rule.max_rounds,
            side="greater",  # a finalist that cannot beat the current config is done
        )
        ratio = verdict.ratio
    elif base_figures is not None:
        ratio = paired_ratio(_present(judged), _present(base_figures), how.confidence)
    complete = bool(runs) and all(v is not None for v in judged)
    return Confirmed(
        key=entry.key,
        candidate=entry.candidate,
        level=entry.level,
        runs=runs,
        infer_per_s=infer,
        p99_us=p99,
        ratio=ratio,
        feasible=ok,
        eligible=base_figures is None or (ok and complete),
        verdict=verdict,
        by_latency=how.by_latency,
    )


def _present(values: list[float | None]) -> list[float]:
    """Missing figures as NaN, so that rounds stay paired by position (``paired_ratio`` skips them)."""
    return [float("nan") if v is None else v for v in values]
