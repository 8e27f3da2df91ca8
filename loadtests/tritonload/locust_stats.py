"""Locust's own statistics for every request the load generator records, fed in batches.

The web UI, the console table, ``--csv``/``--html`` and a master's merged reports see every
request: same request and failure counts, a row per model with the method ``POST`` (HTTP),
``grpc`` or ``grpc-stream``. Their times are whole milliseconds; the microsecond histograms of
:mod:`.recording` stay the reference. Response sizes there are the HTTP engine's response
bytes, 0 for the other transports.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import locust.stats
from locust.stats import RequestStats, StatsEntry, StatsError

from .options import TritonOptions

STATS_FEED_S = 0.5
"""How often counted requests move into Locust's statistics (the web UI's charts, its reports)."""
CSV_LAST_TURN_S = 1.1
"""A little more than Locust's CSV interval: its writer's last turn sees the final figures."""


@dataclass(slots=True)
class SecondTally:
    """The requests that finished in one wall-clock second, as Locust's statistics count them."""

    times_ms: dict[int, int] = field(default_factory=dict)
    """Response time in whole milliseconds → requests."""
    errors: dict[str, int] = field(default_factory=dict)
    content_length: int = 0
    last: float = 0.0
    """Wall-clock time of the last request to finish."""


class StatsFeed:
    """Locust's statistics (``environment.stats``) for every request the Recorder counts.

    Firing Locust's ``request`` event per request would cost too much at ~10k req/s and
    cannot be done from the HTTP engine's OS thread (Locust's statistics are not
    thread-safe). So the Recorder adds each request here under its lock, per wall-clock
    second, and a greenlet on the hub moves the batches into ``environment.stats`` exactly
    as ``StatsEntry.log``/``log_error`` and ``RequestStats.log_error`` would, request by
    request: the web UI, the console table, ``--csv``/``--html`` and a master's merged
    worker reports see every request. Response times there are whole milliseconds.
    """

    def __init__(self, method: str, name: str) -> None:
        self.method = method
        self.name = name
        self.seconds: dict[int, SecondTally] = {}

    def add(self, wall_end: float, elapsed_s: float, error: str | None, size: int) -> None:
        """Count one request that finished at ``wall_end`` (the caller holds the Recorder's lock)."""
        second = int(wall_end)
        tally = self.seconds.get(second)
        if tally is None:
            tally = self.seconds[second] = SecondTally()
        ms = int(elapsed_s * 1000 + 0.5)
        tally.times_ms[ms] = tally.times_ms.get(ms, 0) + 1
        if error is not None:
            tally.errors[error] = tally.errors.get(error, 0) + 1
        tally.content_length += size
        if wall_end > tally.last:
            tally.last = wall_end

    def add_batch(self, wall_end: float, times_ms: dict[int, int], size: int) -> None:
        """Count requests that finished in the second of ``wall_end``, the last of them at ``wall_end``.

        ``times_ms``: their response times in whole milliseconds → requests; ``size``: their
        bytes. The caller holds the Recorder's lock.
        """
        second = int(wall_end)
        tally = self.seconds.get(second)
        if tally is None:
            tally = self.seconds[second] = SecondTally()
        counted = tally.times_ms
        for ms, n in times_ms.items():
            counted[ms] = counted.get(ms, 0) + n
        tally.content_length += size
        if wall_end > tally.last:
            tally.last = wall_end

    def flush(self, stats: RequestStats, lock: Any) -> int:
        """Move what was counted so far into Locust's ``stats``; returns the requests moved."""
        with lock:
            seconds, self.seconds = self.seconds, {}
        entry = stats.get(self.name, self.method)
        moved = 0
        for second in sorted(seconds):
            tally = seconds[second]
            moved += log_second(stats.total, second, tally)
            log_second(entry, second, tally)
            log_errors(stats, self.method, self.name, tally.errors)
        return moved


def log_second(entry: StatsEntry, second: int, tally: SecondTally) -> int:
    """Add one second's requests to ``entry`` as ``StatsEntry.log`` and ``log_error`` would; returns them."""
    count = sum(tally.times_ms.values())
    last = entry.last_request_timestamp
    if entry.use_response_times_cache and last and second > int(last):
        entry._cache_response_times(second - 1)
    entry.num_requests += count
    entry.num_reqs_per_sec[second] = entry.num_reqs_per_sec.get(second, 0) + count
    entry.last_request_timestamp = max(last or 0.0, tally.last)
    entry.total_response_time += sum(ms * n for ms, n in tally.times_ms.items())
    fastest, slowest = min(tally.times_ms), max(tally.times_ms)
    low = entry.min_response_time
    entry.min_response_time = fastest if low is None else min(low, fastest)
    entry.max_response_time = max(entry.max_response_time, slowest)
    bucket = locust.stats.bucket_response_time  # looked up each time: Locust lets users replace it
    times = entry.response_times
    for ms, n in tally.times_ms.items():
        key = bucket(ms)
        times[key] = times.get(key, 0) + n
    entry.total_content_length += tally.content_length
    failures = sum(tally.errors.values())
    if failures:
        entry.num_failures += failures
        entry.num_fail_per_sec[second] = entry.num_fail_per_sec.get(second, 0) + failures
    return count


def log_errors(stats: RequestStats, method: str, name: str, errors: dict[str, int]) -> None:
    """Count errors by kind in ``stats.errors`` as ``RequestStats.log_error`` would, one by one."""
    now = time.time()
    for kind, occurrences in errors.items():
        key = StatsError.create_key(method, name, kind)
        error = stats.errors.get(key)
        if error is None:
            error = stats.errors[key] = StatsError(method, name, kind)
        error.occurrences += occurrences
        if error.first_seen is None:
            error.first_seen = now
        error.last_seen = now


def stats_method(options: TritonOptions) -> str:
    """The method of this run's requests in Locust's statistics (its name is the model)."""
    if options.streaming:
        return "grpc-stream"
    return "grpc" if options.protocol == "grpc" else "POST"
