"""The tuning loop: the current config, then candidates from a strategy, then a confirmation in rounds.

The search measures the current config (the baseline) and each candidate once, as
live-reload trials. The confirmation then measures the best finalists and the current
config again, interleaved, in ``rounds`` rounds (with ``--rounds auto``, until each finalist
is decided against the current config), and keeps the current config unless a finalist
beats it significantly (:mod:`tritongen.tune.confirm`).

Resumable and safe: every search trial is saved in its own directory as soon as it ends,
a resumed run skips finished trials (the confirmation is measured again: its rounds must
be side by side in time), and whatever happens (Ctrl-C, a server error) the model goes
back to the config it had before the loop returns or raises.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tritongen.client.control import ModelControl
from tritongen.errors import ConfigError, ServerError, TritongenError
from tritongen.intervals import (
    DEFAULT_CONFIDENCE,
    DEFAULT_ROUNDS,
    check_confidence,
    check_rounds,
    format_summary,
    summarise,
)
from tritongen.io.files import atomic_write_text, write_output
from tritongen.loadtest.background import BackgroundLoad, BackgroundSpec
from tritongen.loadtest.load_processes import load_processes
from tritongen.loadtest.rounds import Contender, Rounds, RoundStarted, measure_rounds
from tritongen.loadtest.runner import ProgressCallback
from tritongen.loadtest.spec import RUN_OVERHEAD_S, LoadSpec, seconds_text
from tritongen.stopping import MIN_ROUNDS, StopRule
from tritongen.triton.model_config import ModelConfig
from tritongen.triton.render import render_config
from tritongen.tune.composing import untouched_warning
from tritongen.tune.confirm import DEFAULT_FINALISTS, Confirmation, Confirmed, Entry, judge
from tritongen.tune.document import BestEntry, ConfirmationEntry, TrialEntry, TuneDocument
from tritongen.tune.objective import Measurement, objective, pareto_front
from tritongen.tune.objective import best as best_measured
from tritongen.tune.space import Candidate, Current, SearchSpace
from tritongen.tune.strategy import SearchStrategy, make_strategy
from tritongen.tune.trial import (
    TrialRecord,
    candidate_config,
    check_load,
    read_finished,
    record_from_saved,
    run_trial,
)

REQUEST_FILE = "tune-request.json"

RELOAD_S = 2.0
"""What a live reload costs, roughly (Triton swaps a config in about 1.4 s)."""

TrialStarted = Callable[[int, int, Candidate | Current], None]
TrialDone = Callable[[TrialRecord, bool], None]
"""Called with each finished trial and whether it was reused from a previous run."""
RoundDone = Callable[[Confirmation], None]
"""Called after each complete confirmation round with the verdict so far."""


@dataclass(frozen=True)
class TuneRequest:
    """What to tune, against what, with which load, and how surely to decide."""

    model: str
    space: SearchSpace
    load: LoadSpec
    slo_p99_ms: float | None
    strategy: str = "adaptive"
    max_trials: int | None = None
    max_memory_mb: float | None = None
    out_dir: Path = Path("tune")
    seed: int = 0
    rounds: int = DEFAULT_ROUNDS
    """Confirmation rounds (1: a quick look, nothing is significant); with ``stopping``, at most."""
    finalists: int = DEFAULT_FINALISTS
    confidence: float = DEFAULT_CONFIDENCE
    background: BackgroundSpec | None = None
    """Other models' traffic kept running for the whole tune (trials and rounds), if any."""
    stopping: StopRule | None = None
    """``--rounds auto``: the confirmation's rounds stop once each finalist is decided (or at a cap)."""

    def check(self) -> None:
        """Reject settings that cannot work, before anything is measured or written.

        Raises:
            ConfigError: an illegal space, rounds below 1, finalists below 1, a
                confidence level outside (0, 1), a stopping rule that cannot decide or a
                background load that cannot run.
        """
        self.space.check()
        check_rounds(self.rounds)
        if self.stopping is not None:
            self.stopping.check()
        check_confidence(self.confidence)
        if not isinstance(self.finalists, int) or self.finalists < 1:
            raise ConfigError(f"--finalists {self.finalists} must be at least 1", "e.g. --finalists 3")
        for measured in dict.fromkeys((self.model, self.load.model)):
            if self.background is not None:
                self.background.check(measured)

    def make_strategy(self) -> SearchStrategy:
        """The search strategy this tune asks for.

        Raises:
            ConfigError: an unknown strategy or a budget below one trial.
        """
        return make_strategy(
            self.strategy,
            self.space,
            self.max_trials,
            self.seed,
            slo_p99_ms=self.slo_p99_ms,
            max_memory_mb=self.max_memory_mb,
        )

    def claim(self) -> dict[str, Any]:
        """What a trial directory records about the tune that measured it (see :func:`check_claim`)."""
        return {
            "model": self.model,
            "load_model": self.load.model,
            "background": None if self.background is None else self.background.to_json(),
            "slo_p99_ms": self.slo_p99_ms,
            "batch_size": self.load.batch_size,
            "levels": list(self.load.levels),
            "mode": self.load.mode,
            "rounds": self.rounds_text,
            "finalists": self.finalists,
            "confidence": self.confidence,
        }

    @property
    def rounds_text(self) -> int | str:
        """``--rounds`` as given: the number, or ``auto``."""
        return "auto" if self.stopping is not None else self.rounds


