"""Drive one load test: each level a run in Locust (:mod:`.load_processes`), windows read live."""

from __future__ import annotations

import math
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tritongen.client.endpoint import TritonEndpoint, normalise_url
from tritongen.client.input_data import InputPlan, Step, input_steps, json_stream_lengths
from tritongen.client.inputs import ModelInterface
from tritongen.client.openai_api import OpenAiHealth, api_key_from_env, split_base_url
from tritongen.client.validation_data import ExpectedOutputs, expected_outputs
from tritongen.errors import ConfigError, ServerError
from tritongen.io.arrays import write_steps
from tritongen.io.loadgen_shared import CLIENT_SPLIT, histogram_moments, is_stable_figures
from tritongen.loadtest.distributed import add_worker_figures, lost_reason
from tritongen.loadtest.llm.load import llm_figures, prepare_llm_requests
from tritongen.loadtest.llm.openai_server import prepare_openai_requests
from tritongen.loadtest.llm.tokenizer import tokenizer_file
from tritongen.loadtest.load_processes import (
    ServiceRun,
    StartedRun,
    load_processes,
    shares_process,
    start_locust,
)
from tritongen.loadtest.locust_process import LocustArgs
from tritongen.loadtest.result import LoadTestReport, RunResult
from tritongen.loadtest.sequences import (
    add_sequence_figures,
    check_id_range,
    check_sequence_model,
    id_range_text,
    is_sequence_model,
    sequence_length,
)
from tritongen.loadtest.shared_memory import prepare_shared_memory, release_regions
from tritongen.loadtest.spec import LoadSpec, auto_processes
from tritongen.loadtest.streaming import add_streaming_figures, check_streaming, is_decoupled
from tritongen.loadtest.validation import check_validation, validation_figures
from tritongen.loadtest.windows import (
    Window,
    WindowLog,
    count_windows,
    extra_summaries,
    is_stable,
    latency_summary,
    merge,
    window_latency,
)
from tritongen.metrics.composing import AllStats, ServerModels, all_snapshots, cached_lookup, server_models
from tritongen.metrics.other_cpu import OtherCpu, OtherCpuSampler
from tritongen.metrics.process_memory import is_loopback_url, local_server_pid
from tritongen.metrics.prometheus import MetricsSampler, parse_metrics
from tritongen.metrics.statistics import ServerBreakdown, breakdown
from tritongen.metrics.vllm import parse_triton_and_vllm_metrics, parse_vllm_metrics, vllm_figures
from tritongen.server.affinity import pinned_server

POLL_S = 0.05
REPORT_GRACE_S = 0.3
"""A window counts as complete this long after it ends once every worker has reported it..."""
REPORT_GRACE_MAX_S = 2.0
"""...or this long after it ends in any case (a worker may have had nothing to report)."""
START_TIMEOUT_S = 60.0
HEALTH_FAILURES_TO_ABORT = 3
LATE_FRACTION_WARNING = 0.01


@dataclass(frozen=True)
class Progress:
    """What the live progress line shows."""

    label: str
    phase: str
    measured_s: float
    target_s: float
    qps: float | None
    p99_us: float | None
    errors: int
    stable: bool


ProgressCallback = Callable[[Progress], None]


def metrics_url_for(url: str) -> str:
    """Default metrics endpoint: the server's host on port 8002."""
    host = normalise_url(url).rpartition(":")[0] or normalise_url(url)
    return f"http://{host}:8002/metrics"


def prepare_steps(spec: LoadSpec, interface: ModelInterface) -> list[Step]:
    """The requests, built once and sent round-robin: one of random or zero data, or a data file's steps.

    Raises:
        ConfigError: an unknown input, a batch size the model cannot take, or a bad ``--input-value``.
        SourceError: the data file is unreadable, or its data does not fit the model.
    """
    plan = InputPlan(source=spec.input_data, string_length=spec.string_length, values=spec.input_values)
    return input_steps(interface, plan, batch_size=spec.batch_size, shapes=spec.shapes, seed=spec.seed)


def measure_levels(spec: LoadSpec, report: LoadTestReport, run: Callable[[float, int], RunResult]) -> None:
    """Run every level in every round (levels interleaved: 1 2 3, 1 2 3, …) into ``report``.

    The first run that does not end ``ok`` ends the test with its status. With
    ``spec.stop_at``, the first round stops at the first level that misses the P99 limit or
    saturates (``report.sweep_stop`` says which rule), and later rounds measure the levels up
    to that one.
    """
    levels = list(spec.levels)
    for number in range(1, spec.rounds + 1):
        previous: RunResult | None = None
        for index, level in enumerate(levels):
            result = run(level, number)
            report.runs.append(result)
            if result.status != "ok":
                report.status = result.status
                return
            stop = spec.stop_at.check(previous, result, spec.level_text(level)) if spec.stop_at else None
            if number == 1 and stop is not None:
                report.sweep_stop = replace(stop, skipped=tuple(levels[index + 1 :]))
                levels = levels[: index + 1]
                break
            previous = result


