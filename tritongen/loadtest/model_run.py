"""One model's Locust run at its part of a level: started, checked at each poll, its windows read.

A level's run has one of these per model it loads (one for a plain load test, one per model
of a mix or of a background load). Each starts its Locust (in a process that stays up where
it may: :mod:`.load_processes`), is checked at every poll of the level (Locust exited, the
server or the model stopped answering, a worker lost, no request finished), finds where its
measurement may start (after the warm-up), and reads its windows as the workers report them.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from tritongen.io.loadgen_shared import SCHEDULE_START, WORKER_FAILURE, is_stable_figures, write_schedule
from tritongen.loadtest.distributed import lost_reason
from tritongen.loadtest.failures import Failing
from tritongen.loadtest.load_processes import ServiceRun, StartedRun, shares_process, start_locust
from tritongen.loadtest.locust_process import LocustArgs, LocustProcess
from tritongen.loadtest.prepared import LoadTest
from tritongen.loadtest.spec import LoadSpec, auto_processes
from tritongen.loadtest.windows import Window, WindowLog, count_windows, is_stable, window_latency
from tritongen.metrics.other_cpu import OtherCpuSampler

REPORT_GRACE_S = 0.3
"""A window counts as complete this long after it ends once every worker has reported it..."""
REPORT_GRACE_MAX_S = 2.0
"""...or this long after it ends in any case (a worker may have had nothing to report)."""
START_TIMEOUT_S = 60.0
HEALTH_FAILURES_TO_ABORT = 3


@dataclass(frozen=True)
class Launch:
    """How a level starts its Locust runs."""

    shared: bool = True
    """A run may go to a Locust process that stays up (several models at once each need their own)."""
    other_cpu: bool = True
    """Sample other processes' CPU during the run (the busy flag)."""
    run_time_s: float | None = None
    """Locust's own time cap (None: the longest the measurement can take, and slack)."""


@dataclass
class Watch:
    """What following one model's Locust has seen so far."""

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
    health_failures: int = 0
    model_failures: int = 0
    next_health: float = 0.0
    succeeded: bool = False
    """Whether a request of the run has succeeded (a run whose requests all fail stops early)."""
    next_hung_check: float = 0.0
    """When (monotonic) a run whose requests all timed out next asks whether the server is up."""
    measured: list[Window] = field(default_factory=list)
    """The measured windows so far (all of them once the run has ended)."""


def run_processes(spec: LoadSpec, level: float) -> int:
    """Locust processes of a level: as asked, else enough; never more than the users; a master's workers."""
    if spec.distributed is not None:  # workers elsewhere, each with its share of the users
        return spec.distributed.workers
    if spec.arrival == "gamma" or spec.shape is not None:  # one schedule: one process's (.arrivals, .shapes)
        return 1
    processes = spec.processes or auto_processes(spec.mode, level)
    return min(processes, int(level)) if spec.mode == "concurrency" else processes


def judge_stability(spec: LoadSpec, measured: list[Window], window_s: float) -> tuple[bool, int]:
    """Whether the measured windows are stable by the spec's rule, and how many windows it judged."""
    if not spec.count_window_requests:
        stable = is_stable(measured, window_s, spec.stability_tolerance, spec.stability_percentile)
        return stable, len(measured)
    groups, lengths = count_windows(measured, spec.count_window_requests, window_s)
    rates = [group.ok / length for group, length in zip(groups, lengths, strict=True)]
    latencies = [window_latency(group, spec.stability_percentile) for group in groups]
    return is_stable_figures(rates, latencies, spec.stability_tolerance), len(groups)


