"""Compare engines: convert and verify each format, serve them, measure them side by side.

Each engine is first loaded on its own, every other compared model unloaded, so its cold
start is a real one and its memory its own; a concurrency ramp picks its throughput
level. Then every engine is loaded and the deciding figures are measured in interleaved
rounds (A B C, B C A, C A B, …), so the machine's drift hits all alike and ratios are paired
per round. A running deployment (``url``) is left as it was found: the models it had
loaded are loaded again at the end.
"""

from __future__ import annotations

import contextlib
import functools
import http.client
import json
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tritongen.client.endpoint import normalise_url
from tritongen.client.repository import RepositoryControl
from tritongen.compare import decisions
from tritongen.compare.measure import (
    EngineMeasurement,
    Interrupted,
    MeasureSettings,
    ServerGone,
    ServerHandle,
    engine_spec,
)
from tritongen.compare.recommend import RANK_KEYS, rank, recommend
from tritongen.compare.result import CompareReport, EngineResult, LatencyRun, build_note
from tritongen.convert.precision import FP32, Variant
from tritongen.convert.result_json import read_precision_report
from tritongen.errors import ConfigError, TritongenError, first_line
from tritongen.loadtest.load_processes import load_processes
from tritongen.loadtest.result import RunResult
from tritongen.loadtest.rounds import Contender, Rounds, measure_rounds
from tritongen.loadtest.runner import Progress, metrics_url_for
from tritongen.loadtest.spec import RUN_OVERHEAD_S, seconds_text
from tritongen.metrics.hardware import describe_host, nvml_server_gpus, server_gpus
from tritongen.metrics.process_memory import local_server_pid
from tritongen.pipeline.request import BuildRequest, BuildResult, FormatOutcome, build_plan, model_dir_name
from tritongen.pipeline.run import build_models
from tritongen.server.local import LocalTritonServer
from tritongen.triton.repository import METADATA_FILE

Say = Callable[[str], None]
Update = Callable[[CompareReport], None]


@dataclass(frozen=True)
class CompareRequest:
    """What to compare, where, and how to measure."""

    source: str
    name: str
    formats: tuple[str, ...]
    settings: MeasureSettings
    build: BuildRequest | None = None
    """Convert the source into ``build.repo`` first; ``None`` measures models that exist."""
    repo: Path | None = None
    """The repository holding the models (their metadata gives precision and error)."""
    url: str | None = None
    """A running server (HTTP ``host:port``) instead of the embedded one."""
    metrics_url: str | None = None
    admin_key: str | None = None
    """For a --url server whose repository API is restricted."""
    rank_by: str = "throughput"
    decide: tuple[str, ...] = ()
    """``--rounds auto`` stops once these figures' pairs are decided (``latency``, ``throughput``;
    empty: the ``rank_by`` figure)."""
    unavailable: tuple[tuple[str, str], ...] = ()
    """Formats not attempted, with the reason (shown as ``unavailable`` rows)."""
    precisions: tuple[Variant, ...] = (FP32,)
    """Each format is compared in each of these precisions it takes."""
    max_drift: float | None = None
    """Reduced-precision engines drifting more than this (relative RMS) are not recommended."""

    def check(self) -> None:
        """Reject impossible requests.

        Raises:
            ConfigError: nothing to measure, or an unknown ranking.
        """
        self.settings.check()
        if self.rank_by not in RANK_KEYS:
            raise ConfigError(f"--rank-by {self.rank_by!r} is unknown", f"use one of: {', '.join(RANK_KEYS)}")
        decisions.decided_figures(self.decide, self.rank_by)
        if self.build is None and self.repo is None and self.url is None:
            raise ConfigError("nothing to measure", "give a source to convert, --repo or --url")
        if self.build is None and self.url is None and self.repo is not None and not self.repo.is_dir():
            raise ConfigError(f"--repo {self.repo} does not exist", "pass a model repository")