@dataclass(frozen=True)
class PreparedRequests:
    """A model's requests, written for the load generator, and what the runs need to know of them."""

    interface: ModelInterface
    rows: int
    """Rows per request (1 for a model that does not batch)."""
    streaming: bool
    """Whether the model is decoupled (its requests go over gRPC streams)."""
    sequence_length: int = 0
    """Requests per sequence of a ``--sequences`` load (0 for other loads)."""
    expected: ExpectedOutputs | None = None
    """The data's expected outputs, which every response is checked against (None: not checked)."""


def prepare_requests(spec: LoadSpec, endpoint: TritonEndpoint, path: Path) -> PreparedRequests:
    """Check the model takes what ``spec`` asks, build its requests and write them to ``path``.

    Raises:
        ConfigError: a batch size above the model's, a load that does not fit its scheduler
            (sequences, streaming over HTTP), or bad input options.
        SourceError: the data file is unreadable, or its data does not fit the model.
    """
    interface = endpoint.interface(spec.model)
    if interface.batched and spec.batch_size > interface.max_batch_size:
        raise ConfigError(
            f"--batch-size {spec.batch_size} exceeds max_batch_size {interface.max_batch_size} "
            f"of '{spec.model}'",
            f"use at most {interface.max_batch_size}",
        )
    config = endpoint.model_config(spec.model)
    _check_sequences(spec, config)
    streaming = check_streaming(spec.model, spec.protocol, config)
    steps = prepare_steps(spec, interface)
    rows = next((int(a.shape[0]) for a in steps[0].values()), spec.batch_size) if interface.batched else 1
    streams = sequence_streams(spec) if spec.sequences else None
    expected = expected_outputs(spec.input_data, interface, spec.batch_size)
    if expected is not None:
        check_validation(spec.model, spec.shared_memory, streaming)
        steps = [{**step, **checks} for step, checks in zip(steps, expected.steps, strict=True)]
    write_steps(path, steps, streams, (spec.atol, spec.rtol) if expected is not None else None)
    length = sequence_length(spec.sequence_length, len(steps)) if spec.sequences else 0
    return PreparedRequests(
        interface=interface, rows=rows, streaming=streaming, sequence_length=length, expected=expected
    )


def prepare_llm(spec: LoadSpec, endpoint: TritonEndpoint, path: Path) -> PreparedRequests:
    """Check the model is a text model and write the LLM load's requests to ``path``.

    Raises:
        ConfigError: the model takes no ``text_input``, or the prompts cannot be made.
        SourceError: the prompts file cannot be read.
    """
    assert spec.llm is not None
    if spec.llm.openai:
        key = api_key_from_env(spec.llm.api_key_env)
        prepare_openai_requests(spec.llm, spec.model, spec.url, path, key, spec.seed)
        return PreparedRequests(interface=ModelInterface(spec.model, 0, (), ()), rows=1, streaming=False)
    interface = endpoint.interface(spec.model)
    names = {tensor.name for tensor in interface.inputs}
    if "text_input" not in names:
        raise ConfigError(
            f"'{spec.model}' takes no text_input (its inputs: {', '.join(sorted(names))}): "
            f"--api {spec.llm.api} loads a text model",
            "give a model with the text_input/text_output convention of Triton's LLM backends",
        )
    prepare_llm_requests(spec.llm, spec.model, path, spec.seed)
    return PreparedRequests(interface=interface, rows=1, streaming=False)