class ModelRun:
    """One model's Locust run at its part of a level (``level``: its users or its rate)."""

    def __init__(self, test: LoadTest, level: float, round_number: int = 1) -> None:
        self.test = test
        self.spec = test.spec
        self.level = level
        self.round = round_number
        self.window_s = self.spec.effective_window_s
        self.processes = run_processes(self.spec, level)
        self.results = test.workdir / f"windows-{level:g}-r{round_number}.jsonl"
        self.log_path = test.workdir / f"locust-{level:g}-r{round_number}.log"
        self.health = test.kind.health(self.spec)
        self.locust: StartedRun | None = None
        self.watch = Watch(WindowLog(self.results), t0=0.0, started=time.monotonic())
        self.other_cpu: OtherCpuSampler | None = None
        self.kept = False
        """Whether the run is in a Locust process that stays up (its windows all flushed as it ends)."""

    @property
    def model(self) -> str:
        """The model this run loads."""
        return self.spec.model

    def users(self) -> int:
        """Users of the Locust run: the concurrency, or one per process (rate)."""
        return int(self.level) if self.spec.mode == "concurrency" else self.processes

    def start(self, t0: float, launch: Launch) -> None:
        """Start Locust on the window grid of ``t0`` (a run in a process that stays up lays its own).

        Raises:
            ServerError: Locust could not be started, or did not take the run.
        """
        args, warmed_at = self._aligned_args() if launch.shared else (self.locust_args(t0), None)
        if launch.run_time_s is not None:
            args = replace(args, run_time_s=math.ceil(launch.run_time_s))
        self.locust = (
            start_locust(args, self.log_path) if launch.shared else LocustProcess(args, self.log_path)
        )
        self.kept = isinstance(self.locust, ServiceRun)
        self.other_cpu = self._other_cpu_sampler(self.locust) if launch.other_cpu else None
        log = WindowLog(self.results, keep_reports=self.spec.distributed is not None)
        self.watch = Watch(log, t0=args.t0, started=time.monotonic(), warmed_at=warmed_at)
        self.watch.next_health = self.watch.started + 1.0

    def _aligned_args(self) -> tuple[LocustArgs, int | None]:
        """The run's Locust options, and the window that begins as its warm-up ends where that is known.

        A run in a process that stays up starts its load as it is asked to: its windows are laid
        so that one begins as the warm-up ends, and the measurement starts there. A new process
        starts its load after its imports, at a time not known beforehand: its first active
        window is partial, and the warm-up follows it.
        """
        args = self.locust_args(time.time())
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
        server_pid = self.test.server_pid
        if server_pid is None and self.spec.address.on_this_machine:
            return None
        roots = [os.getpid(), locust.process.pid, *([server_pid] if server_pid else [])]
        sampler = OtherCpuSampler(lambda: roots)
        sampler.start()
        return sampler

    def locust_args(self, t0: float) -> LocustArgs:
        """The Locust run of this part, long enough for warm-up, the longest measurement and slack."""
        spec, requests = self.spec, self.test.requests
        users = self.users()
        # slack beyond a timed-out request, so that a model that never answers is named first
        slack_s = max(30.0, spec.request_timeout_s + 10)
        cap_s = spec.warmup_s + spec.effective_max_duration_s + 3 * self.window_s + slack_s
        return LocustArgs(
            host=spec.address.url,
            model=spec.model,
            model_version=spec.model_version,
            protocol=spec.protocol,
            users=users,
            processes=self.processes,
            run_time_s=math.ceil(cap_s),
            window_s=self.window_s,
            t0=t0,
            results=self.results,
            inputs=requests.path,
            user_rate=self.level / users if spec.mode == "rate" else 0.0,
            arrival=spec.arrival,
            arrival_cv=spec.arrival_cv,
            max_inflight=spec.max_inflight,
            seed=spec.seed,
            timeout_s=spec.request_timeout_s,
            kind=self.test.kind.name,
            kind_options=requests.options,
            master_args=tuple(spec.distributed.master_args()) if spec.distributed else (),
            web_port=spec.web_port,
            cpus=spec.cpus.load if spec.cpus else None,
            # the windows are read here; a distributed run's master reports as it is stopped
            report=spec.distributed is not None,
            trace_tag=self.test.id_tag,
            schedule=self._schedule_file(),
        )

    def _schedule_file(self) -> Path | None:
        """A shaped load's sends, drawn and written for this run (None: not a shaped load)."""
        shape = self.spec.shape
        if shape is None:
            return None
        path = self.test.workdir / f"schedule-{self.level:g}-r{self.round}.npz"
        schedule = shape.schedule(self.spec.warmup_s, self.spec.seed)
        write_schedule(path, schedule.warmup_s, schedule.times_s, schedule.steps)
        return path

    def check(self) -> str | None:
        """Read the new windows; why the run must stop (Locust, the server, a worker), else None."""
        watch = self.watch
        watch.log.poll()
        reason = self._exit_reason() or self._health_reason()
        reason = reason or lost_reason(watch.log.lost, self.processes, watch.t0)
        if reason is None and watch.measure_start is None:
            reason = self._find_start()
        return reason or self._failing_reason()

    def _failing_reason(self) -> str | None:
        """Why to stop a run none of whose requests succeeded: after its warm-up, or at its first timeout.

        A timeout is named as one only while the server is live and the model ready (else the
        health checks name the server or the model). The run then counts its failures from its
        first request on, warm-up included: what it ends on is what it reports.
        """
        watch = self.watch
        if watch.succeeded or watch.measure_start is None or not self.spec.end_when_all_fail:
            return None
        failing = Failing.of(watch.log.windows)
        if failing is None:
            watch.succeeded = any(w.ok for w in watch.log.windows.values())
            return None
        warmed = time.time() >= watch.t0 + watch.measure_start * self.window_s
        if failing.timed_out and failing.timed_out == failing.count:
            if time.monotonic() < watch.next_hung_check:
                return None
            watch.next_hung_check = time.monotonic() + 1.0
            if not (self.health.is_live() and self.health.is_model_ready(self.spec.model)):
                return None
            watch.measure_start = watch.log.first_active()
            return failing.hung_text(self.spec.model, self.spec.request_timeout_s)
        if not warmed:
            return None
        watch.measure_start = watch.log.first_active()
        return failing.text()

    def _exit_reason(self) -> str | None:
        """Why the run ends when Locust has exited or ended the test on its own; None while it runs."""
        locust, log = self.locust, self.watch.log
        if locust is None:
            return None
        if not locust.exited():
            if log.ended and isinstance(locust, ServiceRun):  # it stays up: its time cap ended the test
                return "Locust ended the test before the measurement was done"
            return None
        log.poll()
        if self.spec.distributed is not None and not log.windows:
            return self.spec.distributed.exit_reason(locust.log_tail())
        failed = [line for line in locust.log_tail() if line.startswith(WORKER_FAILURE)]
        if failed:  # the load generator said why (a user that could not start)
            return failed[-1][len(WORKER_FAILURE) :]
        return "Locust exited early: " + locust.last_line()

    def _health_reason(self) -> str | None:
        """Once a second: why the run ends when the server or the model has stopped answering."""
        watch = self.watch
        if time.monotonic() < watch.next_health:
            return None
        watch.next_health = time.monotonic() + 1.0
        live = self.health.is_live()
        watch.health_failures = 0 if live else watch.health_failures + 1
        if watch.health_failures >= HEALTH_FAILURES_TO_ABORT:
            return f"the server at {self.spec.address.url} stopped answering"
        # A live server that no longer has the model (unloaded, crashed backend):
        # every request would fail from here on, so the run stops instead.
        ready = not live or self.health.is_model_ready(self.spec.model)
        watch.model_failures = 0 if ready else watch.model_failures + 1
        if watch.model_failures >= HEALTH_FAILURES_TO_ABORT:
            return f"model '{self.spec.model}' is no longer ready on the server (unloaded or failed)"
        return None

    def _find_start(self) -> str | None:
        """Set the first measured window once a request has finished; why to give up when none does."""
        watch, distributed = self.watch, self.spec.distributed
        # Distributed: the measurement starts once every worker still expected is sending.
        workers = max(1, self.processes - len(watch.log.lost)) if distributed is not None else 0
        first = watch.log.first_active(workers)
        if first is None:
            # Workers report a window once it is over: long windows take longer to show up.
            limit = max(START_TIMEOUT_S, self.spec.request_timeout_s + 5) + 2 * self.window_s
            limit += distributed.wait_s if distributed else 0
            if time.monotonic() - watch.started > limit:
                return f"no request finished within {limit:.0f} s of starting Locust"
            return None
        if self.spec.shape is not None:  # a schedule's time 0 is marked where its process laid it
            watch.measure_start = watch.log.marked(SCHEDULE_START)
        elif watch.warmed_at is not None and first < watch.warmed_at:
            watch.measure_start = watch.warmed_at  # requests finished during the warm-up, as asked
        else:  # the first active window is partial; warm-up starts after it
            watch.measure_start = first + 1 + math.ceil(self.spec.warmup_s / self.window_s)
        return None

    def complete_end(self, start: int, now: float) -> int:
        """End (exclusive) of the run of complete windows from ``start``."""
        log, end = self.watch.log, start
        while True:
            over_for = now - (self.watch.t0 + (end + 1) * self.window_s)
            window = log.windows.get(end)
            # A lost worker reports no more: stop waiting for its windows.
            expected = max(1, self.processes - len(log.lost))
            reported = window is not None and len(window.workers) >= expected
            # A process that stays up flushes every window as its run ends, late pieces too
            # (they are read again then): a window every worker has sent is enough.
            grace = 0.0 if self.kept else REPORT_GRACE_S
            if over_for >= REPORT_GRACE_MAX_S or (over_for >= grace and reported):
                end += 1
            else:
                return end

    def measured_before(self, start: int, stopped_at: float) -> list[Window]:
        """The windows that were over before a stop, not those cut short by it (trailing empty ones)."""
        log = self.watch.log
        log.poll()
        complete_end = int((stopped_at - self.watch.t0) // self.window_s)
        measured = log.span(start, max(start, complete_end))
        while measured and not (measured[-1].ok or measured[-1].error_count or measured[-1].sent):
            measured.pop()
        return measured

    def stop(self, status: str, timeout_s: float | None = None) -> None:
        """Stop Locust (and clean up after it); a finished measurement does not wait for its shutdown.

        A master must still tell its remote workers to quit, so that they can join the next run.
        """
        if self.other_cpu is not None:
            self.other_cpu.stop()
        if self.locust is not None:
            wait = 10.0 if status != "ok" or self.spec.distributed else 0.0
            self.locust.stop(timeout_s=wait if timeout_s is None else timeout_s)
            if self.test.requests.release is not None:  # what Locust, killed, could not clean up
                self.test.requests.release()
        self.health.close()
