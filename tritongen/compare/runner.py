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
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tritongen.client.address import ServerAddress
from tritongen.client.repository import RepositoryControl
from tritongen.compare import decisions
from tritongen.compare.build_facts import apply_build, apply_metadata
from tritongen.compare.engine_rounds import Listeners, Ramped, RoundsPlan, Say, Update, measure_engine_rounds
from tritongen.compare.measure import (
    EngineMeasurement,
    Interrupted,
    MeasureSettings,
    ServerGone,
    ServerHandle,
)
from tritongen.compare.recommend import RANK_KEYS, rank, recommend
from tritongen.compare.result import CompareReport, EngineResult
from tritongen.convert.precision import FP32, Variant
from tritongen.errors import ConfigError, TritongenError
from tritongen.loadtest.load_processes import load_processes
from tritongen.loadtest.runner import Progress
from tritongen.loadtest.spec import RUN_OVERHEAD_S, seconds_text
from tritongen.metrics.hardware import describe_host, nvml_server_gpus, server_gpus
from tritongen.pipeline.request import BuildRequest, build_plan, model_dir_name
from tritongen.pipeline.run import build_models
from tritongen.server.local import LocalTritonServer


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
            _measure_all(request, report, server, pending, Listeners(tell, progress, update, stop))
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


@contextlib.contextmanager
def _serving(request: CompareRequest, say: Say) -> Iterator[ServerHandle]:
    if request.url is not None:
        address = ServerAddress.parse(request.url, "http", request.metrics_url)
        yield ServerHandle(
            http_url=address.url,
            grpc_url=address.beside("grpc").url,
            metrics_url=address.metrics_url,
            pid=address.listening_pid(),
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


def _measure_all(
    request: CompareRequest,
    report: CompareReport,
    server: ServerHandle,
    pending: list[EngineResult],
    listeners: Listeners,
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
            plan = RoundsPlan(request.settings, request.decide, request.rank_by)
            measure_engine_rounds(plan, report, server, control, ramped, listeners)
    finally:
        if request.url is not None and report.status != "aborted":
            for model in was_loaded:  # leave the deployment as it was found
                with contextlib.suppress(TritongenError):
                    control.load(model)
        control.close()