def run_compare(
    request: CompareRequest,
    say: Say | None = None,
    progress: Callable[[Progress], None] | None = None,
    on_update: Update | None = None,
    stop: threading.Event | None = None,
) -> CompareReport:
    """Build (or find) every engine, measure each, rank them and recommend.

    ``on_update`` is called with the report after the build and after every engine, so a
    partial result can be saved; a stop (Ctrl-C) or a server that goes away ends the
    comparison with status ``interrupted`` or ``aborted`` and what was measured.

    Raises:
        TritongenError: the source, options or repository are unusable, or the server
            cannot be started or reached (nothing measured then).
    """
    report = prepare_compare(request, say)
    if on_update is not None:
        on_update(report)
    with load_processes():  # one set of Locust processes for every run of the comparison
        return measure_compare(request, report, say, progress, on_update, stop)


def prepare_compare(request: CompareRequest, say: Say | None = None) -> CompareReport:
    """The report before measuring: every engine converted and verified, or found in the repository.

    Raises:
        TritongenError: the source, options or repository are unusable.
    """
    request.check()
    tell = say or (lambda _msg: None)
    plan, _ = build_plan(request.formats, request.precisions)  # FP32-only formats: their FP32 row is enough
    report = CompareReport(
        source=request.source,
        name=request.name,
        hardware={"host": describe_host()},
        settings={
            **request.settings.to_json(),
            "rank_by": request.rank_by,
            "url": request.url,
            "precisions": [v.key for v in request.precisions],
            "max_drift": request.max_drift,
        },
        engines=[
            EngineResult(format=f, model=model_dir_name(request.name, f, v), precision=v.key) for f, v in plan
        ],
    )
    for fmt, reason in request.unavailable:
        model = model_dir_name(request.name, fmt)
        report.engines.append(EngineResult(format=fmt, model=model, status="unavailable", reason=reason))
    if request.build is not None:
        apply_build(report, build_models(request.build, progress=tell))
    elif request.repo is not None:
        apply_metadata(report, request.repo)
    return report


def measure_compare(
    request: CompareRequest,
    report: CompareReport,
    say: Say | None = None,
    progress: Callable[[Progress], None] | None = None,
    on_update: Update | None = None,
    stop: threading.Event | None = None,
) -> CompareReport:
    """Serve the prepared engines and measure each one; rank them and recommend.

    Raises:
        TritongenError: the server cannot be started or reached (nothing measured then).
    """
    tell = say or (lambda _msg: None)
    update = on_update or (lambda _report: None)
    pending = [e for e in report.engines if e.status == "pending"]
    if pending:
        with _serving(request, tell) as server:
            report.hardware["server"] = describe_server(server)
            _measure_all(request, report, server, pending, _Listeners(tell, progress, update, stop))
    finish(report, request.rank_by)
    update(report)
    return report


def finish(report: CompareReport, rank_by: str) -> None:
    """Rank the engines and compute the recommendations."""
    report.engines = rank(report.engines, rank_by)
    max_drift = report.settings.get("max_drift")
    report.recommendations = recommend(
        report.engines, float(max_drift) if max_drift is not None else None, report.verdict_confidence()
    )


def apply_build(report: CompareReport, build: BuildResult) -> None:
    """Status, precision and verification error of each engine from the conversion."""
    for outcome in build.outcomes:
        try:
            engine = report.engine(outcome.name)
        except KeyError:
            continue  # a combination no format takes: already listed as unavailable
        engine.convert_s = round(outcome.seconds, 3)
        if outcome.model is not None:
            engine.build = build_note(outcome.format, outcome.model.engine)
        _apply_verification(engine, outcome)
        if outcome.precision is not None:
            engine.apply_precision(outcome.precision)
        if outcome.status == "built":
            engine.precision = outcome.variant.key
        elif outcome.status == "unavailable":
            engine.status, engine.reason = "unavailable", outcome.reason
        else:
            engine.status, engine.reason = "failed", outcome.reason


def _apply_verification(engine: EngineResult, outcome: FormatOutcome) -> None:
    check = outcome.verification
    if check is None or not check.outputs:
        return
    engine.max_abs_err = max(o.max_abs for o in check.outputs)
    engine.max_rel_err = max(o.max_rel for o in check.outputs)
    engine.tolerance = check.tolerance.to_json()


