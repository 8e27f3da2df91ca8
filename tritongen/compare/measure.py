"""Measure one engine on a running Triton server: cold start, latency, throughput, memory.

The model is loaded (the cold start runs from the load request to the first successful
response), then batches are sent at rising concurrency until throughput stops growing,
with the same machinery as ``tritongen loadtest``: that ramp picks the concurrency of the
throughput figure. Memory is sampled all along: the server's GPU memory where it reports
a GPU, else the resident memory of the model's backend processes. The deciding figures
(P99 of single requests, throughput at the chosen concurrency) are measured afterwards,
in rounds interleaved with the other engines (``compare.runner``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from tritongen.client.address import ServerAddress
from tritongen.client.endpoint import TritonEndpoint
from tritongen.client.inputs import ModelInterface, build_inputs
from tritongen.compare.result import EngineResult, LatencyRun
from tritongen.errors import ConfigError, ModelLoadError, ServerError, TritongenError, first_line
from tritongen.intervals import DEFAULT_CONFIDENCE, DEFAULT_ROUNDS, check_confidence, check_rounds
from tritongen.loadtest.result import LoadTestReport, RunResult
from tritongen.loadtest.runner import Progress, run_load_test
from tritongen.loadtest.shapes.trace_replay import TraceReplay
from tritongen.loadtest.spec import LoadSpec
from tritongen.metrics.process_memory import ProcessMemorySampler
from tritongen.metrics.prometheus import MetricsSampler
from tritongen.server.affinity import CpuPlan
from tritongen.stopping import StopRule

FIRST_RESPONSE_TIMEOUT_S = 300.0
RAMP_GAIN = 1.05
"""The concurrency ramp stops when a level adds less than 5% throughput."""

Say = Callable[[str], None]


@dataclass(frozen=True)
class MeasureSettings:
    """How every engine is measured (the same for all of them)."""

    batch_size_throughput: int = 32
    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    """Explicit ``--shape`` values per input."""
    seq: int | None = None
    """Value of every other dynamic dim (``--seq``)."""
    duration_s: float = 10.0
    warmup_s: float = 2.0
    concurrency_levels: tuple[int, ...] = (1, 2, 4, 8)
    protocol: str = "http"
    seed: int = 0
    rounds: int = DEFAULT_ROUNDS
    """Interleaved rounds of the deciding figures (every engine once per round)."""
    confidence: float = DEFAULT_CONFIDENCE
    stopping: StopRule | None = None
    """``--rounds auto``: rounds stop once every pair is decided (``rounds`` is then the cap)."""
    window_s: float | None = None
    """Measurement window of each run (``None``: the load test's default for the duration)."""
    max_duration_s: float | None = None
    """Cap of each run while it waits for stability (``None``: 1.5 × duration)."""
    cpus: CpuPlan | None = None
    """``--cpus``: the server's tree and the load processes on cores of their own (None: not pinned)."""
    trace: TraceReplay | None = None
    """``--trace``: recorded requests each engine replays in every round (its P99 under them)."""

    def check(self) -> None:
        """Reject impossible settings.

        Raises:
            ConfigError: a non-positive batch, duration, level or sequence length.
        """
        if self.batch_size_throughput < 1:
            raise ConfigError("--batch-size-throughput must be at least 1", "e.g. --batch-size-throughput 32")
        if self.seq is not None and self.seq < 1:
            raise ConfigError("--seq must be at least 1", "e.g. --seq 128")
        if not self.concurrency_levels or any(c < 1 for c in self.concurrency_levels):
            raise ConfigError("--concurrency levels must be positive", "e.g. --concurrency 1,2,4,8")
        if self.duration_s <= 0 or self.warmup_s < 0:
            raise ConfigError("--duration must be positive and --warmup not negative", "e.g. --duration 10s")
        if self.window_s is not None and self.window_s <= 0:
            raise ConfigError("--window must be positive", "e.g. --window 2s")
        check_rounds(self.rounds)
        check_confidence(self.confidence)
        if self.stopping is not None:
            self.stopping.check()

    def to_json(self) -> dict[str, Any]:
        """JSON form (recorded in the report)."""
        data = asdict(replace(self, trace=None))
        data["trace"] = self.trace.describe() if self.trace is not None else None
        data["shapes"] = {k: list(v) for k, v in self.shapes.items()}
        data["concurrency_levels"] = list(self.concurrency_levels)
        data["cpus"] = self.cpus.to_json() if self.cpus else None
        for default_rule in ("window_s", "max_duration_s", "stopping", "cpus", "trace"):  # only when given
            if data[default_rule] is None:
                del data[default_rule]
        return data


@dataclass(frozen=True)
class ServerHandle:
    """Where the engines are served, and what of it this machine can observe."""

    http_url: str
    grpc_url: str
    metrics_url: str
    """Prometheus endpoint of the server."""
    pid: int | None = None
    """The ``tritonserver`` process when it runs on this machine (for /proc memory)."""
    admin_key: str | None = None
    """The key of a server whose repository API is restricted."""

    def address(self, protocol: str) -> ServerAddress:
        """The server's address for ``protocol``, with its metrics endpoint."""
        url = self.grpc_url if protocol == "grpc" else self.http_url
        return ServerAddress.parse(url, protocol, self.metrics_url)


class Interrupted(Exception):
    """The measurement was stopped (Ctrl-C); the engine keeps what was measured."""


class ServerGone(Exception):
    """The server stopped answering during a measurement."""


def request_shapes(interface: ModelInterface, settings: MeasureSettings) -> dict[str, tuple[int, ...]]:
    """Shapes of the non-batch dims of every input: ``--shape`` first, then ``--seq`` for dynamic dims.

    Raises:
        ConfigError: ``--shape`` names an input the model lacks.
    """
    names = {t.name for t in interface.inputs}
    unknown = sorted(set(settings.shapes) - names)
    if unknown:
        raise ConfigError(
            f"--shape names '{unknown[0]}', which '{interface.name}' does not have",
            f"inputs are: {', '.join(sorted(names))}",
        )
    shapes = dict(settings.shapes)
    if settings.seq is not None:
        for tensor in interface.inputs:
            if tensor.name not in shapes and -1 in tensor.dims:
                shapes[tensor.name] = tuple(settings.seq if d == -1 else d for d in tensor.dims)
    return shapes


def cold_start(
    endpoint: TritonEndpoint, model: str, load: Callable[[], None], settings: MeasureSettings
) -> tuple[float, float, ModelInterface]:
    """Load ``model`` and send single requests until one succeeds.

    Returns (seconds from the load request to the first successful response, seconds the
    load took, the model's interface).

    Raises:
        TritongenError: the server refused to load the model, or no request succeeded
            within :data:`FIRST_RESPONSE_TIMEOUT_S`.
    """
    started = time.perf_counter()
    load()
    loaded = time.perf_counter()
    interface = endpoint.interface(model)
    inputs = build_inputs(interface, 1, request_shapes(interface, settings), seed=settings.seed)
    last: TritongenError | None = None
    while time.perf_counter() - started < FIRST_RESPONSE_TIMEOUT_S:
        try:
            endpoint.infer(model, inputs, interface.outputs)
            return time.perf_counter() - started, loaded - started, interface
        except TritongenError as e:
            last = e
            time.sleep(0.05)
    raise ServerError(
        f"'{model}' gave no successful response within {FIRST_RESPONSE_TIMEOUT_S:.0f} s of loading"
        + (f": {last.message}" if last else ""),
        "see the server log",
    )


def engine_spec(
    server: ServerHandle,
    settings: MeasureSettings,
    model: str,
    batch_size: int,
    concurrency: int,
    shapes: dict[str, tuple[int, ...]],
) -> LoadSpec:
    """The load of one engine figure: ``batch_size`` rows per request, ``concurrency`` in flight."""
    return LoadSpec(
        model=model,
        address=server.address(settings.protocol),
        levels=(concurrency,),
        batch_size=batch_size,
        shapes=shapes,
        duration_s=settings.duration_s,
        warmup_s=settings.warmup_s,
        max_duration_s=settings.max_duration_s or 1.5 * settings.duration_s,
        window_s=settings.window_s,
        seed=settings.seed,
        cpus=settings.cpus,
    )


def trace_spec(
    server: ServerHandle, settings: MeasureSettings, model: str, shapes: dict[str, tuple[int, ...]]
) -> LoadSpec | None:
    """The load of an engine's trace figure: ``--trace`` replayed at its times (None: no trace)."""
    trace = settings.trace
    if trace is None:
        return None
    return replace(
        engine_spec(server, settings, model, 1, 1, shapes),
        mode="rate",
        levels=(float(f"{trace.mean_rate:.3g}"),),
        duration_s=trace.duration_s,
        max_duration_s=trace.duration_s,
        window_s=None,
        shape=trace,
    )


class EngineMeasurement:
    """Measure one loaded engine; the figures land in ``result`` as they are measured."""

    def __init__(
        self,
        server: ServerHandle,
        result: EngineResult,
        settings: MeasureSettings,
        say: Say | None = None,
        progress: Callable[[Progress], None] | None = None,
        stop: threading.Event | None = None,
    ) -> None:
        self.server = server
        self.result = result
        self.settings = settings
        self.say = say or (lambda _msg: None)
        self.progress = progress
        self.stop = stop
        self.shapes: dict[str, tuple[int, ...]] = {}
        """The request shapes of the engine's figures (known once it is loaded)."""

    def run(self, load: Callable[[], None]) -> EngineResult:
        """Load the model with ``load`` and measure it; a failing engine gets status ``failed``.

        Raises:
            Interrupted: the stop event was set; the result keeps what was measured.
            ServerGone: the server stopped answering.
        """
        result, settings = self.result, self.settings
        endpoint = TritonEndpoint(self.server.http_url, "http", timeout_s=120)
        gpu = MetricsSampler(self.server.metrics_url, interval_s=0.5, server_pid=self.server.pid).start()
        rss = ProcessMemorySampler(self.server.pid, result.model) if self.server.pid else None
        try:
            time.sleep(0.6)  # one GPU sample before the load: the baseline the model adds to
            self.say(f"{result.label}: loading")
            if rss is not None:
                rss.start()
            result.first_infer_s, result.load_s, interface = cold_start(
                endpoint, result.model, load, settings
            )
            self.shapes = request_shapes(interface, settings)
            self._throughput(self.shapes, interface)
            result.status = "ok" if result.errors == 0 else "failed"
            if result.errors:
                result.reason = f"{result.errors} request(s) failed under load"
        except (Interrupted, ServerGone):
            raise
        except ModelLoadError as e:
            why = "; ".join(e.reasons.values()) or e.message
            result.status, result.reason = "failed", f"the server refused to load it: {why}"[:400]
        except TritongenError as e:
            result.status, result.reason = "failed", first_line(e, 400)
        finally:
            peak_rss = rss.stop() if rss is not None else None
            gpu.stop()
            endpoint.close()
            self._memory(gpu, peak_rss)
        return result

    def _spec(self, batch_size: int, concurrency: int, shapes: dict[str, tuple[int, ...]]) -> LoadSpec:
        return engine_spec(self.server, self.settings, self.result.model, batch_size, concurrency, shapes)

    def _load(self, spec: LoadSpec, what: str) -> RunResult:
        self.say(f"{self.result.label}: {what}")
        report: LoadTestReport = run_load_test(spec, progress=self.progress, stop=self.stop)
        if not report.runs:
            raise ServerError(f"{what}: no run was measured", "see the server log")
        run = report.runs[0]
        self.result.latency_runs.append(LatencyRun("ramp", run))
        self.result.errors += run.errors
        if run.status == "interrupted":
            raise Interrupted
        if run.status == "aborted":
            raise ServerGone(run.reason or "the server stopped answering")
        return run

    def _throughput(self, shapes: dict[str, tuple[int, ...]], interface: ModelInterface) -> None:
        batch = self.settings.batch_size_throughput
        batch = min(batch, interface.max_batch_size) if interface.batched else 1
        self.result.batch_size_throughput = batch
        best: RunResult | None = None
        for concurrency in self.settings.concurrency_levels:
            run = self._load(
                self._spec(batch, concurrency, shapes),
                f"throughput at batch {batch}, concurrency {concurrency}",
            )
            improved = best is None or run.infer_per_s >= best.infer_per_s * RAMP_GAIN
            if best is None or run.infer_per_s > best.infer_per_s:
                best = run
            if not improved:
                break
        if best is not None:
            self.result.infer_per_s_b32 = best.infer_per_s
            self.result.concurrency_b32 = best.concurrency
            self.result.p99_ms_b32 = best.latency_us["p99"] / 1000 if best.latency_us else None

    def _memory(self, gpu: MetricsSampler, peak_rss: int | None) -> None:
        """Both figures where there are; the GPU one counts when the engine used the GPU."""
        result = self.result
        with_memory = [s for s in gpu.gpu_samples() if "gpu_mem_bytes" in s.values]
        samples = [s.values["gpu_mem_bytes"] for s in with_memory]
        if len(samples) >= 2:
            result.peak_gpu_mem_bytes = int(max(0.0, max(samples) - samples[0]))
            result.gpu_memory_source = with_memory[-1].gpu_source
            result.gpu_memory_scope = with_memory[-1].memory_scope
        result.peak_rss_bytes = peak_rss
        if result.peak_gpu_mem_bytes:
            result.peak_mem_bytes, result.memory_kind = result.peak_gpu_mem_bytes, "gpu"
        elif peak_rss is not None:
            result.peak_mem_bytes, result.memory_kind = peak_rss, "cpu_rss"
