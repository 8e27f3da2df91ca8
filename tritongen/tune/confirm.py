"""The confirmation phase of ``tritongen tune``: finalists against the current config, judged on rounds.

One measurement per search trial is enough to rank configs roughly, not to decide: the
noise of the machine is of the order of the gains. So the best finalists of the search
and the current config (the baseline) are measured again in interleaved rounds on the
same load, each round reloading each contender's config before measuring it. A finalist
replaces the current config only when its throughput over the current config's, taken
round by round (paired), has a confidence interval that lies above 1, and when its median
P99 over the rounds meets the SLO. Among such finalists the highest median throughput
wins; otherwise the current config stays.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from tritongen.intervals import DEFAULT_CONFIDENCE, Ratio, Summary, paired_ratio, summarise
from tritongen.loadtest.result import RunResult
from tritongen.loadtest.rounds import Rounds
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
    """Throughput over the current config's, paired by round (``None`` for the current config)."""
    feasible: bool
    """Median P99 over the rounds within the SLO (and memory within the cap)."""
    eligible: bool
    """May be chosen: the current config always; a finalist when feasible and measured in every round."""

    @property
    def is_current(self) -> bool:
        """Whether this is the current config (the baseline)."""
        return isinstance(self.candidate, Current)

    @property
    def beats_current(self) -> bool:
        """An eligible finalist whose ratio interval lies above 1."""
        return (
            not self.is_current
            and self.eligible
            and self.ratio is not None
            and self.ratio.significant
            and self.ratio.estimate > 1.0
        )

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
            "runs": [asdict(run) for run in self.runs],
        }


@dataclass(frozen=True)
class Confirmation:
    """The confirmation's contenders (the current config first) and its verdict."""

    contenders: tuple[Confirmed, ...]
    rounds: int
    """Rounds asked for."""
    completed: int
    """Rounds in which every contender was measured."""
    status: str = "ok"
    """``ok``, ``interrupted`` (Ctrl-C) or ``aborted`` (the server went away)."""
    reason: str | None = None
    confidence: float = DEFAULT_CONFIDENCE

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
        """Whether every round was measured."""
        return self.status == "ok" and self.completed >= self.rounds

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
            "contenders": {c.key: c.to_json() for c in self.contenders},
        }


@dataclass(frozen=True)
class Entry:
    """A contender to judge: its key, what it is, and the load level it is measured at."""

    key: str
    candidate: Candidate | Current
    level: float


def judge(
    rounds: Rounds,
    entries: Sequence[Entry],
    rounds_asked: int,
    slo_p99_ms: float | None,
    max_memory_mb: float | None = None,
    confidence: float = DEFAULT_CONFIDENCE,
) -> Confirmation:
    """Summarise each contender's rounds and compare each finalist with the current config, round by round.

    ``entries`` must hold exactly one :class:`Current`; ``rounds`` may be partial
    (interrupted): the figures are then those of the rounds measured.
    """
    current = next(e for e in entries if isinstance(e.candidate, Current))
    base_figures = rounds.figures(current.key, run_infer_per_s)
    judged: list[Confirmed] = []
    for entry in sorted(entries, key=lambda e: not isinstance(e.candidate, Current)):
        runs = tuple(rounds.runs.get(entry.key, []))
        throughput = rounds.figures(entry.key, run_infer_per_s)
        infer = summarise([v for v in throughput if v is not None], confidence)
        p99 = summarise([v for v in rounds.figures(entry.key, run_p99_us) if v is not None], confidence)
        memory = [int(m) for m in ((r.gpu or {}).get("mem_max_bytes") for r in runs) if m is not None]
        measured = Measurement(
            infer_per_s=infer.median if infer else 0.0,
            p99_us=p99.median if p99 else None,
            memory_bytes=max(memory) if memory else None,
            failed=infer is None,
        )
        ok = feasible(measured, slo_p99_ms, max_memory_mb)
        is_current = entry is current
        ratio = None
        if not is_current:
            ratio = paired_ratio(_present(throughput), _present(base_figures), confidence)
        complete = bool(runs) and all(v is not None for v in throughput)
        judged.append(
            Confirmed(
                key=entry.key,
                candidate=entry.candidate,
                level=entry.level,
                runs=runs,
                infer_per_s=infer,
                p99_us=p99,
                ratio=ratio,
                feasible=ok,
                eligible=is_current or (ok and complete),
            )
        )
    return Confirmation(
        contenders=tuple(judged),
        rounds=rounds_asked,
        completed=rounds.completed,
        status=rounds.status,
        reason=rounds.reason,
        confidence=confidence,
    )


def _present(values: list[float | None]) -> list[float]:
    """Missing figures as NaN, so that rounds stay paired by position (``paired_ratio`` skips them)."""
    return [float("nan") if v is None else v for v in values]
