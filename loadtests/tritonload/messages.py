"""What a loading process sends while it runs: its windows to the master, its requests to Locust's stats.

A worker (or a lone local runner) sends the windows that are over a few times per window
(message ``MESSAGE``, a :class:`~.shared.WindowMessage`), and all of them, marked ``final``,
when its test stops; it counts the requests it reported (:class:`WorkerTotal`) and prints
the total when it quits, for tritongen to check the master's merge against.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

import gevent

from .locust_stats import STATS_FEED_S
from .recording import DRAIN_GRACE_S, Recorder, run_t0
from .shared import MESSAGE, WORKER_TOTAL, WindowMessage, WindowRecord


def worker_id(environment: Any) -> str:
    """This process's name in the windows it reports."""
    runner = environment.runner
    return str(getattr(runner, "client_id", None) or f"local-{os.getpid()}")


@dataclass
class WorkerTotal:
    """On a worker: the requests (ok and failed) it has reported to its master."""

    requests: int = 0

    def add(self, windows: list[WindowRecord]) -> None:
        """Count the requests of windows on their way to the master."""
        self.requests += sum(int(w["ok"]) + sum(w["errors"].values()) for w in windows)

    def say(self, environment: Any, **_: Any) -> None:
        """Print the total when the worker quits (its own count, to check the master's merge against)."""
        print(f"{WORKER_TOTAL}{worker_id(environment)} {self.requests}", flush=True)


def send_windows(environment: Any, recorder: Recorder, total: WorkerTotal, everything: bool) -> None:
    """Send the windows that are over (or all of them) to the master; ``total`` counts their requests."""
    message = WindowMessage(
        worker=worker_id(environment),
        windows=recorder.drain(everything),
        t0=run_t0(environment),
        users=int(environment.runner.user_count),
    )
    if recorder.first_send is not None:
        message["first_send"] = recorder.first_send
    if message["windows"]:
        total.add(message["windows"])
    if message["windows"] or everything:  # the last message even without windows: the master waits for it
        message["final"] = everything
        environment.runner.send_message(MESSAGE, message)


def report_forever(environment: Any, recorder: Recorder, total: WorkerTotal) -> None:
    """Send finished windows a few times per window, and each one as soon as it can be drained."""
    while True:
        gevent.sleep(next_report_s(recorder, time.time()))
        send_windows(environment, recorder, total, everything=False)


def next_report_s(recorder: Recorder, now: float) -> float:
    """Seconds to the next report: at most a quarter window (0.25 s).

    And no later than when the window now running can be drained (just after its end plus
    ``DRAIN_GRACE_S``), so that each window goes to the master as soon as it may.
    """
    window_s = recorder.window_s
    running = (now - DRAIN_GRACE_S - recorder.t0) // window_s
    drained = recorder.t0 + (running + 1) * window_s + DRAIN_GRACE_S
    return max(0.001, min(0.25, window_s / 4, drained - now + 0.002))


def feed_forever(environment: Any, recorder: Recorder) -> None:
    """Feed Locust's statistics every ``STATS_FEED_S``."""
    while True:
        gevent.sleep(STATS_FEED_S)
        recorder.feed_stats(environment.stats)