def run_load_test(
    spec: LoadSpec, progress: ProgressCallback | None = None, stop: threading.Event | None = None
) -> LoadTestReport:
    """Run every level of ``spec`` and return the report (partial when stopped early).

    A level stopped by the server going away ends the test with status ``aborted``; Ctrl-C
    (KeyboardInterrupt) ends it with status ``interrupted``. Either way the runs measured
    so far, and the partial one, are in the report.

    Raises:
        TritongenError: the settings are illegal, or the server or model cannot be reached
            before the first run starts.
    """
    spec.check()
    endpoint = TritonEndpoint(spec.url, spec.protocol, timeout_s=10)
    workdir = Path(tempfile.mkdtemp(prefix="tritongen-load-"))
    server_pid = local_server_pid(spec.url)
    sampler = _sampler(spec, server_pid)
    try:
        inputs_path = workdir / ("llm_requests.jsonl" if spec.llm else "inputs.npz")
        requests = (
            prepare_llm(spec, endpoint, inputs_path)
            if spec.llm
            else prepare_requests(spec, endpoint, inputs_path)
        )
        shm = prepare_shared_memory(
            endpoint, requests.interface, requests.rows, spec.shared_memory, spec.output_shared_memory_size
        )
        report = LoadTestReport(model=spec.model, protocol=spec.protocol, url=spec.url, rounds=spec.rounds)
        report.shared_memory = spec.shared_memory
        report.cpus = spec.cpus.to_json() if spec.cpus else None
        sampler.start()
        test = _LoadTest(
            spec,
            requests.rows,
            endpoint,
            sampler,
            inputs_path,
            workdir,
            progress,
            stop,
            streaming=requests.streaming,
            shm_prefix=shm,
            sequence_length=requests.sequence_length,
            expected=requests.expected,
            server_pid=server_pid,
        )
        with pinned_server(server_pid, spec.cpus), load_processes():
            measure_levels(spec, report, lambda level, number: _LevelRun(test, level, number).execute())
    finally:
        sampler.stop()
        endpoint.close()
        shutil.rmtree(workdir, ignore_errors=True)
    return report


def _sampler(spec: LoadSpec, server_pid: int | None) -> MetricsSampler:
    """The metrics endpoint's sampler: Triton's utilisation, or an OpenAI server's (vLLM's) ``/metrics``."""
    if spec.llm is not None and spec.llm.openai:
        host, port, prefix = split_base_url(spec.url)
        url = spec.metrics_url or f"http://{host}:{port}{prefix}/metrics"
        return MetricsSampler(
            url, server_pid=server_pid, interval_s=spec.metrics_interval_s, parse=parse_vllm_metrics
        )
    url = spec.metrics_url or metrics_url_for(spec.url)
    parse = parse_triton_and_vllm_metrics if spec.llm is not None else parse_metrics  # an LLM model's vllm:*
    return MetricsSampler(url, server_pid=server_pid, interval_s=spec.metrics_interval_s, parse=parse)


@dataclass(frozen=True)
class _LoadTest:
    """What every level of one load test shares."""

    spec: LoadSpec
    rows: int
    endpoint: TritonEndpoint
    sampler: MetricsSampler
    inputs: Path
    workdir: Path
    progress: ProgressCallback | None
    stop: threading.Event | None
    streaming: bool = False
    """A decoupled model, loaded over gRPC streams."""
    shm_prefix: str = ""
    """Name prefix of the shared-memory regions of the Locust runs (``--shared-memory system``)."""
    sequence_length: int = 0
    """Requests per sequence of a ``--sequences`` load, resolved from the data (0 for other loads)."""
    expected: ExpectedOutputs | None = None
    """The data's expected outputs (None: responses are not checked)."""
    server_pid: int | None = None
    """The server's process when it runs on this machine (its tree's CPU is the run's own)."""


@dataclass
class _Watch:
    """What following one level's Locust has seen so far."""

    log: WindowLog
    t0: float
    """Epoch of window 0."""
    started: float
    """When Locust was started (monotonic clock)."""
    measure_start: int | None = None
    """First measured window, once the first active window and the warm-up are known."""
    warmed_at: int | None = None
    """A run whose load started as it was asked to (a process that stays up): the window that
    begins as its warm-up ends (None: the first active window and the warm-up after it decide)."""
    measured: list[Window] = field(default_factory=list)
    health_failures: int = 0
    model_failures: int = 0
    next_health: float = 0.0


