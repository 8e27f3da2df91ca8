"""A load test end to end: the embedded server if asked, one model or a mix under load, then the gates."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field, replace
from pathlib import Path

from tritongen.errors import ConfigError, ServerError
from tritongen.intervals import DEFAULT_CONFIDENCE
from tritongen.loadtest.client_floor import CALIBRATION_S, client_floor
from tritongen.loadtest.distributed import loopback_warning
from tritongen.loadtest.find_max import MaxSearch
from tritongen.loadtest.mix import Mix, run_mix_test
from tritongen.loadtest.result import LoadTestReport, RunResult
from tritongen.loadtest.runner import ProgressCallback, run_load_test
from tritongen.loadtest.spec import LoadSpec, seconds_text
from tritongen.loadtest.validation import validation_failure
from tritongen.server.embedded import ServingHooks
from tritongen.workflows.serving import aimed_at, serving_if_asked
from tritongen.workflows.verdict import Verdict, ended_early, error_rate_failure, first_failure, slo_miss

DEFAULT_MAX_ERROR_RATE = 0.01
CALIBRATION_WARMUP_S = 1.0
"""Warm-up of each level's floor run (``--calibrate``)."""


@dataclass(frozen=True)
class Gates:
    """When a load test fails as a CI gate."""

    slo_p99_ms: float | None = None
    """Fail when a run's P99 (over rounds, a level's median P99) exceeds this."""
    max_error_rate: float = DEFAULT_MAX_ERROR_RATE
    """Fail when a run's failed requests exceed this fraction."""


@dataclass(frozen=True)
class LoadTestRequest:
    """What a load test is asked: the load, the models and their shares, where, and its gates."""

    spec: LoadSpec
    mix: Mix
    gates: Gates = field(default_factory=Gates)
    serve: Path | None = None
    """Start the embedded server on this repository for the test (None: the server at the spec's URL)."""
    skip_failed: bool = False
    """With ``serve``: the whole repository, less the models that fail to load."""
    load_timeout_s: float | None = None
    """With ``serve``: how long its start and loads may take (None: derived from the model count)."""
    confidence: float = DEFAULT_CONFIDENCE
    calibrate: bool = False
    """Measure the client's own floor at each level first (the null kind), and say where a run is near it."""

    def check(self) -> list[str]:
        """Refuse what cannot run together, before anything starts; the warnings to show.

        Raises:
            ConfigError: ``--master`` with ``--serve``, ``--skip-failed`` or ``--load-timeout``
                without it, or a mix that does not fit the load (the spec checked itself as it was made).
        """
        if self.skip_failed and self.serve is None:
            raise ConfigError("--skip-failed needs --serve REPO", "add --serve, or drop --skip-failed")
        if self.load_timeout_s is not None and self.serve is None:
            raise ConfigError("--load-timeout needs --serve REPO", "add --serve, or drop --load-timeout")
        warnings = []
        if self.spec.distributed is not None:
            if self.serve is not None:
                raise ConfigError(
                    "--master and --serve exclude each other: the server would listen on this machine's "
                    "loopback, which workers on other machines cannot reach",
                    "serve the model where the workers reach it and give its address with --url",
                )
            warning = loopback_warning(self.spec.address)
            warnings += [warning] if warning is not None else []
        self.mix.check(self.spec.mode, self.spec.levels)
        for option, given in (
            ("--server-trace", self.spec.server_trace is not None),
            ("--wire", self.spec.wire),
        ):
            if given and self.mix.mixed:
                raise ConfigError(f"{option} joins one model's requests", f"drop --mix, or {option}")
        if isinstance(self.spec.search, MaxSearch) and self.mix.mixed:
            raise ConfigError("--find-max searches one model's load", "drop --mix, or --find-max")
        if self.calibrate:
            if self.mix.mixed:
                raise ConfigError("--calibrate measures one model's load", "drop --mix, or --calibrate")
            calibration_spec(self.spec)  # what the floor cannot stand for is refused before anything runs
        return warnings

    def cost_text(self) -> str:
        """How long the runs will take, said before a long run starts."""
        spec = self.spec
        if isinstance(spec.search, MaxSearch):
            levels = spec.search.most_levels()
            return (
                f"--find-max: up to {levels} levels × {spec.rounds} round(s), about "
                f"{seconds_text(levels * spec.rounds * spec.run_seconds())} at most"
            )
        runs = spec.rounds * len(spec.levels)
        least, most = runs * spec.run_seconds(), runs * spec.run_seconds(longest=True)
        return (
            f"{len(spec.levels)} level(s) × {spec.rounds} round(s), levels interleaved: {runs} runs, "
            f"about {seconds_text(least)} (up to {seconds_text(most)} while runs wait to be stable)"
        )