@dataclass(frozen=True)
class TunePlan:
    """How much a tune will measure at most, and roughly how long that takes."""

    trials: int
    """Search trials at most, the current config included."""
    contenders: int
    """Configs in the confirmation: the finalists (at most) and the current config."""
    rounds: int
    """Confirmation rounds; with ``auto``, at most."""
    seconds: float
    """With every run measured for ``--duration`` (``auto``: decided in the fewest rounds)."""
    max_seconds: float
    """With every run waiting the longest for stable figures (``--max-duration``, 3 × duration);
    ``auto``: in every round up to its caps."""
    auto: bool = False

    def text(self) -> str:
        """``about 6 min (up to 14 min …): 24 trials, then 4 configs × 5 rounds``."""
        rounds = f"{self.rounds} round" + ("s" if self.rounds != 1 else "")
        if self.auto:
            rounds = f"{MIN_ROUNDS} to {self.rounds} rounds, until each finalist is decided"
        when = f"about {seconds_text(self.seconds)}"
        if seconds_text(self.max_seconds) != seconds_text(self.seconds):
            why = "at the caps" if self.auto else "while runs wait to be stable"
            when += f" (up to {seconds_text(self.max_seconds)} {why})"
        return f"{when}: {self.trials} trials, then {self.contenders} configs × {rounds}"


