"""A headless run's ``--run-time``, counted from the load's first request instead of from the spawn.

Locust starts its run-time clock when it starts spawning users; each user then reads the
model's metadata and builds its requests before its first send, which on a loaded machine
took most of a short run (a 1 s run measured 0.1 s and no finished request). On a headless
master or lone runner this clock takes the option over (Locust's own timer is never set):
the run ends ``--run-time`` after the earliest first send any process reported
(``first_send`` of :class:`~.shared.WindowMessage`), or ``FIRST_REQUEST_WAIT_S`` later if no
request was ever sent. A worker or the web UI keeps Locust's own clock.
"""

from __future__ import annotations

import time
from typing import Any, Protocol

import gevent
from locust.runners import WorkerRunner

FIRST_REQUEST_WAIT_S = 60.0
"""How long after the spawn a run with no request sent still ends (users that never send)."""
POLL_S = 0.05


class FirstSend(Protocol):
    """What the clock reads: the epoch of the run's first send, once a process has reported it."""

    first_send: float | None


class RunClock:
    """The run time of a headless run, from its first request."""

    def __init__(self) -> None:
        self.run_time_s: float | None = None
        self.watcher: Any = None

    def take_over(self, environment: Any) -> None:
        """On init: take a headless master's or lone runner's ``--run-time`` from Locust."""
        options = environment.parsed_options
        if (
            options is None
            or not getattr(options, "headless", False)
            or not getattr(options, "run_time", None)
        ):
            return
        if getattr(options, "worker", False) or isinstance(environment.runner, WorkerRunner):
            return
        self.run_time_s = float(options.run_time)
        options.run_time = None  # Locust's own timer (from the spawn) is never started

    def start(self, environment: Any, source: FirstSend) -> None:
        """On test start: end the run ``run_time_s`` after its first send (if this clock has taken over)."""
        if self.run_time_s is None or self.watcher is not None:
            return
        self.watcher = gevent.spawn(self._watch, environment, source, time.time(), self.run_time_s)

    @staticmethod
    def _watch(environment: Any, source: FirstSend, spawned: float, run_time_s: float) -> None:
        while True:
            gevent.sleep(POLL_S)
            first = source.first_send
            deadline = spawned + run_time_s + FIRST_REQUEST_WAIT_S if first is None else first + run_time_s
            if time.time() >= deadline:
                environment.runner.quit()  # what Locust's own timer does in a headless run
                return
