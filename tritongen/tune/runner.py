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

import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tritongen.client.control import ModelControl
from tritongen.errors import ServerError, TritongenError
from tritongen.loadtest.background import BackgroundLoad
from tritongen.loadtest.load_processes import load_processes
from tritongen.loadtest.rounds import Contender, Rounds, RoundStarted, measure_rounds
from tritongen.loadtest.runner import ProgressCallback
from tritongen.triton.model_config import ModelConfig
from tritongen.triton.render import render_config
from tritongen.tune.confirm import Confirmation, Entry, judge
from tritongen.tune.objective import Measurement, objective
from tritongen.tune.report import TuneReport
from tritongen.tune.request import TuneRequest, claim_directory
from tritongen.tune.space import Candidate, Current
from tritongen.tune.strategy import SearchStrategy
from tritongen.tune.trial import (
    TrialRecord,
    candidate_config,
    check_load,
    judged_by_latency,
    read_finished,
    record_from_saved,
    run_trial,
)

TrialStarted = Callable[[int, int, Candidate | Current], None]
TrialDone = Callable[[TrialRecord, bool], None]
"""Called with each finished trial and whether it was reused from a previous run."""
RoundDone = Callable[[Confirmation], None]
"""Called after each complete confirmation round with the verdict so far."""


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
    claim_directory(request)
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
            rule=rule, final=final, by_latency=judged_by_latency(request.load),
        )  # fmt: skip

    def round_done(rounds: Rounds) -> None:
        report.confirmation = verdict(rounds, final=False)
        tuning.save(report)
        if hooks.on_round is not None:
            hooks.on_round(report.confirmation)

    def decided(_: Rounds) -> bool:  # after round_done: the confirmation is this round's
        return report.confirmation is not None and report.confirmation.decided

    def still_measured(_: Rounds) -> set[str]:  # a finalist that cannot beat the current config is dropped
        confirmation = report.confirmation
        return confirmation.measured_next if confirmation is not None else {e.key for e in entries}

    rounds = measure_rounds(
        contenders, request.rounds, hooks.progress, hooks.stop, hooks.on_round_start, round_done,
        until=decided if rule is not None else None,
        max_s=rule.max_minutes * 60 if rule is not None and rule.max_minutes else None,
        busy_repeats=rule.busy_repeats if rule is not None else 0,
        keep=still_measured if rule is not None else None,
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


def untouched_warning(result: dict[str, Any] | None, tuned: str, load_model: str) -> str | None:
    """Why to doubt a composing tune whose baseline load never reached the tuned model, else ``None``.

    ``result`` is the baseline's load-test JSON; a run without ``server_models`` (a server
    whose statistics were not read) proves nothing either way.
    """
    runs = [run for run in (result or {}).get("runs", []) if run.get("server_models")]
    if not runs or any(tuned in run["server_models"] for run in runs):
        return None
    return (
        f"the load on '{load_model}' did not reach '{tuned}' during the baseline measurement "
        f"(its statistics did not move): does '{load_model}' call it?"
    )
