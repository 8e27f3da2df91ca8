"""A tune's report (``tritongen.tune/2``): every trial, the current config, the confirmation, the verdict."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tritongen.intervals import (
    format_summary,
    summarise,
)
from tritongen.io.files import write_output
from tritongen.tune.confirm import Confirmation, Confirmed
from tritongen.tune.document import BestEntry, ConfirmationEntry, TrialEntry, TuneDocument
from tritongen.tune.objective import best as best_measured
from tritongen.tune.objective import pareto_front
from tritongen.tune.request import TuneRequest
from tritongen.tune.space import Candidate
from tritongen.tune.trial import (
    TrialRecord,
)


@dataclass
class TuneReport:
    """Every trial, the current config, the confirmation and its verdict."""

    request: TuneRequest
    trials: list[TrialRecord] = field(default_factory=list)
    baseline: TrialRecord | None = None
    """The search measurement of the current config."""
    skipped: list[tuple[Candidate, str]] = field(default_factory=list)
    status: str = "ok"
    finalists: list[TrialRecord] = field(default_factory=list)
    same_as_current: list[str] = field(default_factory=list)
    """Search trials whose config is the current config (never finalists: they are the baseline)."""
    confirmation: Confirmation | None = None
    warnings: list[str] = field(default_factory=list)
    """What makes the result doubtful (e.g. the load never reached the composing model tuned)."""
    background: dict[str, Any] | None = None
    """The background load's own figures over the tune (see :meth:`BackgroundLoad.figures`)."""

    @property
    def search_best(self) -> TrialRecord | None:
        """The feasible search trial with the most throughput (one measurement each)."""
        found = best_measured(
            [(t, t.measurement) for t in self.trials], self.request.slo_p99_ms, self.request.max_memory_mb
        )
        return found[0] if found else None

    @property
    def front(self) -> list[TrialRecord]:
        """Search trials no other beats on both throughput and P99."""
        return [t for t, _ in pareto_front([(t, t.measurement) for t in self.trials])]

    @property
    def winner(self) -> Confirmed | None:
        """The finalist that beat the current config significantly (what ``--apply`` applies), or ``None``."""
        return self.confirmation.winner if self.confirmation is not None else None

    @property
    def decision(self) -> str:
        """``apply`` when a finalist beat the current config significantly, else ``keep``."""
        return "apply" if self.winner is not None else "keep"

    @property
    def best(self) -> Confirmed | None:
        """The confirmed best: the winner or the current config; ``None`` without a confirmation."""
        return self.confirmation.best if self.confirmation is not None else None

    @property
    def current_feasible(self) -> bool:
        """Whether the current config met the SLO (over the rounds when confirmed, else in the search)."""
        if self.confirmation is not None:
            return self.confirmation.current.feasible
        return self.baseline is not None and self.baseline.feasible

    def verdict(self) -> str:
        """One line: the config to apply with its gain and interval, or why the current config stays."""
        winner = self.winner
        if winner is not None:
            if winner.by_latency:  # the load set its rate: the lower P99 under it wins
                p99 = f"{winner.p99_us.median / 1000:.3g} ms" if winner.p99_us else "–"
                line = f"best: {winner.key} median P99 {p99} under the load"
                relation = "lower P99 than "
            else:
                line = f"best: {winner.key} {format_summary(winner.infer_per_s)} infer/s"
                relation = ""
            if winner.ratio is not None:
                line += f", {winner.ratio.text()} {relation}the baseline (current config)"
            if winner.verdict is not None and winner.ratio is not None:
                line += (
                    f" at {winner.ratio.confidence:.2%} (the level spent at round {winner.ratio.rounds}: "
                    f"--rounds auto keeps {self.request.confidence:.0%})"
                )
            if not self.current_feasible:
                line += "; the current config misses the SLO over the rounds"
            return line
        keep = "keep the current config"
        confirmation = self.confirmation
        if confirmation is None:
            if not self.finalists:
                why = (
                    "no other config met the SLO in the search"
                    if not any(t.feasible for t in self.trials)
                    else "every config that met the SLO in the search is the current one"
                )
                return f"{keep}: {why}"
            return f"{keep}: the confirmation did not run"
        finalist = _finalist_text(confirmation.best_finalist)
        if not confirmation.finished:
            most = "at most " if confirmation.rule is not None else ""
            done = f"{confirmation.completed} of {most}{confirmation.rounds}"
            return f"{keep}: the confirmation stopped after {done} rounds"
        if confirmation.rounds == 1:
            return (
                f"{keep}: one round is a quick look, no difference is significant{finalist}; "
                "use --rounds 3 or more to decide"
            )
        if not any(c.eligible for c in confirmation.finalists):
            return f"{keep}: no finalist met the SLO over the rounds{finalist}"
        return f"{keep}: no finalist beat it beyond the noise{finalist}"

    def document(self) -> TuneDocument:
        """The ``tritongen.tune/2`` document, typed: what the tables, plots and page show."""
        request = self.request
        return TuneDocument(
            model=request.model,
            load_model=request.load.model,
            slo_p99_ms=request.slo_p99_ms,
            max_memory_mb=request.max_memory_mb,
            strategy=request.strategy,
            rounds=request.rounds_text,
            finalists_asked=request.finalists,
            confidence=request.confidence,
            status=self.status,
            grid_size=request.space.size,
            baseline=None if self.baseline is None else TrialEntry.of(self.baseline),
            trials=[TrialEntry.of(t) for t in self.trials],
            skipped=[(c.to_json(), why) for c, why in self.skipped],
            front=[t.key for t in self.front],
            same_as_current=list(self.same_as_current),
            finalists=[t.key for t in self.finalists],
            confirmation=None if self.confirmation is None else ConfirmationEntry.of(self.confirmation),
            best=self._best(),
            decision=self.decision,
            verdict=self.verdict(),
            warnings=list(self.warnings),
            background=self.background,
        )

    def to_json(self) -> dict[str, Any]:
        """The ``tritongen.tune/2`` document."""
        return self.document().to_json()

    def _best(self) -> BestEntry | None:
        """The confirmed best; without a confirmation the current config's one measurement, if feasible."""
        best = self.best
        if best is not None:
            return BestEntry(
                key=best.key,
                current=best.is_current,
                config=best.candidate.to_json(),
                infer_per_s=best.infer_per_s,
                p99_us=best.p99_us,
                gain_over_baseline=None if best.is_current else best.ratio,
                significant=best.beats_current,
            )
        base = self.baseline
        if base is None or not base.feasible:
            return None
        return BestEntry(
            key=base.key,
            current=True,
            config=base.config_json(),
            infer_per_s=summarise([base.measurement.infer_per_s]),
            p99_us=summarise([base.measurement.p99_us] if base.measurement.p99_us is not None else []),
            gain_over_baseline=None,
            significant=False,
        )

    def write_json(self, path: Path) -> None:
        """Write the document atomically."""
        write_output(path, json.dumps(self.to_json(), indent=2) + "\n")


def _finalist_text(named: Confirmed | None) -> str:
    """`` (best finalist KEY: 1.03× [0.97, 1.09])`` for the keep verdict; with a rule, its decision."""
    if named is None:
        return ""
    if named.verdict is not None and named.ratio is not None:
        return f" (best finalist {named.key}: {named.verdict.text()})"
    if named.ratio is not None:
        return f" (best finalist {named.key}: {named.ratio.text()})"
    return f" (best finalist {named.key}: no round of both to compare)"