def plan(request: TuneRequest) -> TunePlan:
    """How long a tune takes: trials × (levels × (warm-up + duration + overhead) + reload), then the rounds.

    Raises:
        ConfigError: an unknown strategy or a budget below one trial.
    """
    strategy = request.make_strategy()
    trials = strategy.max_trials + 1
    contenders = min(request.finalists, strategy.max_trials) + 1
    levels = len(request.load.levels)
    rule = request.stopping

    def total(measured_s: float, rounds: int, cap_s: float | None = None) -> float:
        level_s = request.load.warmup_s + measured_s + RUN_OVERHEAD_S
        round_s = contenders * (level_s + RELOAD_S)
        confirming = rounds * round_s if cap_s is None else min(rounds * round_s, cap_s + round_s)
        return trials * (levels * level_s + RELOAD_S) + confirming

    cap_s = rule.max_minutes * 60 if rule is not None and rule.max_minutes else None
    return TunePlan(
        trials=trials,
        contenders=contenders,
        rounds=request.rounds,
        seconds=total(request.load.duration_s, MIN_ROUNDS if rule is not None else request.rounds),
        max_seconds=total(request.load.effective_max_duration_s, request.rounds, cap_s),
        auto=rule is not None,
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
            line = f"best: {winner.key} {format_summary(winner.infer_per_s)} infer/s"
            if winner.ratio is not None:
                line += f", {winner.ratio.text()} the baseline (current config)"
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


@dataclass(frozen=True)
class TuneHooks:
    """Whom a tune tells as it goes, and the event that stops it (every one optional)."""

    on_start: TrialStarted | None = None
    """Called before each search trial is measured (not for a reused one)."""
    on_done: TrialDone | None = None
    progress: ProgressCallback | None = None
    """Called with the progress of each load run."""
    stop: threading.Event | None = None
    """Set to stop the tune (as Ctrl-C does): it ends with ``KeyboardInterrupt``."""
    on_round_start: RoundStarted | None = None
    on_round: RoundDone | None = None

    @property
    def stopped(self) -> bool:
        """Whether ``stop`` is set."""
        return self.stop is not None and self.stop.is_set()


@dataclass(frozen=True)
class _Tuning:
    """A tune under way: its request, the model it reloads, the config it started from, whom it tells."""

    request: TuneRequest
    control: ModelControl
    base: ModelConfig
    target: str | None
    hooks: TuneHooks
    budget: int
    """Search trials the strategy measures at most (what ``on_start`` is told)."""
    base_text: str
    """The config the model had, rendered (a search trial that renders the same is its twin)."""

    def config(self, candidate: Candidate | Current) -> ModelConfig:
        """The config ``candidate`` renders to."""
        return candidate_config(self.base, candidate, self.target)

    def save(self, report: TuneReport) -> None:
        """Write the report so far into the tune directory."""
        report.write_json(self.request.out_dir / "tune.json")

    def measure(self, candidate: Candidate | Current, number: int) -> TrialRecord:
        """One search trial, or the one a previous run of this tune finished."""
        request, hooks = self.request, self.hooks
        trials_dir = request.out_dir / "trials"
        saved = read_finished(trials_dir / candidate.key)
        if saved is not None:
            record = record_from_saved(saved, candidate, request.slo_p99_ms)
            if hooks.on_done:
                hooks.on_done(record, True)
            return record
        if hooks.on_start:
            hooks.on_start(number, self.budget, candidate)
        record = run_trial(
            self.control,
            self.base,
            self.target,
            candidate,
            request.load,
            request.slo_p99_ms,
            trials_dir,
            hooks.progress,
            hooks.stop,
        )
        if hooks.on_done:
            hooks.on_done(record, False)
        if record.measurement.failed and not self.control.is_live():
            raise ServerGoneError(self.control.url, record.key, request.out_dir)
        return record


def run_tune(
    request: TuneRequest,
    control: ModelControl,
    base: ModelConfig,
    target: str | None,
    hooks: TuneHooks | None = None,
) -> TuneReport:
    """Measure the current config and the strategy's candidates, confirm the finalists; restore the config.

    The load is checked once first (:func:`~tritongen.tune.trial.check_load`): a load that
    cannot fit the model under load is refused before anything is reloaded or written.

    Raises:
        KeyboardInterrupt: Ctrl-C; the report so far (search trials, confirmation rounds)
            is in ``request.out_dir`` and the model is back on the config it had.
        ConfigError: the settings are illegal, the load does not fit the model under load,
            or the resumed directory belongs to another tune.
        SourceError: the input data file is unreadable or does not fit the model under load.
        TritongenError: the server went away during the confirmation.
    """
    request.check()
    check_load(request.load)
    _claim(request)
    report = TuneReport(request=request, skipped=request.space.skipped())
    strategy = request.make_strategy()
    hooks = hooks or TuneHooks()
    stop = hooks.stop or threading.Event()  # set by the background load, if any, when it fails
    tuning = _Tuning(
        request, control, base, target, replace(hooks, stop=stop), strategy.max_trials, render_config(base)
    )
    background = _start_background(request, stop)
    try:
        if background is not None:
            background.wait_until_measured(stop)  # the baseline, too, runs under the whole background
        with load_processes():  # one set of Locust processes for every trial and round
            baseline = _search(tuning, report, strategy)
            report.finalists = _finalists(report)
            if report.finalists:
                _confirm(tuning, report, baseline)
    except KeyboardInterrupt:
        report.status = "interrupted"
        _check_background(report, background)
        raise
    except TritongenError:
        if report.status == "ok":
            report.status = "failed"
        raise
    finally:
        try:
            # Back to the config the model had. A load without a config is not enough: Triton
            # reloads from disk only when the files changed, and keeps serving the override.
            # A server that is gone has nothing to restore (and would hide why the tune ended).
            if control.is_live():
                control.load(base)
        finally:
            _end_background(report, background)
            tuning.save(report)
    return report


class ServerGoneError(ServerError):
    """The server stopped answering during a trial: it exited or crashed; the tune ends there."""

    def __init__(self, url: str, key: str, out_dir: Path, log: Path | None = None) -> None:
        self.url, self.key, self.out_dir = url, key, out_dir
        super().__init__(
            f"the server at {url} stopped answering during trial {key}: it exited or crashed",
            f"see its log{f' ({log})' if log else ''}; the trials so far are in {out_dir}: restart the "
            f"server and rerun with --resume {out_dir}",
        )


def _start_background(request: TuneRequest, stop: threading.Event) -> BackgroundLoad | None:
    """Start the background load the tune asks for (it sets ``stop`` if it fails), or ``None``.

    Raises:
        TritongenError: a background model is not ready, or its inputs cannot be built.
    """
    if request.background is None:
        return None
    background = BackgroundLoad(request.background, request.load)
    background.start(stop)
    return background


def _check_background(report: TuneReport, background: BackgroundLoad | None) -> None:
    """After a stop: when the background load's failure caused it, end the tune with its reason.

    Raises:
        ServerError: the background load failed (the tune is ``aborted``, its results kept).
    """
    if background is None or background.failure is None:
        return
    report.status = "aborted"
    raise ServerError(
        f"the tune stopped because its background load failed: {background.failure}",
        f"the results so far are in {report.request.out_dir}; check the server and the --background models",
    ) from None


def _end_background(report: TuneReport, background: BackgroundLoad | None) -> None:
    """Stop the background load and keep its figures in the report; close it even if they cannot be read."""
    if background is None:
        return
    try:
        background.stop()
        report.background = background.figures()
    finally:
        background.close()


def _search(tuning: _Tuning, report: TuneReport, strategy: SearchStrategy) -> TrialRecord:
    """Measure the current config, then each candidate of the strategy; the current config's trial.

    Raises:
        KeyboardInterrupt: ``stop`` was set (after the trial it ended).
    """
    baseline = report.baseline = tuning.measure(Current.of(tuning.base), 0)
    request = tuning.request
    if request.model != request.load.model:
        warning = untouched_warning(baseline.result, request.model, request.load.model)
        report.warnings += [warning] if warning else []
    if tuning.hooks.stopped:
        raise KeyboardInterrupt
    history: list[tuple[Candidate, Measurement]] = []
    while (candidate := strategy.next_candidate(history)) is not None:
        record = tuning.measure(candidate, len(history) + 1)
        report.trials.append(record)
        if render_config(tuning.config(candidate)) == tuning.base_text:
            report.same_as_current.append(record.key)
        history.append((candidate, record.measurement))
        tuning.save(report)
        if tuning.hooks.stopped:
            raise KeyboardInterrupt
    return baseline


def _finalists(report: TuneReport) -> list[TrialRecord]:
    """The best feasible search trials by objective, the current config's twins left out."""
    request = report.request
    feasible = [t for t in report.trials if t.feasible and t.key not in report.same_as_current]
    ranked = sorted(
        feasible, key=lambda t: -objective(t.measurement, request.slo_p99_ms, request.max_memory_mb)
    )
    return ranked[: request.finalists]


def _confirm(tuning: _Tuning, report: TuneReport, baseline: TrialRecord) -> None:
    """Measure the finalists and the current config in interleaved rounds; the verdict goes into ``report``.

    Raises:
        KeyboardInterrupt: Ctrl-C (the rounds so far are in the report).
        ServerError: the server went away during a round.
    """
    request, hooks, rule = report.request, tuning.hooks, report.request.stopping
    entries, contenders = _contenders(tuning, [baseline, *report.finalists])

    def verdict(rounds: Rounds, final: bool) -> Confirmation:
        return judge(
            rounds, entries, request.rounds, request.slo_p99_ms, request.max_memory_mb, request.confidence,
            rule=rule, final=final,
        )  # fmt: skip

    def round_done(rounds: Rounds) -> None:
        report.confirmation = verdict(rounds, final=False)
        tuning.save(report)
        if hooks.on_round is not None:
            hooks.on_round(report.confirmation)

    def decided(_: Rounds) -> bool:  # after round_done: the confirmation is this round's
        return report.confirmation is not None and report.confirmation.decided

    rounds = measure_rounds(
        contenders, request.rounds, hooks.progress, hooks.stop, hooks.on_round_start, round_done,
        until=decided if rule is not None else None,
        max_s=rule.max_minutes * 60 if rule is not None and rule.max_minutes else None,
        busy_repeats=rule.busy_repeats if rule is not None else 0,
    )  # fmt: skip
    report.confirmation = verdict(rounds, final=True)
    if rounds.status == "interrupted":
        raise KeyboardInterrupt
    if rounds.status != "ok":
        raise ServerError(
            f"the confirmation stopped in round {rounds.completed + 1}: {rounds.reason or rounds.status}",
            "check the server; --resume reuses the search trials",
        )


def _contenders(tuning: _Tuning, records: list[TrialRecord]) -> tuple[list[Entry], list[Contender]]:
    """What the confirmation judges and measures of each record: at its search level, its config reloaded."""
    load = tuning.request.load
    entries: list[Entry] = []
    contenders: list[Contender] = []
    for record in records:
        level = record.measurement.level or load.levels[0]
        entries.append(Entry(record.key, record.candidate, level))
        contenders.append(
            Contender(
                name=record.key,
                spec=replace(load, levels=(level,)),
                prepare=_reloader(tuning.control, tuning.config(record.candidate)),
            )
        )
    return entries, contenders


def _reloader(control: ModelControl, config: ModelConfig) -> Callable[[], None]:
    """Reload the model with ``config`` and check the server runs it (before a contender's measurement)."""

    def reload() -> None:
        control.load(config)
        control.check_serving(config)

    return reload


def check_claim(request: TuneRequest) -> None:
    """Refuse to resume a directory of another tune (model, SLO, load, rounds, finalists, confidence).

    Reads only: nothing is written, so a refused ``--resume`` leaves the directory as it was.

    Raises:
        ConfigError: the directory holds another tune's trials.
    """
    path = request.out_dir / REQUEST_FILE
    if not path.is_file():
        return
    try:
        theirs = json.loads(path.read_text(encoding="utf-8"))
    except ValueError:
        theirs = None
    mine = request.claim()
    if not isinstance(theirs, dict):
        theirs = {}
    search = ("model", "slo_p99_ms", "batch_size", "levels", "mode")
    if any(theirs.get(k) != mine[k] for k in search):
        shown = {k: theirs.get(k) for k in search if k in theirs}
        raise ConfigError(
            f"{request.out_dir} holds trials of another tune ({shown})",
            "resume with the same model, SLO and load, or pick a new --out directory",
        )
    if theirs.get("load_model", theirs.get("model")) != mine["load_model"]:
        raise ConfigError(
            f"{request.out_dir} holds trials of {mine['model']} under the load of "
            f"'{theirs.get('load_model', theirs.get('model'))}'",
            "resume with the same model under load, or pick a new --out directory",
        )
    if theirs.get("background") != mine["background"]:
        raise ConfigError(
            f"{request.out_dir} holds trials measured under another background load "
            f"({theirs.get('background')})",
            "resume with the same --background, or pick a new --out directory",
        )
    decided = ("rounds", "finalists", "confidence")
    if "rounds" in theirs and any(theirs.get(k) != mine[k] for k in decided):
        was = " ".join(f"--{k} {theirs.get(k)}" for k in decided)
        raise ConfigError(
            f"{request.out_dir} was tuned with {was}",
            "resume with the same --rounds, --finalists and --confidence, or pick a new --out directory",
        )


def _claim(request: TuneRequest) -> None:
    """Mark ``out_dir`` as this tune's (see :func:`check_claim`).

    Raises:
        ConfigError: the directory holds another tune's trials.
    """
    check_claim(request)
    request.out_dir.mkdir(parents=True, exist_ok=True)
    path = request.out_dir / REQUEST_FILE
    mine = request.claim()
    if path.is_file():
        try:
            if json.loads(path.read_text(encoding="utf-8")) == mine:
                return
        except ValueError:
            pass
    # New, or written before rounds were recorded (its search trials are still valid).
    atomic_write_text(path, json.dumps(mine, indent=2) + "\n")
