"""The ``tritongen.tune/2`` document, typed: what a tune measured and decided, as its readers see it.

:meth:`tritongen.tune.runner.TuneReport.document` builds it from a finished tune, and
:meth:`TuneDocument.from_json` from a file; the tables, plots and page take it either way,
and its :meth:`TuneDocument.to_json` is the document the tune writes. A ``tritongen.tune/1``
document (one measurement per config, no confirmation) reads too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tritongen import __version__
from tritongen.intervals import DEFAULT_CONFIDENCE, Ratio, Summary
from tritongen.loadtest.result import LoadTestReport, RunResult
from tritongen.stopping import StoppingRecord, read_stopping
from tritongen.tune.confirm import Confirmation, Confirmed
from tritongen.tune.trial import TrialRecord

SCHEMA = "tritongen.tune/2"
SEARCH_ONLY_SCHEMA = "tritongen.tune/1"
"""The first tune documents: one measurement per config, no confirmation."""
READABLE_SCHEMAS = (SEARCH_ONLY_SCHEMA, SCHEMA)
"""The tune documents the report reads."""


def _summary(data: Any) -> Summary | None:
    return Summary.from_json(data) if isinstance(data, dict) else None


def _ratio(data: Any) -> Ratio | None:
    return Ratio.from_json(data) if isinstance(data, dict) else None


def _json(value: Summary | Ratio | None) -> dict[str, Any] | None:
    return None if value is None else value.to_json()


@dataclass(frozen=True)
class TrialEntry:
    """One search trial (or the current config's search measurement): the config and its one measurement."""

    key: str
    config: dict[str, Any]
    status: str
    """``ok``, or ``failed`` (no level could be measured)."""
    reason: str | None
    infer_per_s: float
    p99_us: float | None
    level: float | None
    feasible: bool
    seconds: float
    result: LoadTestReport | None
    """The trial's load test (``None`` for a trial that failed before it)."""

    @classmethod
    def of(cls, trial: TrialRecord) -> TrialEntry:
        """The entry of a finished trial."""
        return cls(
            key=trial.key,
            config=trial.config_json(),
            status="failed" if trial.measurement.failed else "ok",
            reason=trial.reason,
            infer_per_s=trial.measurement.infer_per_s,
            p99_us=trial.measurement.p99_us,
            level=trial.measurement.level,
            feasible=trial.feasible,
            seconds=round(trial.seconds, 3),
            result=None if trial.result is None else LoadTestReport.from_json(trial.result),
        )

    def to_json(self) -> dict[str, Any]:
        """One entry of ``trials`` (and the ``baseline``)."""
        return {
            "key": self.key,
            "config": self.config,
            "status": self.status,
            "reason": self.reason,
            "infer_per_s": self.infer_per_s,
            "p99_us": self.p99_us,
            "level": self.level,
            "feasible": self.feasible,
            "seconds": self.seconds,
            "result": None if self.result is None else self.result.to_json(),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TrialEntry:
        """Read what :meth:`to_json` wrote."""
        result = data.get("result")
        return cls(
            key=str(data["key"]),
            config=dict(data.get("config") or {}),
            status=str(data.get("status", "ok")),
            reason=data.get("reason"),
            infer_per_s=data.get("infer_per_s", 0.0),
            p99_us=data.get("p99_us"),
            level=data.get("level"),
            feasible=bool(data.get("feasible")),
            seconds=data.get("seconds", 0.0),
            result=LoadTestReport.from_json(result) if isinstance(result, dict) else None,
        )


@dataclass(frozen=True)
class ContenderVerdict:
    """``--rounds auto``: a finalist's decision against the current config, and its text."""

    decision: str | None
    text: str


@dataclass(frozen=True)
class ContenderEntry:
    """A config of the confirmation: its runs round by round, their figures, its ratio to the current one."""

    key: str
    current: bool
    config: dict[str, Any]
    level: float
    infer_per_s: Summary | None
    p99_us: Summary | None
    ratio: Ratio | None
    """Throughput over the current config's, paired by round (``None`` for the current config)."""
    feasible: bool
    eligible: bool
    verdict: ContenderVerdict | None
    runs: list[RunResult] = field(default_factory=list)

    @classmethod
    def of(cls, contender: Confirmed) -> ContenderEntry:
        """The entry of a confirmed contender."""
        verdict = contender.verdict
        return cls(
            key=contender.key,
            current=contender.is_current,
            config=contender.candidate.to_json(),
            level=contender.level,
            infer_per_s=contender.infer_per_s,
            p99_us=contender.p99_us,
            ratio=contender.ratio,
            feasible=contender.feasible,
            eligible=contender.eligible,
            verdict=None if verdict is None else ContenderVerdict(verdict.decision, verdict.text()),
            runs=list(contender.runs),
        )

    def to_json(self) -> dict[str, Any]:
        """One entry of ``confirmation.contenders``."""
        judged = (
            {} if self.verdict is None else {"decision": self.verdict.decision, "verdict": self.verdict.text}
        )
        return {
            "key": self.key,
            "current": self.current,
            "config": self.config,
            "level": self.level,
            "infer_per_s": _json(self.infer_per_s),
            "p99_us": _json(self.p99_us),
            "ratio": _json(self.ratio),
            "feasible": self.feasible,
            "eligible": self.eligible,
            **judged,
            "runs": [run.to_json() for run in self.runs],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ContenderEntry:
        """Read what :meth:`to_json` wrote."""
        judged = "verdict" in data or "decision" in data
        return cls(
            key=str(data["key"]),
            current=bool(data.get("current")),
            config=dict(data.get("config") or {}),
            level=data.get("level", 0.0),
            infer_per_s=_summary(data.get("infer_per_s")),
            p99_us=_summary(data.get("p99_us")),
            ratio=_ratio(data.get("ratio")),
            feasible=bool(data.get("feasible")),
            eligible=bool(data.get("eligible", True)),
            verdict=ContenderVerdict(data.get("decision"), str(data.get("verdict", ""))) if judged else None,
            runs=[RunResult.from_json(run) for run in data.get("runs") or ()],
        )


@dataclass(frozen=True)
class ConfirmationEntry:
    """The confirmation: rounds asked and done, its level, ``--rounds auto``'s record, the contenders."""

    status: str
    reason: str | None
    rounds: int
    completed_rounds: int
    confidence: float
    stopping: StoppingRecord | None
    contenders: dict[str, ContenderEntry]
    """By key, the current config first."""
    judged_by: str = "throughput"
    """``throughput``, or ``p99`` under a load that sets its own rate (the ratios: current P99 / P99)."""

    @classmethod
    def of(cls, confirmation: Confirmation) -> ConfirmationEntry:
        """The entry of a confirmation."""
        return cls(
            status=confirmation.status,
            reason=confirmation.reason,
            rounds=confirmation.rounds,
            completed_rounds=confirmation.completed,
            confidence=confirmation.confidence,
            stopping=confirmation.stopping(),
            contenders={c.key: ContenderEntry.of(c) for c in confirmation.contenders},
            judged_by=confirmation.judged_by,
        )

    def to_json(self) -> dict[str, Any]:
        """The ``confirmation`` object (``stopping`` only with ``--rounds auto``)."""
        return {
            "status": self.status,
            "reason": self.reason,
            "rounds": self.rounds,
            "completed_rounds": self.completed_rounds,
            "confidence": self.confidence,
            "judged_by": self.judged_by,
            **({} if self.stopping is None else {"stopping": self.stopping.to_json()}),
            "contenders": {key: c.to_json() for key, c in self.contenders.items()},
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ConfirmationEntry:
        """Read what :meth:`to_json` wrote."""
        return cls(
            status=str(data.get("status", "ok")),
            reason=data.get("reason"),
            rounds=int(data.get("rounds") or 0),
            completed_rounds=int(data.get("completed_rounds") or 0),
            confidence=float(data.get("confidence") or DEFAULT_CONFIDENCE),
            stopping=read_stopping(data.get("stopping")),
            contenders={
                str(k): ContenderEntry.from_json(c) for k, c in (data.get("contenders") or {}).items()
            },
            judged_by=str(data.get("judged_by") or "throughput"),
        )


@dataclass(frozen=True)
class BestEntry:
    """The config a tune found best: confirmed in rounds, or the current config's one measurement."""

    key: str
    current: bool
    config: dict[str, Any]
    infer_per_s: Summary | None
    p99_us: Summary | None
    gain_over_baseline: Ratio | None
    significant: bool

    def to_json(self) -> dict[str, Any]:
        """The ``best`` object."""
        return {
            "key": self.key,
            "current": self.current,
            "config": self.config,
            "infer_per_s": _json(self.infer_per_s),
            "p99_us": _json(self.p99_us),
            "gain_over_baseline": _json(self.gain_over_baseline),
            "significant": self.significant,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BestEntry:
        """Read what :meth:`to_json` wrote."""
        return cls(
            key=str(data["key"]),
            current=bool(data.get("current")),
            config=dict(data.get("config") or {}),
            infer_per_s=_summary(data.get("infer_per_s")),
            p99_us=_summary(data.get("p99_us")),
            gain_over_baseline=_ratio(data.get("gain_over_baseline")),
            significant=bool(data.get("significant")),
        )


@dataclass(frozen=True)
class SearchBest:
    """``tritongen.tune/1``'s best: the search's best trial, its one measurement and its gain."""

    key: str
    infer_per_s: float
    p99_us: float | None = None
    gain_over_baseline: float | None = None

    def to_json(self) -> dict[str, Any]:
        """The ``best`` object of a ``tritongen.tune/1`` document."""
        return {
            "key": self.key,
            "infer_per_s": self.infer_per_s,
            "p99_us": self.p99_us,
            "gain_over_baseline": self.gain_over_baseline,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SearchBest:
        """Read the ``best`` object of a ``tritongen.tune/1`` document."""
        gain = data.get("gain_over_baseline")
        return cls(
            key=str(data["key"]),
            infer_per_s=float(data["infer_per_s"]),
            p99_us=data.get("p99_us"),
            gain_over_baseline=gain if isinstance(gain, int | float) else None,
        )


@dataclass(frozen=True)
class BackgroundSummary:
    """What a tune's background load did over the tune: its models and level, throughput, P99, errors."""

    models: list[str]
    mode: str
    level: float
    duration_s: float
    qps: float
    p99_us: float | None
    errors: int
    requests: int
    status: str
    reason: str | None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BackgroundSummary:
        """Read a tune document's ``background`` object (the background load's own figures)."""
        return cls(
            models=[str(m) for m in data.get("models") or ()],
            mode=str(data.get("mode", "")),
            level=float(data.get("level") or 0.0),
            duration_s=float(data.get("duration_s") or 0.0),
            qps=float(data.get("qps") or 0.0),
            p99_us=(data.get("latency_us") or {}).get("p99"),
            errors=data.get("errors", 0),
            requests=data.get("requests", 0),
            status=str(data.get("status")),
            reason=data.get("reason"),
        )


@dataclass(frozen=True)
class TuneDocument:
    """Every trial of a tune, the current config, the confirmation and its verdict."""

    model: str
    load_model: str | None
    """The model the load was sent to (a tuned composing model is reached through another)."""
    slo_p99_ms: float | None
    max_memory_mb: float | None
    strategy: str
    rounds: int | str
    """``--rounds`` as given: the number, or ``auto``."""
    finalists_asked: int
    confidence: float
    status: str
    grid_size: int | None
    baseline: TrialEntry | None
    trials: list[TrialEntry]
    skipped: list[tuple[dict[str, Any], str]]
    """Configs left out of the search, with why."""
    front: list[str]
    same_as_current: list[str]
    finalists: list[str]
    confirmation: ConfirmationEntry | None
    best: BestEntry | SearchBest | None
    decision: str | None
    verdict: str | None
    warnings: list[str]
    background: dict[str, Any] | None
    """The background load's own figures over the tune (its JSON object as the tune recorded it)."""
    schema: str = SCHEMA
    tritongen_version: str = __version__

    def background_summary(self) -> BackgroundSummary | None:
        """``background`` read (``None`` without a background load)."""
        return None if self.background is None else BackgroundSummary.from_json(self.background)

    def to_json(self) -> dict[str, Any]:
        """The ``tritongen.tune/2`` document."""
        return {
            "schema": self.schema,
            "tritongen_version": self.tritongen_version,
            "model": self.model,
            "load_model": self.load_model,
            "slo_p99_ms": self.slo_p99_ms,
            "max_memory_mb": self.max_memory_mb,
            "strategy": self.strategy,
            "rounds": self.rounds,
            "finalists_asked": self.finalists_asked,
            "confidence": self.confidence,
            "status": self.status,
            "grid_size": self.grid_size,
            "baseline": None if self.baseline is None else self.baseline.to_json(),
            "trials": [t.to_json() for t in self.trials],
            "skipped": [{"config": config, "reason": why} for config, why in self.skipped],
            "front": list(self.front),
            "same_as_current": list(self.same_as_current),
            "finalists": list(self.finalists),
            "confirmation": None if self.confirmation is None else self.confirmation.to_json(),
            "best": None if self.best is None else self.best.to_json(),
            "decision": self.decision,
            "verdict": self.verdict,
            "warnings": list(self.warnings),
            "background": self.background,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TuneDocument:
        """Read a ``tritongen.tune/2`` (or ``/1``) document."""
        schema = str(data.get("schema", SCHEMA))
        baseline, confirmation, best = data.get("baseline"), data.get("confirmation"), data.get("best")
        read_best = SearchBest.from_json if schema == SEARCH_ONLY_SCHEMA else BestEntry.from_json
        return cls(
            model=str(data.get("model")),
            load_model=data.get("load_model"),
            slo_p99_ms=data.get("slo_p99_ms"),
            max_memory_mb=data.get("max_memory_mb"),
            strategy=str(data.get("strategy")),
            rounds=data.get("rounds", 1),
            finalists_asked=int(data.get("finalists_asked") or 0),
            confidence=float(data.get("confidence") or DEFAULT_CONFIDENCE),
            status=str(data.get("status")),
            grid_size=data.get("grid_size"),
            baseline=TrialEntry.from_json(baseline) if isinstance(baseline, dict) else None,
            trials=[TrialEntry.from_json(t) for t in data.get("trials") or ()],
            skipped=[(dict(s.get("config") or {}), str(s.get("reason"))) for s in data.get("skipped") or ()],
            front=[str(k) for k in data.get("front") or ()],
            same_as_current=[str(k) for k in data.get("same_as_current") or ()],
            finalists=[str(k) for k in data.get("finalists") or ()],
            confirmation=ConfirmationEntry.from_json(confirmation)
            if isinstance(confirmation, dict)
            else None,
            best=read_best(best) if isinstance(best, dict) else None,
            decision=data.get("decision"),
            verdict=data.get("verdict"),
            warnings=[str(w) for w in data.get("warnings") or ()],
            background=data.get("background") if isinstance(data.get("background"), dict) else None,
            schema=schema,
            tritongen_version=str(data.get("tritongen_version", __version__)),
        )
