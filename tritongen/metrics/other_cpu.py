"""CPU that other processes used during a run: every process outside our process trees, summed.

A measurement shares the machine with whatever else runs there (a package install, another
test run). Every half second the sampler reads the CPU time of each process on the machine
that is not in the measurement's own trees (tritongen, the server with its backend stubs, the
Locust processes), and adds up what each used since the last sample (a process that started
since then counts from its start), in cores. A run whose other use is above the limit, on
average or in any one second, is flagged.

Counted process by process, not as the machine's busy time less our own: that difference
also held the kernel's time for our own loopback traffic (softirq, charged to no process) and
the clock-tick rounding of every one of our processes' times, together often more than a
quarter of a core on a quiet machine. What this misses: a process that starts and ends
between two samples.
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


def tree_pids(roots: list[int]) -> set[int]:
    """The live processes of the trees under ``roots``."""
    found: set[int] = set()
    for root in roots:
        try:
            top = psutil.Process(root)
            found.update(p.pid for p in [top, *top.children(recursive=True)])
        except (psutil.Error, ValueError):  # gone, or no process id at all
            continue
    return found


def process_seconds() -> dict[int, tuple[float, float]]:
    """Every process's CPU time (user and system) and start (epoch), by pid."""
    found: dict[int, tuple[float, float]] = {}
    for process in psutil.process_iter(["cpu_times", "create_time"]):
        times, created = process.info.get("cpu_times"), process.info.get("create_time")
        if times is not None and created is not None:
            found[process.pid] = (times.user + times.system, float(created))
    return found


def others_used(
    before: dict[int, tuple[float, float]], now: dict[int, tuple[float, float]], ours: set[int], since: float
) -> float:
    """CPU seconds the processes outside ``ours`` used between two readings (``since``: the first's epoch).

    A process first seen now counts in full if it started after ``since``, else from now on.
    """
    used = 0.0
    for pid, (seconds, created) in now.items():
        if pid in ours:
            continue
        last = before.get(pid)
        if last is not None and last[1] == created:
            used += max(0.0, seconds - last[0])
        elif created >= since:
            used += seconds
    return used


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
        last_at, last_epoch, last = time.monotonic(), time.time(), process_seconds()
        while not self._stop.wait(self.interval_s):
            now, epoch, reading = time.monotonic(), time.time(), process_seconds()
            ours = tree_pids(self.roots())  # after the reading: a child just started is ours
            used = others_used(last, reading, ours, last_epoch)
            self.samples.append((epoch, used / max(now - last_at, 1e-6)))
            last_at, last_epoch, last = now, epoch, reading

    def summary(self, start: float, end: float) -> OtherCpu | None:
        """Other processes' use between the epochs ``start`` and ``end`` (None without a sample)."""
        values = [cores for at, cores in self.samples if start < at <= end + self.interval_s / 2]
        if not values:
            return None
        per_second = [sum(pair) / len(pair) for pair in itertools.pairwise(values)] or values
        return OtherCpu(mean=sum(values) / len(values), max=max(per_second), samples=len(values))
