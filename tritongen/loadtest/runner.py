"""The load-test engine's front door: a load test, each level (and round) a run in Locust.

:func:`run_load_test` prepares the model's load once (its kind and its requests: one endpoint,
one input file, one metrics sampler), then measures every level in every round
(:func:`measure_levels`), each level a :class:`~.level.LevelRun` of one Locust followed until
its measurement is done. A :class:`~.sweep_rules.SweepRule` in the spec may end the sweep
early (``--stop-at-saturation``; perf_analyzer's ``-l`` and its stop at an unstable level).
Mixes (:mod:`.mix`), background loads (:mod:`.background`) and interleaved rounds
(:mod:`.rounds`) run on the same engine.
"""

from __future__ import annotations

import secrets
import shutil
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from tritongen.client.endpoint import TritonEndpoint
from tritongen.errors import ConfigError
from tritongen.loadtest.distributed import add_worker_figures
from tritongen.loadtest.find_max import MaxSearch
from tritongen.loadtest.level import FollowHooks, LevelRun, Measurement
from tritongen.loadtest.load_processes import load_processes
from tritongen.loadtest.model_run import Launch, ModelRun
from tritongen.loadtest.prepared import LoadTest, prepare_test
from tritongen.loadtest.progress import Progress, ProgressCallback
from tritongen.loadtest.result import LoadTestReport, RunResult
from tritongen.loadtest.result import run_level as level_of
from tritongen.loadtest.run_figures import run_result
from tritongen.loadtest.server_counters import ServerCounters
from tritongen.loadtest.server_trace import ServerTrace, server_tracing
from tritongen.loadtest.spec import LoadSpec
from tritongen.loadtest.sweep_rules import LevelSearch
from tritongen.loadtest.validation import validation_figures
from tritongen.loadtest.windows import merge
from tritongen.loadtest.wire.check import WireCheck, wire_checking
from tritongen.server.affinity import pinned_server

__all__ = [
    "LoadPlan",
    "LoadTest",
    "Progress",
    "ProgressCallback",
    "Told",
    "level_label",
    "measure_levels",
    "run_level",
    "run_load_test",
    "run_plan",
]

RunEnded = Callable[[RunResult], None]
"""Called with each run as it ends, before the next one starts."""


@dataclass(frozen=True)
class Told:
    """What a load test is told by its caller: where progress goes, when to stop, who hears of each run."""

    progress: ProgressCallback | None = None
    stop: threading.Event | None = None
    on_run: RunEnded | None = None


def run_load_test(
    spec: LoadSpec,
    progress: ProgressCallback | None = None,
    stop: threading.Event | None = None,
    on_run: RunEnded | None = None,
) -> LoadTestReport:
    """Run every level of ``spec`` and return the report (partial when stopped early).

    A level stopped by the server going away ends the test with status ``aborted``; Ctrl-C
    (KeyboardInterrupt) or ``stop`` ends it with status ``interrupted``. Either way the runs
    measured so far, and the partial one, are in the report. ``on_run`` hears of each run as
    it ends.

    Raises:
        TritongenError: the load does not fit the model, or the server or model cannot be reached
            before the first run starts.
    """
    plan = LoadPlan(
        model=spec.model,
        specs=lambda _endpoint: [spec],
        level=lambda tests, level, number, told: run_level(tests[0], level, number, told),
    )
    return run_plan(spec, plan, Told(progress, stop, on_run))


@dataclass(frozen=True)
class LoadPlan:
    """What a load test measures: its models' loads, and how one level of them runs."""

    model: str
    """The report's model: the model, or the models of a mix."""
    specs: Callable[[TritonEndpoint], list[LoadSpec]]
    """Each model's load, checked with the server where it must be."""
    level: Callable[[list[LoadTest], float, int, Told], RunResult]
    """One level (and round) of the prepared loads, measured."""


def run_plan(spec: LoadSpec, plan: LoadPlan, told: Told) -> LoadTestReport:
    """Prepare every model's load once (one endpoint, one input file each, one sampler), measure each level.

    Raises:
        TritongenError: a load does not fit its model, or the server or a model cannot be reached.
    """
    report = LoadTestReport(
        model=plan.model, protocol=spec.protocol, url=spec.address.url, rounds=spec.rounds
    )
    report.shared_memory = spec.shared_memory
    report.cpus = spec.cpus.to_json() if spec.cpus else None
    endpoint = TritonEndpoint.at(spec.address, timeout_s=10)
    workdir = Path(tempfile.mkdtemp(prefix="tritongen-load-"))
    server_pid = spec.address.listening_pid()
    tests: list[LoadTest] = []
    tag = secrets.token_hex(3)  # the requests' ids, for the server's trace and the wire alike
    trace = ServerTrace(spec.server_trace, tag=tag) if spec.server_trace is not None else None
    streams = spec.llm is not None  # an LLM load's streams are checked, not its requests' ids
    wire = None
    if spec.wire:
        grpc = streams and spec.protocol == "grpc"
        wire = WireCheck(workdir / "wire.pcap", spec.address.port, tag, streams=streams, grpc_streams=grpc)
    try:
        for index, model_spec in enumerate(plan.specs(endpoint)):  # one sampler: the first model's kind's
            sampler = tests[0].sampler if tests else None
            test = prepare_test(model_spec, endpoint, workdir / f"m{index}", server_pid, sampler)
            tests.append(replace(test, trace=trace, wire=wire))
        check_traceable(tests)
        tests[0].sampler.start()
        with (
            pinned_server(server_pid, spec.cpus),
            load_processes(),
            server_tracing(trace, spec.address.url, spec.protocol, overlapping=spec.overlapping),
            wire_checking(wire),
        ):
            measure_levels(
                spec,
                report,
                lambda level, number: plan.level(tests, level, number, told),
                label=lambda level: tests[0].kind.level_text(spec, level),
                on_run=told.on_run,
            )
    finally:
        if tests:
            tests[0].sampler.stop()
        endpoint.close()
        shutil.rmtree(workdir, ignore_errors=True)
    return report