def _precision(facts: dict[str, Any]) -> str:
    precision = facts.get("precision")
    return str(precision) if precision else "fp32"


def apply_metadata(report: CompareReport, repo: Path) -> None:
    """Precision and verification error from each model's metadata in an existing repository."""
    for engine in report.engines:
        model_dir = repo / engine.model
        if not model_dir.is_dir():
            engine.status = "unavailable"
            engine.reason = f"no model directory {engine.model} in {repo}"
            continue
        try:
            meta = json.loads((model_dir / METADATA_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue  # built elsewhere: measured, but precision and error are unknown
        facts = meta.get("engine") if isinstance(meta.get("engine"), dict) else {}
        engine.precision = _precision(facts)
        engine.build = build_note(engine.format, facts)
        if isinstance(meta.get("precision"), dict):
            engine.apply_precision(read_precision_report(meta["precision"]))
        verification = meta.get("verification")
        if isinstance(verification, dict) and verification.get("outputs"):
            outputs = verification["outputs"]
            engine.max_abs_err = max(float(o["max_abs_err"]) for o in outputs)
            engine.max_rel_err = max(float(o["max_rel_err"]) for o in outputs)
            engine.tolerance = {"atol": float(verification["atol"]), "rtol": float(verification["rtol"])}
            if not verification.get("passed", True):
                engine.status = "failed"
                engine.reason = "its verification against the source failed when it was built"


@contextlib.contextmanager
def _serving(request: CompareRequest, say: Say) -> Iterator[ServerHandle]:
    if request.url is not None:
        http = normalise_url(request.url)
        yield ServerHandle(
            http_url=http,
            grpc_url=f"{http.rpartition(':')[0]}:8001",
            metrics_url=request.metrics_url or metrics_url_for(http),
            pid=local_server_pid(http),
            admin_key=request.admin_key,
        )
        return
    repo = request.build.repo if request.build is not None else request.repo
    assert repo is not None
    say("starting the embedded Triton server")
    with LocalTritonServer(repo, http_port=0, grpc_port=0, metrics_port=0, models=[]) as server:
        yield ServerHandle(server.http_url, server.grpc_url, server.metrics_url, server.pid)


def describe_server(server: ServerHandle) -> dict[str, Any]:
    """The server the engines ran on: address, Triton version, its GPUs (metrics endpoint, else NVML)."""
    control = RepositoryControl(server.http_url, admin_key=server.admin_key)
    try:
        version = control.server_version()
    finally:
        control.close()
    try:
        with urllib.request.urlopen(server.metrics_url, timeout=5) as response:
            gpus = server_gpus(response.read().decode("utf-8", errors="replace"))
    except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException):
        gpus = []
    if not gpus:  # no DCGM figures: the GPUs NVML sees the server use (server on this machine)
        gpus = nvml_server_gpus(server.pid, server.http_url)
    return {
        "url": server.http_url,
        "triton_version": version,
        "gpus": gpus,
        "local_pid": server.pid is not None,
    }


COLD_START_S = 5.0


def estimate_seconds(settings: MeasureSettings, engines: int) -> float:
    """Roughly how long measuring ``engines`` engines takes: a ramp each, then the rounds."""
    run_s = settings.warmup_s + settings.duration_s + RUN_OVERHEAD_S
    ramp_s = COLD_START_S + len(settings.concurrency_levels) * run_s
    return engines * ramp_s + settings.rounds * engines * 2 * run_s


def cost_text(settings: MeasureSettings, engines: int) -> str:
    """What the measurement will cost, said before it starts (e.g. ``about 4 min: …``)."""
    return (
        f"about {seconds_text(estimate_seconds(settings, engines))} (a concurrency ramp each, then "
        f"{_rounds_text(settings)} of P99 at batch 1 and throughput, "
        f"{settings.duration_s:g} s each)"
    )


def _rounds_text(settings: MeasureSettings) -> str:
    if settings.stopping is None:
        return f"{settings.rounds} interleaved round(s)"
    return f"interleaved rounds {settings.stopping.text()}"


FIGURES_B1 = {"p99_ms_b1": "p99", "p50_ms_b1": "p50"}
"""Figures of the batch-1 runs, in ms, from the runs' latency percentiles."""


Ramped = list[tuple[EngineResult, dict[str, tuple[int, ...]]]]
"""Engines their ramp measured without failure, each with the input shapes it is sent."""


@dataclass(frozen=True)
class _Listeners:
    """Whom the measurement tells as it goes, and the event that stops it."""

    say: Say
    progress: Callable[[Progress], None] | None
    update: Update
    stop: threading.Event | None


def _measure_rounds(
    request: CompareRequest,
    report: CompareReport,
    server: ServerHandle,
    control: RepositoryControl,
    engines: Ramped,
    listeners: _Listeners,
) -> None:
    """The deciding figures, every engine loaded, measured in rounds, the order rotating (A B C, B C A, …).

    Each round measures the P99 of single requests of every engine, then the throughput of
    every engine at the concurrency its ramp chose, so drift of the machine falls on all
    engines alike and their ratios can be taken per round.
    """
    settings, rule = request.settings, request.settings.stopping
    figures = decisions.decided_figures(request.decide, request.rank_by)
    engines = _load_all(control, engines)
    state = {"deciding": ""}

    def started(number: int, total: int, name: str) -> None:
        of = f"{number} (at most {total})" if rule is not None else f"{number}/{total}"
        listeners.say(f"round {of}: {_round_labels(engines)[name]}{state['deciding']}")

    def done(rounds: Rounds) -> None:
        _apply_rounds(engines, rounds, settings.confidence)
        listeners.update(report)

    def decided(_: Rounds) -> bool:  # after done(): the engines' round figures are this round's
        assert rule is not None
        verdicts = decisions.pair_verdicts(
            [e for e, _ in engines], rule, settings.confidence, figures=figures
        )
        state["deciding"] = f"; {decisions.progress_text(verdicts)}"
        return all(v.decision is not None for _, v in verdicts)

    rounds = measure_rounds(
        _round_contenders(server, settings, engines),
        settings.rounds,
        listeners.progress,
        listeners.stop,
        on_start=started,
        on_round=done,
        until=decided if rule is not None else None,
        max_s=rule.max_minutes * 60 if rule is not None and rule.max_minutes else None,
        busy_repeats=rule.busy_repeats if rule is not None else 0,
    )
    _apply_rounds(engines, rounds, settings.confidence)
    if rule is not None:
        given = report.settings.get("stopping") or {}
        found = decisions.record([e for e, _ in engines], rounds, rule, settings.confidence, figures)
        report.settings["stopping"] = {**given, **found}
    if rounds.status == "interrupted":
        report.status = "interrupted"
    elif rounds.status == "aborted":
        report.status = "aborted"
        for engine, _ in engines:
            engine.reason = f"the server stopped answering in round {rounds.completed + 1}: {rounds.reason}"
    for engine, _ in engines:
        with contextlib.suppress(TritongenError):
            control.unload(engine.model)


def _load_all(control: RepositoryControl, engines: Ramped) -> Ramped:
    """Load every engine for the rounds; those that do not load beside the others fail and are left out."""
    loaded = []
    for engine, shapes in engines:
        try:
            control.load(engine.model)
        except TritongenError as e:  # measured alone, but it does not load beside the others
            engine.status = "failed"
            engine.reason = f"could not be loaded for the rounds: {first_line(e, 300)}"
            continue
        loaded.append((engine, shapes))
    return loaded


def _round_contenders(server: ServerHandle, settings: MeasureSettings, engines: Ramped) -> list[Contender]:
    """Each engine's P99 at batch 1 (``model|b1``), then each one's throughput (``model|b32``)."""
    return [
        Contender(f"{e.model}|b1", engine_spec(server, settings, e.model, 1, 1, shapes))
        for e, shapes in engines
    ] + [
        Contender(
            f"{e.model}|b32",
            engine_spec(
                server, settings, e.model, e.batch_size_throughput or 1, e.concurrency_b32 or 1, shapes
            ),
        )
        for e, shapes in engines
    ]


def _round_labels(engines: Ramped) -> dict[str, str]:
    """How each contender of the rounds is named in messages, e.g. ``ONNX Runtime, throughput``."""
    return {
        f"{e.model}|{kind}": f"{e.label}, {what}"
        for e, _ in engines
        for kind, what in (("b1", "P99 at batch 1"), ("b32", "throughput"))
    }


def _apply_rounds(engines: Ramped, rounds: Rounds, confidence: float) -> None:
    """Each engine's figures from its runs so far: per round, and their medians and intervals."""
    for engine, _ in engines:
        b1 = rounds.runs.get(f"{engine.model}|b1", [])
        b32 = rounds.runs.get(f"{engine.model}|b32", [])
        engine.rounds = min(len(b1), len(b32))
        engine.latency_runs = [r for r in engine.latency_runs if r.figure == "ramp"]
        engine.latency_runs += [LatencyRun("p99_ms_b1", r) for r in b1]
        engine.latency_runs += [LatencyRun("infer_per_s_b32", r) for r in b32]
        figures: dict[str, list[float | None]] = {
            name: rounds.figures(f"{engine.model}|b1", functools.partial(_ms, key=key))
            for name, key in FIGURES_B1.items()
        }
        figures["infer_per_s_b1"] = rounds.figures(f"{engine.model}|b1", lambda r: r.infer_per_s)
        figures["infer_per_s_b32"] = rounds.figures(f"{engine.model}|b32", lambda r: r.infer_per_s)
        figures["p99_ms_b32"] = rounds.figures(f"{engine.model}|b32", functools.partial(_ms, key="p99"))
        engine.round_figures = figures
        engine.summarise(confidence)
        errors = sum(r.errors for r in b1 + b32)
        ramp_errors = sum(r.run.errors for r in engine.latency_runs if r.figure == "ramp")
        engine.errors = ramp_errors + errors
        if engine.errors:
            engine.status = "failed"
            engine.reason = f"{engine.errors} request(s) failed under load"


def _ms(run: RunResult, key: str) -> float | None:
    return run.latency_us[key] / 1000 if run.latency_us else None


def _measure_all(
    request: CompareRequest,
    report: CompareReport,
    server: ServerHandle,
    pending: list[EngineResult],
    listeners: _Listeners,
) -> None:
    say, progress, stop = listeners.say, listeners.progress, listeners.stop
    control = RepositoryControl(server.http_url, admin_key=server.admin_key)
    compared = {e.model for e in report.engines}
    states = control.index()
    was_loaded = sorted(m for m in compared if states.get(m) == "READY")
    ramped: Ramped = []
    say(f"measuring {len(pending)} engine(s): {cost_text(request.settings, len(pending))}")
    try:
        for engine in pending:
            if stop is not None and stop.is_set():
                report.status = "interrupted"
                return
            if engine.model not in states:
                engine.status = "unavailable"
                engine.reason = f"the server at {server.http_url} has no model {engine.model}"
                continue
            for model in compared:
                if control.index().get(model) == "READY":
                    control.unload(model)
            measurement = EngineMeasurement(server, engine, request.settings, say, progress, stop)
            try:
                measurement.run(functools.partial(control.load, engine.model))
            except Interrupted:
                report.status = "interrupted"
                engine.reason = "interrupted while it was measured"
                return
            except ServerGone as e:
                report.status = "aborted"
                engine.status, engine.reason = "failed", f"the server stopped answering: {e}"
                return
            with contextlib.suppress(TritongenError):
                control.unload(engine.model)
            if engine.ok:
                ramped.append((engine, measurement.shapes))
            listeners.update(report)
        if ramped:
            _measure_rounds(request, report, server, control, ramped, listeners)
    finally:
        if request.url is not None and report.status != "aborted":
            for model in was_loaded:  # leave the deployment as it was found
                with contextlib.suppress(TritongenError):
                    control.load(model)
        control.close()