class _LevelRun:
    """One level: launch Locust, follow its windows, decide when the measurement is done."""

    def __init__(self, test: _LoadTest, level: float, round_number: int = 1) -> None:
        spec = test.spec
        self.spec = spec
        self.level = level
        self.rows = test.rows
        self.endpoint = test.endpoint
        self.sampler = test.sampler
        self.window_s = spec.effective_window_s
        self.processes = spec.processes or auto_processes(spec.mode, level)
        if spec.mode == "concurrency":
            self.processes = min(self.processes, int(level))
        self.distributed = spec.distributed
        if self.distributed is not None:  # workers elsewhere, each with its share of the users
            self.processes = self.distributed.workers
        self.label = spec.level_text(level)
        self.round = round_number
        if spec.rounds > 1:
            self.label += f" (round {round_number}/{spec.rounds})"
        self.results = test.workdir / f"windows-{level:g}-r{round_number}.jsonl"
        self.log_path = test.workdir / f"locust-{level:g}-r{round_number}.log"
        self.inputs = test.inputs
        self.progress = test.progress
        self.stop_event = test.stop
        self.shm_prefix = test.shm_prefix
        self.streaming = test.streaming
        self.sequence_length = test.sequence_length
        self.expected = test.expected
        self.server_pid = test.server_pid
        self.other_cpu: OtherCpuSampler | None = None
        self.kept = False
        """Whether the run is in a Locust process that stays up (its windows all flushed as it ends)."""
        self.openai = spec.llm is not None and spec.llm.openai
        self.health: TritonEndpoint | OpenAiHealth = (
            OpenAiHealth(spec.url, api_key_from_env(spec.llm.api_key_env) if spec.llm else None)
            if self.openai
            else TritonEndpoint(spec.url, spec.protocol, timeout_s=2)
        )
        self.snapshots: dict[int, tuple[float, AllStats]] = {}
        """Every model's counters at the first poll of each window (one statistics call)."""
        self.configs = cached_lookup(self.endpoint.model_config)

    def execute(self) -> RunResult:
        """Run Locust until the measurement is done, the run fails or the user stops it."""
        args, warmed_at = self._aligned_args()
        locust = start_locust(args, self.log_path)
        self.kept = isinstance(locust, ServiceRun)
        self.other_cpu = self._other_cpu_sampler(locust)
        log = WindowLog(self.results, keep_reports=self.distributed is not None)
        watch = _Watch(log=log, t0=args.t0, started=time.monotonic(), warmed_at=warmed_at)
        watch.next_health = watch.started + 1.0
        status, reason = "ok", None
        try:
            status, reason = self._follow(locust, watch)
        except KeyboardInterrupt:
            status, reason = "interrupted", "interrupted by the user"
        finally:
            stopped_at = time.time()
            # A finished measurement has all it needs: no point waiting for Locust's own shutdown
            # (but a master must tell its remote workers to quit, so they can join the next run).
            if self.other_cpu is not None:
                self.other_cpu.stop()
            locust.stop(timeout_s=10.0 if status != "ok" or self.distributed else 0.0)
            if self.shm_prefix:  # what Locust, killed, could not unregister and remove itself
                release_regions(self.endpoint, self.shm_prefix)
            self.health.close()
        if watch.measure_start is not None and status != "ok":
            watch.measured = self._measured_before(watch, watch.measure_start, stopped_at)
        elif watch.measure_start is not None and self.kept:  # the stop flushed every window: all of them
            watch.log.poll()
            watch.measured = watch.log.span(watch.measure_start, watch.measure_start + len(watch.measured))
        result = self._result(watch.measured, watch.measure_start, watch.t0, status, reason)
        if self.expected is not None:  # every response of the run, warm-up included
            result.validation = validation_figures(merge(list(watch.log.windows.values())), self.expected)
        if self.distributed is not None:
            add_worker_figures(result, watch.measured, watch.log, self._locust_users(), watch.t0)
        return result

    def _aligned_args(self) -> tuple[LocustArgs, int | None]:
        """The run's Locust options, and the window that begins as its warm-up ends where that is known.

        A run in a process that stays up starts its load as it is asked to: its windows are laid
        so that one begins as the warm-up ends, and the measurement starts there. A new process
        starts its load after its imports, at a time not known beforehand: its first active
        window is partial, and the warm-up follows it.
        """
        args = self._locust_args(time.time())
        if not shares_process(args):
            return args, None
        warm_windows = math.ceil(self.spec.warmup_s / self.window_s)
        t0 = time.time() + self.spec.warmup_s - warm_windows * self.window_s
        return replace(args, t0=t0), warm_windows

    def _other_cpu_sampler(self, locust: StartedRun) -> OtherCpuSampler | None:
        """Other processes' CPU, sampled while the run goes on.

        None where the server's tree is unknown: a server on this machine whose process cannot
        be found would count as another process.
        """
        if self.server_pid is None and is_loopback_url(self.spec.url):
            return None
        roots = [os.getpid(), locust.process.pid, *([self.server_pid] if self.server_pid else [])]
        sampler = OtherCpuSampler(lambda: roots)
        sampler.start()
        return sampler

    def _locust_args(self, t0: float) -> LocustArgs:
        """The Locust run of this level, long enough for warm-up, the longest measurement and slack."""
        spec = self.spec
        users = self._locust_users()
        cap_s = spec.warmup_s + spec.effective_max_duration_s + 3 * self.window_s + 30
        return LocustArgs(
            host=spec.url,
            model=spec.model,
            protocol=spec.protocol,
            users=users,
            processes=self.processes,
            run_time_s=math.ceil(cap_s),
            window_s=self.window_s,
            t0=t0,
            results=self.results,
            inputs=self.inputs,
            user_rate=self.level / users if spec.mode == "rate" else 0.0,
            arrival=spec.arrival,
            max_inflight=spec.max_inflight,
            seed=spec.seed,
            shared_memory=spec.shared_memory,
            shm_prefix=self.shm_prefix,
            output_shm_size=spec.output_shared_memory_size,
            timeout_s=spec.request_timeout_s,
            streaming=self.streaming,
            sequences=spec.sequences,
            sequence_length=self.sequence_length,
            sequence_ids=id_range_text(spec.sequence_id_range),
            master_args=tuple(self.distributed.master_args()) if self.distributed else (),
            web_port=spec.web_port,
            cpus=spec.cpus.load if spec.cpus else None,
            llm=self._llm_options(),
            # the windows are read here; a distributed run's master reports as it is stopped
            report=self.distributed is not None,
        )

    def _llm_options(self) -> tuple[str, ...]:
        """The ``--triton-llm-*`` options of an LLM load (none for other loads)."""
        llm = self.spec.llm
        if llm is None:
            return ()
        options = ["--triton-llm-api", llm.api, "--triton-llm-requests", str(self.inputs)]
        options += ["--triton-llm-stream", "1" if llm.stream else "0"]
        options += ["--triton-llm-key-env", llm.api_key_env] if llm.api_key_env else []
        if llm.tokenizer is not None:
            options += ["--triton-llm-tokenizer", str(tokenizer_file(llm.tokenizer).resolve())]
        slo = llm.slo_option()
        return tuple(options + (["--triton-llm-slo", slo] if slo else []))

    def _locust_users(self) -> int:
        """Users of the level's Locust run: the concurrency, or one per process (rate)."""
        return int(self.level) if self.spec.mode == "concurrency" else self.processes

    def _follow(self, locust: StartedRun, watch: _Watch) -> tuple[str, str | None]:
        """Poll until the measurement is done (``ok``) or the run must stop (``aborted`` and why).

        Raises:
            KeyboardInterrupt: the stop event was set.
        """
        while True:
            if self.stop_event is not None and self.stop_event.is_set():
                raise KeyboardInterrupt
            time.sleep(POLL_S)
            watch.log.poll()
            now = time.time()
            reason = self._exit_reason(locust, watch) or self._health_reason(watch)
            reason = reason or lost_reason(watch.log.lost, self.processes, watch.t0)
            if reason is None and watch.measure_start is None:
                # The server's counters at each window from the start: a slow report of the first
                # windows must not leave the measured span without its first snapshot.
                self._snapshot(int((now - watch.t0) // self.window_s), watch.t0)
                reason = self._find_start(watch)
            if reason is not None:
                return "aborted", reason
            if watch.measure_start is not None and self._measure(watch, watch.measure_start, now):
                return "ok", None

    def _exit_reason(self, locust: StartedRun, watch: _Watch) -> str | None:
        """Why the run ends when Locust has exited or ended the test on its own; None while it runs."""
        if not locust.exited():
            if watch.log.ended and isinstance(locust, ServiceRun):  # it stays up: its time cap ended the test
                return "Locust ended the test before the measurement was done"
            return None
        watch.log.poll()
        if self.distributed is not None and not watch.log.windows:
            return self.distributed.exit_reason(locust.log_tail())
        return "Locust exited early: " + locust.last_line()

    def _health_reason(self, watch: _Watch) -> str | None:
        """Once a second: why the run ends when the server or the model has stopped answering."""
        if time.monotonic() < watch.next_health:
            return None
        watch.next_health = time.monotonic() + 1.0
        live = self.health.is_live()
        watch.health_failures = 0 if live else watch.health_failures + 1
        if watch.health_failures >= HEALTH_FAILURES_TO_ABORT:
            return f"the server at {self.spec.url} stopped answering"
        # A live server that no longer has the model (unloaded, crashed backend):
        # every request would fail from here on, so the run stops instead.
        ready = not live or self.health.is_model_ready(self.spec.model)
        watch.model_failures = 0 if ready else watch.model_failures + 1
        if watch.model_failures >= HEALTH_FAILURES_TO_ABORT:
            return f"model '{self.spec.model}' is no longer ready on the server (unloaded or failed)"
        return None

    def _find_start(self, watch: _Watch) -> str | None:
        """Set the first measured window once a request has finished; why to give up when none does."""
        # Distributed: the measurement starts once every worker still expected is sending.
        workers = max(1, self.processes - len(watch.log.lost)) if self.distributed is not None else 0
        first = watch.log.first_active(workers)
        if first is None:
            # Workers report a window once it is over: long windows take longer to show up.
            limit = START_TIMEOUT_S + 2 * self.window_s + (self.distributed.wait_s if self.distributed else 0)
            if time.monotonic() - watch.started > limit:
                return f"no request finished within {limit:.0f} s of starting Locust"
            return None
        if watch.warmed_at is not None and first < watch.warmed_at:
            watch.measure_start = watch.warmed_at  # requests finished during the warm-up, as asked
        else:  # the first active window is partial; warm-up starts after it
            watch.measure_start = first + 1 + math.ceil(self.spec.warmup_s / self.window_s)
        return None

    def _measure(self, watch: _Watch, start: int, now: float) -> bool:
        """Take the complete windows from ``start``, show progress; whether the measurement is done."""
        spec = self.spec
        self._snapshot(int((now - watch.t0) // self.window_s), watch.t0)
        complete_end = self._complete_end(watch.log, start, now, watch.t0)
        watch.measured = watch.log.span(start, complete_end)
        elapsed = len(watch.measured) * self.window_s
        stable, judged = self._stability(watch.measured)
        self._report(watch.measured, elapsed, stable, phase="warm-up" if not watch.measured else "measuring")
        if spec.count_window_requests:  # count windows: as many as it takes, up to the max trials
            return stable or judged >= spec.max_count_windows or elapsed >= spec.effective_max_duration_s
        return elapsed >= spec.duration_s and (stable or elapsed >= spec.effective_max_duration_s)

    def _stability(self, measured: list[Window]) -> tuple[bool, int]:
        """Whether the measured windows are stable by the spec's rule, and how many windows it judged."""
        spec = self.spec
        if not spec.count_window_requests:
            stable = is_stable(measured, self.window_s, spec.stability_tolerance, spec.stability_percentile)
            return stable, len(measured)
        groups, lengths = count_windows(measured, spec.count_window_requests, self.window_s)
        rates = [group.ok / length for group, length in zip(groups, lengths, strict=True)]
        latencies = [window_latency(group, spec.stability_percentile) for group in groups]
        return is_stable_figures(rates, latencies, spec.stability_tolerance), len(groups)

    def _measured_before(self, watch: _Watch, start: int, stopped_at: float) -> list[Window]:
        """The windows that were over before a stop, not those cut short by it (trailing empty ones)."""
        watch.log.poll()
        complete_end = int((stopped_at - watch.t0) // self.window_s)
        measured = watch.log.span(start, max(start, complete_end))
        while measured and not (measured[-1].ok or measured[-1].error_count or measured[-1].sent):
            measured.pop()
        return measured

    def _complete_end(self, log: WindowLog, start: int, now: float, t0: float) -> int:
        """End (exclusive) of the run of complete windows from ``start``."""
        end = start
        while True:
            over_for = now - (t0 + (end + 1) * self.window_s)
            window = log.windows.get(end)
            # A lost worker reports no more: stop waiting for its windows.
            expected = max(1, self.processes - len(log.lost))
            reported = window is not None and len(window.workers) >= expected
            # A process that stays up flushes every window as its run ends, late pieces too
            # (``execute`` reads them again then): a window every worker has sent is enough.
            grace = 0.0 if self.kept else REPORT_GRACE_S
            if over_for >= REPORT_GRACE_MAX_S or (over_for >= grace and reported):
                end += 1
            else:
                return end

    def _snapshot(self, window_index: int, t0: float) -> None:
        """Statistics at the first poll of each window: the boundaries of the measured span."""
        if window_index in self.snapshots or self.openai:  # Triton's statistics: not on other servers
            return
        try:
            stats = all_snapshots(self.endpoint.all_statistics())
        except ServerError:
            return
        self.snapshots[window_index] = (time.time(), stats)

    def _report(self, measured: list[Window], elapsed: float, stable: bool, phase: str) -> None:
        if self.progress is None:
            return
        last = measured[-1] if measured else None
        self.progress(
            Progress(
                label=self.label,
                phase=phase,
                measured_s=elapsed,
                target_s=self.spec.duration_s,
                qps=last.ok / self.window_s if last else None,
                p99_us=last.p99_us() if last else None,
                errors=sum(w.error_count for w in measured),
                stable=stable,
            )
        )

    def _edges(
        self, start: int, end: int
    ) -> tuple[tuple[float, AllStats] | None, tuple[float, AllStats] | None]:
        """The server's counters at the measured span's start and end.

        Each window's are taken at its first poll; where a slow poll (a busy machine) missed a
        window's, the nearest outside the span stands in (the span then reaches a little wider).
        """
        before = self.snapshots.get(start)
        if before is None:
            earlier = [i for i in self.snapshots if i < start]
            before = self.snapshots[max(earlier)] if earlier else None
        after = self.snapshots.get(end)
        if after is None:
            later = [i for i in self.snapshots if i > end]
            after = self.snapshots[min(later)] if later else None
        return before, after

    def _server(self, start: int, end: int) -> ServerBreakdown | None:
        before, after = self._edges(start, end)
        model = self.spec.model
        if before is None or after is None or model not in before[1] or model not in after[1]:
            return None
        return breakdown(before[1][model], after[1][model])

    def _server_models(self, start: int, end: int) -> ServerModels:
        """Each model the measured span touched, as a tree under the model under load."""
        before, after = self._edges(start, end)
        if before is None or after is None:
            return {}
        return server_models(before[1], after[1], self.spec.model, self.configs)

    def _result(
        self,
        measured: list[Window],
        measure_start: int | None,
        t0: float,
        status: str,
        reason: str | None,
    ) -> RunResult:
        spec = self.spec
        elapsed = len(measured) * self.window_s
        total = merge(measured) if measured else Window(0)
        start_index = measure_start if measure_start is not None else 0
        end_index = start_index + len(measured)
        server = self._server(start_index, end_index) if measured else None
        window_start = t0 + start_index * self.window_s
        window_end = t0 + end_index * self.window_s
        qps = total.ok / elapsed if elapsed else 0.0
        result = RunResult(
            mode=spec.mode,
            concurrency=int(self.level) if spec.mode == "concurrency" else None,
            target_rate=self.level if spec.mode == "rate" else None,
            batch_size=self.rows,
            duration_s=elapsed,
            requests=total.ok + total.error_count,
            errors=total.error_count,
            errors_by_kind=dict(sorted(total.errors.items())),
            qps=qps,
            infer_per_s=qps * self.rows,
            latency_us=latency_summary(total.histogram) if total.ok else None,
            latencies_us=extra_summaries(total),
            counts=dict(sorted(total.counts.items())),
            server_us=server.server_us() if server else None,
            avg_batch=server.avg_batch if server else None,
            server_models=self._server_models(start_index, end_index) if measured else {},
            stable=self._stability(measured)[0],
            client_us=client_split(total),
            latency_stddev_us=histogram_moments(total.histogram)[1] if total.ok else None,
            stability_latency_us=window_latency(total, spec.stability_percentile),
            gpu=_as_dict(self.sampler.summary("gpu", window_start, window_end)),
            cpu=_as_dict(self.sampler.summary("cpu", window_start, window_end)),
            status=status,
            reason=reason,
            processes=self.processes,
            round=self.round,
            windows=[
                {"index": w.index, "qps": w.ok / self.window_s, "p99_us": w.p99_us(), "errors": w.error_count}
                for w in measured
            ],
        )
        self._add_figures(result, total, (window_start, window_end))
        return result

    def _add_figures(self, result: RunResult, total: Window, span: tuple[float, float]) -> None:
        """What a run's kind adds to its result (schedule, sequences, streams), the busy flag, stability."""
        spec = self.spec
        if spec.mode == "rate":
            _add_schedule_figures(result, total, self.level)
        if self.other_cpu is not None:
            _add_other_cpu(result, self.other_cpu.summary(*span), spec.other_cpu_limit)
        add_sequence_figures(result, spec.sequences)
        if self.streaming:
            add_streaming_figures(result)
        if spec.llm is not None:
            add_llm_figures(result, self._locust_users())
        if spec.llm is not None:  # vLLM's server, or a Triton model publishing vLLM's figures
            result.llm_server = vllm_figures(self.sampler.samples, *span)
        if result.status == "ok" and not result.stable:
            result.warnings.append(
                f"not stable: the last {3} windows differ by more than 10% in throughput or P99 "
                f"after {result.duration_s:.0f} s (raise --max-duration or reduce noise)"
            )


def add_llm_figures(result: RunResult, users: int) -> None:
    """An LLM run's token figures (``ttft_us`` … ``goodput_per_s``), its end-to-end time ``latency_us``."""
    ok = result.requests - result.errors
    figures = llm_figures(result.latencies_us, result.counts, result.duration_s, users, ok)
    for name, value in figures.items():
        setattr(result, name, value)
    result.e2e_us = result.latency_us


def client_split(total: Window) -> dict[str, float] | None:
    """The mean send, wait and receive µs of the successful requests, where the transport timed them."""
    sums = [total.counts.get(name) for name in CLIENT_SPLIT]
    if not total.ok or any(value is None for value in sums):
        return None
    return {
        key: float(value or 0) / total.ok for key, value in zip(("send", "wait", "recv"), sums, strict=True)
    }


def _as_dict(summary: Any) -> dict[str, Any] | None:
    return summary.as_dict() if summary is not None else None


def _add_other_cpu(result: RunResult, other: OtherCpu | None, limit: float) -> None:
    """Other processes' CPU during the measured time, and the flag and warning when it was above ``limit``."""
    if other is None:
        return
    result.other_cpu, result.other_cpu_max = round(other.mean, 3), round(other.max, 3)
    result.busy = other.mean > limit or other.max > limit
    if result.busy:
        result.warnings.append(
            f"other processes used {other.mean:.2f} cores on average (up to {other.max:.2f} in one second) "
            f"during this run, above {limit:g}: the machine was busy and the figures may be disturbed"
        )


def _add_schedule_figures(result: RunResult, total: Window, target: float) -> None:
    """An open-loop run's schedule: the rate achieved, late and held-back sends, and their warnings."""
    result.achieved_rate = total.sent / result.duration_s if result.duration_s else 0.0
    result.late_sends = total.late
    result.max_send_lag_us = total.max_lag_us
    result.held_back_sends = total.held_back
    result.max_hold_us = total.max_hold_us
    result.warnings += _schedule_warnings(result, target)


def _schedule_warnings(result: RunResult, target: float) -> list[str]:
    warnings = []
    achieved = result.achieved_rate or 0.0
    if achieved < 0.95 * target:
        warnings.append(
            f"the generator sent {achieved:.0f}/s of the {target:g}/s asked: it could not keep the schedule "
            "(use more --processes); latency still counts from the scheduled times"
        )
    sent = max(1, result.requests)
    if result.late_sends > LATE_FRACTION_WARNING * sent:
        warnings.append(
            f"{result.late_sends} requests left more than 1 ms late "
            f"(max {result.max_send_lag_us / 1000:.1f} ms): "
            "the generator is near its limit"
        )
    if result.held_back_sends:
        warnings.append(
            f"{result.held_back_sends} sends were held back: the requests in flight had reached the "
            f"in-flight cap, so they went out when one finished, up to {result.max_hold_us / 1000:.0f} ms "
            "late (the server stalled or is slower than the rate asked); their latency counts from "
            "the scheduled times"
        )
    return warnings


def sequence_streams(spec: LoadSpec) -> list[int] | None:
    """The streams of a sequence load's data file, each one sequence (``None``: the data is one series).

    Raises:
        ConfigError: a length or a batch size given with streams (each stream is a sequence of
            one-request steps).
    """
    streams = json_stream_lengths(spec.input_data)
    if streams is None:
        return None
    if spec.sequence_length is not None:
        raise ConfigError(
            f"--sequence-length {spec.sequence_length} and the streams of {spec.input_data} exclude "
            "each other: each stream is one sequence, as long as its entries",
            "drop --sequence-length, or give a flat list of entries",
        )
    if spec.batch_size != 1:
        raise ConfigError(
            f"--batch-size {spec.batch_size} with the streams of {spec.input_data}: each step of a "
            "stream is one request of its sequence",
            "use --batch-size 1",
        )
    return streams


def _check_sequences(spec: LoadSpec, config: dict[str, Any]) -> None:
    """A sequence model gets ``--sequences`` and the others do not; the ID range fits every level.

    ``config`` is the model's config as the server reports it.

    Raises:
        ConfigError: the load does not fit the model's scheduler (a decoupled sequence model is
            not supported yet), or the range is too small.
    """
    if is_sequence_model(config) and is_decoupled(config):
        raise ConfigError(
            f"'{spec.model}' is both a sequence model and decoupled (streaming): loading such a model "
            "is not supported yet (sequences are sent as plain calls, not over gRPC streams)",
            "load a model that is one or the other",
        )
    check_sequence_model(spec.model, config, spec.sequences)
    for level in spec.levels if spec.sequences else ():
        processes = min(spec.processes or auto_processes(spec.mode, level), int(level))
        check_id_range(spec.sequence_id_range, int(level), processes)
