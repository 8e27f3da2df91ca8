"""``perf-analyzer`` end to end: the model's facts read from the server, the sweep, and its verdict."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from tritongen.client.endpoint import TritonEndpoint
from tritongen.errors import TritongenError
from tritongen.io.loadgen_shared import STABILITY_WINDOWS
from tritongen.loadtest.result import RunResult
from tritongen.loadtest.runner import ProgressCallback
from tritongen.loadtest.validation import validation_failure
from tritongen.perfanalyzer.options import PaOptions
from tritongen.perfanalyzer.sweep import ModelFacts, Sweep, model_facts, run_sweep
from tritongen.perfanalyzer.text import level_text, threshold_line
from tritongen.workflows.verdict import Verdict, ended_early, first_failure


class UnstableError(TritongenError):
    """A level did not stabilise within ``-r`` windows: the sweep stopped there, as perf_analyzer stops."""


@dataclass(frozen=True)
class SweepHooks:
    """Whom the sweep tells as it goes, and the event that stops it (each optional)."""

    on_facts: Callable[[ModelFacts], None] | None = None
    """Told what was read of the model, before anything is sent."""
    progress: ProgressCallback | None = None
    on_level: Callable[[RunResult], None] | None = None
    """Told each level as it is measured."""
    stop: threading.Event | None = None


@dataclass(frozen=True)
class PaOutcome:
    """The sweep, and how it ends as perf_analyzer ends."""

    sweep: Sweep
    verdict: Verdict


def run_perf_analyzer(options: PaOptions, hooks: SweepHooks | None = None) -> PaOutcome:
    """Read the model's facts from the server, sweep its levels, and judge the sweep.

    Raises:
        ConfigError: the options do not fit the model.
        ServerError: the server or the model cannot be reached.
    """
    hooks = hooks or SweepHooks()
    endpoint = TritonEndpoint.at(options.address, timeout_s=10)
    try:
        facts = model_facts(options, endpoint)
    finally:
        endpoint.close()
    if hooks.on_facts is not None:
        hooks.on_facts(facts)
    sweep = run_sweep(options, facts, progress=hooks.progress, stop=hooks.stop, on_level=hooks.on_level)
    return PaOutcome(sweep, sweep_verdict(sweep))


def sweep_verdict(sweep: Sweep) -> Verdict:
    """Interrupted or aborted; else (after the ``-l`` line) mismatched responses, then an unstable level."""
    early = ended_early(sweep.report, "measurement")
    if early is not None:
        return early
    over = threshold_line(sweep)
    failure = first_failure(validation_failure(sweep.report.runs, level_text), _unstable(sweep))
    return Verdict(failure=failure, notes=(over,) if over is not None else ())


def _unstable(sweep: Sweep) -> UnstableError | None:
    if sweep.unstable is None:
        return None
    return UnstableError(
        f"Failed to obtain stable measurement at {level_text(sweep.unstable)}: its last "
        f"{STABILITY_WINDOWS} windows differ by more than {sweep.options.stability_percentage:g}% "
        "(results were written)",
        "raise -p (the measurement window) or -r (the max trials), or loosen -s",
    )
