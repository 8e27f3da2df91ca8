"""CPU that other processes used during a run: the machine's busy time less that of our process trees.

A measurement shares the machine with whatever else runs there (a package install, another
test run). Every half second the sampler reads the machine's busy CPU time and the CPU time
of the process trees that are the measurement's own (tritongen, the server with its backend
stubs, the Locust processes); what is left over is other processes' use, in cores. A run
whose other use is above the limit, on average or in any one second, is flagged.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import psutil

SAMPLE_S = 0.5
DEFAULT_LIMIT_CORES = 0.25
"""A run is flagged when other processes used more than a quarter of one core."""


@dataclass(frozen=True)
class OtherCpu:
    """Other processes' CPU over a span: ``mean`` and ``max`` (over one-second steps), in cores."""

    mean: float
    max: float
    samples: int


def busy_seconds() -> float:
    """The machine's busy CPU time so far, all cores (everything but idle and I/O wait)."""
    times = psutil.cpu_times()
    idle = times.idle + getattr(times, "iowait", 0.0)
    return float(sum(times)) - idle


def tree_seconds(roots: list[int]) -> dict[int, float]:
    """The CPU time (user and system) of each live process in the trees under ``roots``, by pid."""
    found: dict[int, float] = {}
    for root in roots:
        try:
            top = psutil.Process(root)
            members = [top, *top.children(recursive=True)]
        except psutil.Error:
            continue
        for process in members:
            try:
                times = process.cpu_times()
            except psutil.Error:
                continue
            found[process.pid] = times.user + times.system
    return found


@dataclass
class OtherCpuSampler:
    """A background thread sampling other processes' CPU use while a run goes on."""

    roots: Callable[[], list[int]]
    """The pids whose process trees are the run's own (read at every sample)."""
    interval_s: float = SAMPLE_S
    samples: list[tuple[float, float]] = field(default_factory=list)
    """(epoch at the end of the step, other processes' cores over the step)."""
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        """Start sampling (a daemon thread)."""
        self._thread = threading.Thread(target=self._run, name="tritongen-other-cpu", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop sampling and wait for the thread."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)

    def _run(self) -> None:
        last_at, last_busy, last_ours = time.monotonic(), busy_seconds(), tree_seconds(self.roots())
        while not self._stop.wait(self.interval_s):
            now, busy, ours = time.monotonic(), busy_seconds(), tree_seconds(self.roots())
            ours_delta = sum(seconds - last_ours.get(pid, 0.0) for pid, seconds in ours.items())
            elapsed = max(now - last_at, 1e-6)
            self.samples.append((time.time(), max(0.0, (busy - last_busy - ours_delta) / elapsed)))
            last_at, last_busy, last_ours = now, busy, ours

    def summary(self, start: float, end: float) -> OtherCpu | None:
        """Other processes' use between the epochs ``start`` and ``end`` (None without a sample)."""
        values = [cores for at, cores in self.samples if start < at <= end + self.interval_s / 2]
        if not values:
            return None
        per_second = [sum(pair) / len(pair) for pair in itertools.pairwise(values)] or values
        return OtherCpu(mean=sum(values) / len(values), max=max(per_second), samples=len(values))
