"""The loops that drive a user's transport, whatever its kind.

Closed loop: send, wait for the response, send again (HTTP users share the process's
:class:`~.http_engine.HttpEngine`). Open loop (``--triton-user-rate``): send on a schedule of
its own, constant, Poisson or gamma, seeded by ``--triton-seed``, the worker and the user, or a
schedule replayed (``--triton-schedule``: each send's time and request step); at the in-flight
cap (``--triton-max-inflight``) sends are held back, oldest first. A kind whose requests go
through a transport (:mod:`.kinds`) hands it to :class:`TransportLoad`.
"""

from __future__ import annotations

import hashlib
import math
import os
import random
import socket
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import gevent
from locust.runners import WorkerRunner

from .arrivals import arrival_gaps, gap_counts
from .http_engine import HttpEngine
from .options import TritonOptions
from .recording import Recorder
from .shared import SCHEDULE_START, read_schedule
from .transports import HttpTransport, Transport, error_kind

if TYPE_CHECKING:
    from .state import ProcessState

TIMER_SLACK_S = 0.001


def worker_key(environment: Any) -> str:
    """What tells this worker's schedules from the others': its index, else host name and pid.

    A worker's index is its place among the master's workers (0, 1, … as they connected).
    Host name and process id alone would not do: in every worker pod Locust is process 1.
    """
    runner = environment.runner
    index = getattr(runner, "worker_index", -1)
    if isinstance(runner, WorkerRunner) and isinstance(index, int) and index >= 0:
        return f"worker-{index}"
    return f"{socket.gethostname()}-{os.getpid()}"