@dataclass(frozen=True)
class LoadTestHooks:
    """Whom a load test tells as it goes, and the event that stops it (each optional)."""

    serving: ServingHooks = field(default_factory=ServingHooks)
    progress: ProgressCallback | None = None
    stop: threading.Event | None = None


@dataclass(frozen=True)
class LoadTestOutcome:
    """The report of every run, and how the test ends as a gate."""

    report: LoadTestReport
    verdict: Verdict


def run_loadtest(request: LoadTestRequest, hooks: LoadTestHooks | None = None) -> LoadTestOutcome:
    """Serve if asked, run the load (a mix when several models share it), and judge the gates.

    Raises:
        TritongenError: the server cannot start, or the load cannot be prepared.
    """
    hooks = hooks or LoadTestHooks()
    with serving_if_asked(
        request.serve, request.mix.models, hooks.serving, request.skip_failed, request.load_timeout_s
    ) as server:
        spec = aimed_at(request.spec, server)
        floor = None
        if request.calibrate:
            calibration = run_load_test(calibration_spec(spec), progress=hooks.progress, stop=hooks.stop)
            floor = client_floor(calibration.runs) if calibration.status == "ok" else None
        if request.mix.mixed:
            report = run_mix_test(spec, request.mix, progress=hooks.progress, stop=hooks.stop)
        else:
            report = run_load_test(spec, progress=hooks.progress, stop=hooks.stop)
    report.confidence = request.confidence
    report.client_floor = floor
    return LoadTestOutcome(report, loadtest_verdict(report, request.gates))


def loadtest_verdict(report: LoadTestReport, gates: Gates) -> Verdict:
    """Interrupted or aborted; else responses that differed, too many errors, then the P99 SLO."""
    early = ended_early(report, "load test")
    if early is not None:
        return early
    if report.find_max is not None:  # the search measured levels past the SLO on purpose
        found = report.find_max
        missed = None if found.meets is not None else ServerError(found.summary(), "start --find-max lower")
        return Verdict(failure=first_failure(validation_failure(report.runs, run_label), missed))
    failure = first_failure(
        validation_failure(report.runs, run_label),
        error_rate_failure(report.runs, gates.max_error_rate, run_label),
    )
    if failure is not None:
        return Verdict(failure=failure)
    return Verdict(slo_miss=slo_miss(report, gates.slo_p99_ms, run_label))


def run_label(run: RunResult) -> str:
    """A run's level as the load test names it: ``c=8``, ``500/s``, or ``seq=4`` for sequences in flight."""
    if run.sequences_per_s is not None:
        return f"seq={run.concurrency}"
    return f"c={run.concurrency}" if run.mode == "concurrency" else f"{run.target_rate:g}/s"


def calibration_spec(spec: LoadSpec) -> LoadSpec:
    """The floor's load: the spec's levels and address, the null kind, short, one round.

    Raises:
        ConfigError: a load the floor cannot stand for: gRPC (the null kind goes over HTTP), a
            language model's prompts, sequences, shared memory, or a distributed load.
    """
    refused = [
        ("--protocol grpc", spec.protocol != "http", "the floor is measured over HTTP"),
        ("--api", spec.llm is not None, "a language model's latency is its tokens', not a request's"),
        ("--sequences", spec.sequences, "a sequence's requests wait for each other"),
        ("--shared-memory system", spec.shared_memory != "none", "the floor sends no tensors"),
        ("--master", spec.distributed is not None, "the floor is this machine's own"),
        ("--find-max", spec.search is not None, "the floor stands for the levels given, not a search's"),
    ]
    for option, given, why in refused:
        if given:
            raise ConfigError(f"--calibrate does not apply with {option}: {why}", "drop --calibrate")
    return replace(
        spec, kind="null", batch_size=1, input_data="random", shapes={}, input_values={},
        duration_s=CALIBRATION_S, warmup_s=CALIBRATION_WARMUP_S, max_duration_s=CALIBRATION_S, rounds=1,
        window_s=None, count_window_requests=0, stop_at=None, server_trace=None, wire=False, search=None,
        timeslice_s=None,
    )  # fmt: skip
