"""The tuning loop: baseline, then candidates from a strategy, each a live-reload trial.

Resumable and safe: every trial is saved in its own directory as soon as it ends, a
resumed run skips finished trials, and whatever happens (Ctrl-C, a server error) the
model goes back to the config it had before the loop returns or raises.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tritongen import __version__
from tritongen.errors import ConfigError
from tritongen.loadtest.runner import ProgressCallback
from tritongen.loadtest.spec import LoadSpec
from tritongen.triton.model_config import ModelConfig
from tritongen.triton.repository import atomic_write_text, write_output
from tritongen.tune.control import ModelControl
from tritongen.tune.objective import Measurement, best, gain, pareto_front
from tritongen.tune.space import Baseline, Candidate, SearchSpace
from tritongen.tune.strategy import make_strategy
from tritongen.tune.trial import TrialRecord, read_finished, record_from_saved, run_trial

SCHEMA = "tritongen.tune/1"
REQUEST_FILE = "tune-request.json"

TrialStarted = Callable[[int, int, Candidate | Baseline], None]
TrialDone = Callable[[TrialRecord, bool], None]
"""Called with each finished trial and whether it was reused from a previous run."""


@dataclass(frozen=True)
class TuneRequest:
    """What to tune, against what, with which load."""

    model: str
    space: SearchSpace
    load: LoadSpec
    slo_p99_ms: float | None
    strategy: str = "adaptive"
    max_trials: int | None = None
    max_memory_mb: float | None = None
    out_dir: Path = Path("tune")
    seed: int = 0


@dataclass
class TuneReport:
    """Every trial, the baseline, the best config and the throughput/P99 front."""

    request: TuneRequest
    trials: list[TrialRecord] = field(default_factory=list)
    baseline: TrialRecord | None = None
    skipped: list[tuple[Candidate, str]] = field(default_factory=list)
    status: str = "ok"

    @property
    def best(self) -> TrialRecord | None:
        """The feasible trial with the most throughput."""
        found = best(
            [(t, t.measurement) for t in self.trials], self.request.slo_p99_ms, self.request.max_memory_mb
        )
        return found[0] if found else None

    @property
    def front(self) -> list[TrialRecord]:
        """Trials no other beats on both throughput and P99."""
        return [t for t, _ in pareto_front([(t, t.measurement) for t in self.trials])]

    @property
    def gain(self) -> float | None:
        """Throughput of the best trial over the baseline's."""
        winner = self.best
        return gain(
            winner.measurement if winner else None, self.baseline.measurement if self.baseline else None
        )

    def to_json(self) -> dict[str, Any]:
        """The ``tritongen.tune/1`` document."""
        winner = self.best
        return {
            "schema": SCHEMA,
            "tritongen_version": __version__,
            "model": self.request.model,
            "slo_p99_ms": self.request.slo_p99_ms,
            "max_memory_mb": self.request.max_memory_mb,
            "strategy": self.request.strategy,
            "status": self.status,
            "grid_size": self.request.space.size,
            "trials": [t.to_json() for t in self.trials],
            "skipped": [{"config": c.to_json(), "reason": why} for c, why in self.skipped],
            "best": None if winner is None else {**winner.to_json(), "gain_over_baseline": self.gain},
            "baseline": None if self.baseline is None else self.baseline.to_json(),
            "front": [t.key for t in self.front],
        }

    def write_json(self, path: Path) -> None:
        """Write the document atomically."""
        write_output(path, json.dumps(self.to_json(), indent=2) + "\n")


def run_tune(
    request: TuneRequest,
    control: ModelControl,
    base: ModelConfig,
    target: str | None,
    on_start: TrialStarted | None = None,
    on_done: TrialDone | None = None,
    progress: ProgressCallback | None = None,
    stop: threading.Event | None = None,
) -> TuneReport:
    """Measure the baseline and the strategy's candidates; restore the model's config at the end.

    Raises:
        KeyboardInterrupt: Ctrl-C; the report so far is in ``request.out_dir`` and the
            model is back on the config it had.
        TritongenError: the settings are illegal, or the resumed directory belongs to
            another model.
    """
    request.space.check()
    trials_dir = request.out_dir / "trials"
    _claim(request)
    report = TuneReport(request=request, skipped=request.space.skipped())
    strategy = make_strategy(
        request.strategy,
        request.space,
        request.max_trials,
        request.seed,
        slo_p99_ms=request.slo_p99_ms,
        max_memory_mb=request.max_memory_mb,
    )
    budget = strategy.max_trials

    def measure(candidate: Candidate | Baseline, number: int) -> TrialRecord:
        saved = read_finished(trials_dir / candidate.key)
        if saved is not None:
            record = record_from_saved(saved, candidate, request.slo_p99_ms)
            if on_done:
                on_done(record, True)
            return record
        if on_start:
            on_start(number, budget, candidate)
        record = run_trial(
            control, base, target, candidate, request.load, request.slo_p99_ms, trials_dir, progress, stop
        )
        if on_done:
            on_done(record, False)
        return record

    try:
        baseline_max = max(request.space.max_batch_sizes)
        report.baseline = measure(request.space.baseline(baseline_max), 0)
        history: list[tuple[Candidate, Measurement]] = []
        while True:
            candidate = strategy.next_candidate(history)
            if candidate is None:
                break
            record = measure(candidate, len(history) + 1)
            report.trials.append(record)
            history.append((candidate, record.measurement))
            report.write_json(request.out_dir / "tune.json")
            if stop is not None and stop.is_set():
                raise KeyboardInterrupt
    except KeyboardInterrupt:
        report.status = "interrupted"
        raise
    finally:
        try:
            # Back to the config the model had. A load without a config is not enough: Triton
            # reloads from disk only when the files changed, and keeps serving the override.
            control.load(base)
        finally:
            report.write_json(request.out_dir / "tune.json")
    return report


def _claim(request: TuneRequest) -> None:
    """Mark ``out_dir`` as this tune's; a resumed directory must be for the same model and SLO.

    Raises:
        ConfigError: the directory holds another model's or another SLO's trials.
    """
    request.out_dir.mkdir(parents=True, exist_ok=True)
    path = request.out_dir / REQUEST_FILE
    mine = {
        "model": request.model,
        "slo_p99_ms": request.slo_p99_ms,
        "batch_size": request.load.batch_size,
        "levels": list(request.load.levels),
        "mode": request.load.mode,
    }
    if path.is_file():
        try:
            theirs = json.loads(path.read_text(encoding="utf-8"))
        except ValueError:
            theirs = None
        if theirs != mine:
            raise ConfigError(
                f"{request.out_dir} holds trials of another tune ({theirs})",
                "resume with the same model, SLO and load, or pick a new --out directory",
            )
        return
    atomic_write_text(path, json.dumps(mine, indent=2) + "\n")