def schedule_seed(seed: int, worker: str, user: int) -> int:
    """The seed of one user's open-loop schedule: fixed by ``--triton-seed``, the worker and the user."""
    digest = hashlib.sha256(f"{seed}/{worker}/{user}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def wait_until(deadline: float, clock: Callable[[], float] = time.perf_counter) -> None:
    """Sleep until ``deadline`` (perf_counter time) with microsecond accuracy.

    gevent's timers wake up to ~1 ms late (epoll has millisecond timeouts), which would
    add up to a millisecond to every open-loop latency. So sleep until 1 ms before, then
    yield to the event loop (which keeps serving in-flight requests) until the deadline.
    """
    remaining = deadline - clock()
    if remaining > TIMER_SLACK_S:
        gevent.sleep(remaining - TIMER_SLACK_S)
    while clock() < deadline:
        gevent.sleep(0)


class OpenLoop:
    """One user's open-loop schedule: send on schedule; at the in-flight cap, hold sends back.

    A held-back send waits in a queue and goes out, oldest first, as soon as a request
    in flight finishes; its latency still counts from its scheduled time, so a server
    that pauses shows in the tail rather than as requests that were never sent.
    """

    def __init__(
        self, recorder: Recorder, transport: Transport, options: TritonOptions, rng_seed: int
    ) -> None:
        self.recorder = recorder
        self.transport = transport
        self.options = options
        self.rng = random.Random(rng_seed)
        self.idle: list[Any] = []
        self.held: deque[tuple[float, int]] = deque()  # sends held back (scheduled time, step), oldest first
        self.in_flight = 0
        self.clock = time.perf_counter

    def sends(self) -> Iterator[tuple[float, int]]:
        """The scheduled sends (perf_counter time, request step; -1: the next in turn), in time order."""
        gap = arrival_gaps(self.options, self.rng)
        next_at = self.clock()
        while True:
            next_at += gap()
            yield next_at, -1

    def run(self) -> None:
        """Send until Locust stops the user (or, after the last send of a finite schedule, wait for it)."""
        recorder, clock = self.recorder, self.clock
        last: float | None = None
        for next_at, step in self.sends():
            wait_until(next_at, clock)
            if self.in_flight >= self.options.max_inflight:
                self.held.append((next_at, step))
                recorder.hold(next_at)
                continue
            now = clock()
            recorder.sent(now, now - next_at)
            if last is not None:  # the gaps between sends on schedule: the CV achieved
                for name, amount in gap_counts(now - last):
                    recorder.count(name, now, amount)
            last = now
            self.in_flight += 1
            gevent.spawn(self._fire, next_at, step)
        while True:
            gevent.sleep(3600)

    def _fire(self, scheduled: float, step: int) -> None:
        """One slot in flight: send, then take over held-back sends while there are any."""
        try:
            while True:
                error = self._send(step)
                self.recorder.record(scheduled, self.clock(), error)
                if not self.held:
                    return
                scheduled, step = self.held.popleft()
                now = self.clock()
                self.recorder.sent(now, now - scheduled, held=True)
        finally:
            self.in_flight -= 1

    def _send(self, step: int) -> str | None:
        """Send once on an idle connection (or a new one); a failure is counted by kind, never raised."""
        try:
            connection = self.idle.pop() if self.idle else self.transport.new_connection()
            if step >= 0:  # set just before the send reads it, with no switch between
                self.transport.step = step
            error = self.transport.send(connection)
            self.idle.append(connection)
        except Exception as e:
            error = error_kind(e, self.options.timeout)
        return error


class ScheduledLoop(OpenLoop):
    """A replayed schedule (``--triton-schedule``): each send at its time, with its own request step.

    The schedule's time 0 is the start of the window ``warm-up`` after the next one begins (its
    warm-up sends go before it); that window is marked (``SCHEDULE_START``) for tritongen to start
    measuring there, so that stages and a trace's times line up with the measured span.
    """

    def sends(self) -> Iterator[tuple[float, int]]:
        """The schedule's sends, from its warm-up on (perf_counter time, request step)."""
        warmup_s, times, steps = read_schedule(self.options.schedule)
        recorder = self.recorder
        window_s, wall_offset = recorder.window_s, recorder.wall_offset
        index = int((self.clock() + wall_offset - recorder.t0) // window_s)
        warm_windows = math.ceil(warmup_s / window_s - 1e-9)
        origin = recorder.t0 + (index + 1 + warm_windows) * window_s - wall_offset
        recorder.count(SCHEDULE_START, origin + window_s / 2)
        for at, step in zip(times.tolist(), steps.tolist(), strict=True):
            yield origin + at, step


def closed_loop(transport: Transport, recorder: Recorder) -> None:
    """Send, wait for the response, send again, on a connection of this user's own."""
    connection = transport.new_connection()
    clock = time.perf_counter
    while True:
        start = clock()
        try:
            error = transport.send(connection)
        except Exception as e:  # every failure is counted by kind, never raised
            error = error_kind(e, getattr(transport, "timeout", None))
            gevent.sleep(0.01)  # do not spin on a dead server
            connection = transport.new_connection()
        recorder.record(start, clock(), error)


def engine_loop(engine: HttpEngine) -> None:
    """One more connection of this process's HTTP engine, for as long as this user runs."""
    engine.add()
    try:
        while True:
            gevent.sleep(3600)
    finally:
        engine.remove()


class TransportLoad:
    """One user's load through a transport: an open loop at its rate, else a closed loop.

    A closed-loop HTTP user is one more connection of the process's HTTP engine.
    """

    def __init__(self, transport: Transport, options: TritonOptions, process: ProcessState, environment: Any):
        self.transport = transport
        self.options = options
        self.process = process
        self.environment = environment

    def run(self) -> None:
        """Send until Locust stops the user."""
        process, options = self.process, self.options
        recorder = process.recorder
        assert recorder is not None
        if options.user_rate > 0:
            rng_seed = schedule_seed(options.seed, worker_key(self.environment), next(process.user_numbers))
            loop = ScheduledLoop if options.schedule else OpenLoop
            loop(recorder, self.transport, options, rng_seed).run()
        elif isinstance(self.transport, HttpTransport):
            if process.engine is None or process.engine.stopped:
                process.engine = HttpEngine(self.transport, recorder)
            engine_loop(process.engine)  # one more connection of this process's HTTP engine
        else:
            closed_loop(self.transport, recorder)