def measure_levels(
    spec: LoadSpec,
    report: LoadTestReport,
    run: Callable[[float, int], RunResult],
    label: Callable[[float], str] | None = None,
    on_run: RunEnded | None = None,
) -> None:
    """Run every level in every round (levels interleaved: 1 2 3, 1 2 3, …) into ``report``.

    The first run that does not end ``ok`` ends the test with its status. With
    ``spec.stop_at``, the first round stops at the first level its rule stops the sweep at
    (``report.sweep_stop`` says why; ``label`` names a level to it), and later rounds measure
    the levels up to that one. With ``spec.search``, the first round's levels are the search's,
    and later rounds measure those.
    """
    name = label or (lambda level: f"level {level:g}")
    levels = list(spec.levels)
    for number in range(1, spec.rounds + 1):
        if number == 1 and spec.search is not None:
            searched = _search_round(spec.search, report, lambda level: run(level, 1), name, on_run)
            if isinstance(spec.search, MaxSearch):  # the bracket so far, also where a run ended the test
                found = [(level_of(result), spec.search.passes(result, "")) for result in report.runs]
                report.find_max = spec.search.outcome(found, report.runs)
            if searched is None:
                return
            levels = searched
            continue
        previous: RunResult | None = None
        for index, level in enumerate(levels):
            result = run(level, number)
            if not _recorded(report, result, on_run):
                return
            stop = spec.stop_at.check(previous, result, name(level)) if spec.stop_at else None
            if number == 1 and stop is not None:
                report.sweep_stop = replace(stop, skipped=tuple(levels[index + 1 :]))
                levels = levels[: index + 1]
                break
            previous = result


def _search_round(
    search: LevelSearch,
    report: LoadTestReport,
    run: Callable[[float], RunResult],
    label: Callable[[float], str],
    on_run: RunEnded | None,
) -> list[float] | None:
    """The levels a search chose, each measured as it was chosen; None when a run ended the test."""
    measured: list[tuple[float, bool]] = []
    level = search.next_level(measured)
    while level is not None:
        result = run(level)
        if not _recorded(report, result, on_run):
            return None
        measured.append((level, search.passes(result, label(level))))
        level = search.next_level(measured)
    return [level for level, _ in measured]


def _recorded(report: LoadTestReport, result: RunResult, on_run: RunEnded | None) -> bool:
    """Add a run to the report and tell ``on_run``; False when the run did not end ``ok`` (the test ends)."""
    report.runs.append(result)
    if on_run is not None:
        on_run(result)
    if result.status != "ok":
        report.status = result.status
        return False
    return True


def level_label(test: LoadTest, level: float, number: int) -> str:
    """A level in the progress line: ``concurrency 8`` (``(round 2/3)`` with several rounds)."""
    label = test.kind.level_text(test.spec, level)
    return label + (f" (round {number}/{test.spec.rounds})" if test.spec.rounds > 1 else "")


def run_level(test: LoadTest, level: float, number: int, told: Told) -> RunResult:
    """One level of one model: its Locust followed until the measurement is done, and its result.

    Raises:
        ServerError: Locust could not be started, or did not take the run.
    """
    part = ModelRun(test, level, number)
    run = LevelRun([part], level_label(test, level, number))
    counters = ServerCounters(test.endpoint) if test.kind.statistics else None
    hooks = FollowHooks(stop=told.stop, measure=Measurement(run, test.spec, told.progress, counters))
    outcome = run.execute(Launch(), hooks)
    result = run_result(part, part.watch.measured, run.start, run.t0, outcome, counters)
    if test.requests.expected is not None:  # every response of the run, warm-up included
        everything = merge(list(part.watch.log.windows.values()))
        result.validation = validation_figures(everything, test.requests.expected)
    if test.spec.distributed is not None:
        add_worker_figures(result, part.watch.measured, part.watch.log, part.users(), part.watch.t0)
    if run.start is not None:  # the requests' ids over the measured span: the server's trace, the wire
        end = run.start + len(part.watch.measured)
        span = (run.t0 + run.start * part.window_s, run.t0 + end * part.window_s)
        for joined in (test.trace, test.wire):
            if joined is not None:
                joined.add(result, part.results, part.processes, span)
    return result


STREAMED_KINDS = ("openai", "triton-llm")
"""LLM kinds ``--wire`` checks by their streams (their requests carry no id)."""


def check_traceable(tests: list[LoadTest]) -> None:
    """``--server-trace`` and ``--wire`` join tensor requests by their ids: a load of another kind is refused.

    Raises:
        ConfigError: a traced load whose kind's requests carry no id.
    """
    for test in tests:
        option = "--server-trace" if test.trace is not None else "--wire" if test.wire is not None else None
        if option == "--wire" and test.kind.name in STREAMED_KINDS:  # checked by their streams
            continue
        if option is not None and test.kind.name != "tensor":
            raise ConfigError(
                f"{option} does not apply to the {test.kind.name} load of '{test.spec.model}': "
                "only tensor requests carry a request id here",
                f"drop {option}",
            )
