"""Measurement windows reported by the Locust workers: merge, choose, judge stability."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hdrh.histogram import HdrHistogram

from tritongen.io.loadgen_shared import (
    DIGITS,
    HIGHEST_US,
    LOWEST_US,
    STABILITY_TOLERANCE,
    STABILITY_WINDOWS,
    SUMMARY_KEY,
    Mismatch,
    WindowLine,
    earliest_mismatches,
    histogram_moments,
    is_stable_figures,
    latency_figures,
)


def new_histogram() -> HdrHistogram:
    """An empty latency histogram in µs (1 µs to 120 s, 3 significant digits)."""
    return HdrHistogram(LOWEST_US, HIGHEST_US, DIGITS)


@dataclass
class Window:
    """One wall-clock window, merged across workers."""

    index: int
    ok: int = 0
    sent: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    histogram: HdrHistogram = field(default_factory=new_histogram)
    workers: set[str] = field(default_factory=set)
    late: int = 0
    """Open loop: sends the generator itself sent more than 1 ms after their scheduled time."""
    max_lag_us: float = 0.0
    held_back: int = 0
    """Open loop: sends scheduled in this window that waited for the in-flight cap (sent later)."""
    max_hold_us: float = 0.0
    """Open loop: the longest such wait, among held-back sends that left in this window."""
    extra: dict[str, HdrHistogram] = field(default_factory=dict)
    """Further latencies by name (streaming: ``first_response``, ``between_responses``; ...)."""
    counts: dict[str, int] = field(default_factory=dict)
    """Further counters by name (streaming: ``responses``; ...)."""
    mismatches: dict[str, Mismatch] = field(default_factory=dict)
    """Validation: the earliest mismatch of each output (their counts are ``mismatched/OUTPUT``)."""
    users: dict[str, int] = field(default_factory=dict)
    """Users each worker ran when it reported this window."""
    messages: dict[str, str] = field(default_factory=dict)
    """The first message of each error kind a worker first saw in this window (the server's text)."""
    reports: list[WindowLine] = field(default_factory=list)
    """The workers' own reports of this window (kept by a ``WindowLog`` with ``keep_reports`` only)."""

    def add(self, report: WindowLine) -> None:
        """Merge one worker's report for this window."""
        self.ok += int(report.get("ok", 0))
        self.sent += int(report.get("sent", 0))
        self.late += int(report.get("late", 0))
        self.max_lag_us = max(self.max_lag_us, float(report.get("max_lag_us", 0.0)))
        self.held_back += int(report.get("held_back", 0))
        self.max_hold_us = max(self.max_hold_us, float(report.get("max_hold_us", 0.0)))
        for kind, count in report.get("errors", {}).items():
            self.errors[kind] = self.errors.get(kind, 0) + int(count)
        if report.get("hist"):
            self.histogram.add(HdrHistogram.decode(base64.b64decode(report["hist"])))
        for name, encoded in report.get("extra", {}).items():
            self.extra_histogram(name).add(HdrHistogram.decode(base64.b64decode(encoded)))
        for name, count in report.get("counts", {}).items():
            self.counts[name] = self.counts.get(name, 0) + int(count)
        earliest_mismatches(self.mismatches, report.get("mismatches", {}))
        for kind, text in report.get("messages", {}).items():
            self.messages.setdefault(kind, str(text))
        worker = str(report.get("worker", ""))
        self.workers.add(worker)
        if "users" in report:
            self.users[worker] = int(report["users"])

    def extra_histogram(self, name: str) -> HdrHistogram:
        """The further latency histogram ``name`` (created empty)."""
        hist = self.extra.get(name)
        if hist is None:
            hist = self.extra[name] = new_histogram()
        return hist

    @property
    def error_count(self) -> int:
        """Failed requests in this window."""
        return sum(self.errors.values())

    def p99_us(self) -> float | None:
        """P99 of this window, or None when nothing succeeded."""
        return float(self.histogram.get_value_at_percentile(99.0)) if self.ok else None


@dataclass
class WindowLog:
    """Everything read so far from the workers' JSON-lines file."""

    path: Path
    windows: dict[int, Window] = field(default_factory=dict)
    lost: dict[str, float] = field(default_factory=dict)
    """Workers a Locust master lost (no heartbeat, or they quit) and not back, with the epoch it noticed."""
    back: dict[str, float] = field(default_factory=dict)
    """Workers that were lost (missed heartbeats) and came back, with the epoch the master noticed."""
    keep_reports: bool = False
    """Keep each worker's own reports in its windows (a distributed run's figures by worker)."""
    firsts: dict[str, int] = field(default_factory=dict)
    """Each worker's first window in which a request finished."""
    ended: bool = False
    """Whether the master's report of the run is in: its test has ended."""
    _offset: int = 0

    def poll(self) -> None:
        """Read lines appended since the last call (a partial last line waits for the next)."""
        try:
            with self.path.open("rb") as log:
                log.seek(self._offset)
                data = log.read()
        except FileNotFoundError:
            return
        end = data.rfind(b"\n") + 1
        self._offset += end
        for line in data[:end].splitlines():
            if not line.strip():
                continue
            entry = json.loads(line)
            if SUMMARY_KEY in entry:  # the master's report of the run, written as the test ends
                self.ended = True
                continue
            if "lost" in entry:  # a master's note that it lost ``worker`` (or that it is back): no window
                self._lost_line(entry)
                continue
            report: WindowLine = entry
            index = int(report["index"])
            window = self.windows.setdefault(index, Window(index))
            window.add(report)
            if self.keep_reports:
                window.reports.append(report)
            worker = str(report.get("worker", ""))
            if int(report.get("ok", 0)) or any(report.get("errors", {}).values()):
                self.firsts[worker] = min(index, self.firsts.get(worker, index))

    def _lost_line(self, entry: dict[str, Any]) -> None:
        worker, at = str(entry.get("worker", "")), float(entry.get("at", 0.0))
        if entry["lost"]:
            self.lost.setdefault(worker, at)
        elif worker in self.lost:
            del self.lost[worker]
            self.back[worker] = at

    def first_active(self, workers: int = 0) -> int | None:
        """Index of the first window in which any request finished.

        With ``workers``: the first window by which that many workers had each finished a request
        (None until they have), so that a measurement starts once every worker is sending.
        """
        if workers > 0:
            firsts = sorted(self.firsts.values())
            return firsts[workers - 1] if len(firsts) >= workers else None
        active = [i for i, w in self.windows.items() if w.ok or w.error_count]
        return min(active) if active else None

    def marked(self, counter: str) -> int | None:
        """The first window that counted ``counter`` (a schedule's start), None while none has."""
        marked = [i for i, w in self.windows.items() if w.counts.get(counter)]
        return min(marked) if marked else None

    def span(self, start: int, end: int) -> list[Window]:
        """Windows ``start <= index < end`` (empty windows included, so gaps count as zero)."""
        return [self.windows.get(i, Window(i)) for i in range(start, end)]


def merge(windows: list[Window]) -> Window:
    """One window holding the sum of ``windows``."""
    total = Window(index=windows[0].index if windows else 0)
    for window in windows:
        total.ok += window.ok
        total.sent += window.sent
        total.late += window.late
        total.max_lag_us = max(total.max_lag_us, window.max_lag_us)
        total.held_back += window.held_back
        total.max_hold_us = max(total.max_hold_us, window.max_hold_us)
        for kind, count in window.errors.items():
            total.errors[kind] = total.errors.get(kind, 0) + count
        total.histogram.add(window.histogram)
        for name, hist in window.extra.items():
            total.extra_histogram(name).add(hist)
        for name, count in window.counts.items():
            total.counts[name] = total.counts.get(name, 0) + count
        earliest_mismatches(total.mismatches, window.mismatches)
        for kind, text in window.messages.items():
            total.messages.setdefault(kind, text)
        total.workers |= window.workers
    return total


def is_stable(
    windows: list[Window],
    window_s: float,
    tolerance: float = STABILITY_TOLERANCE,
    percentile: float | None = 99.0,
) -> bool:
    """The last three windows agree within ``tolerance`` (10%) on throughput and on latency.

    perf_analyzer's rule; the latency is the windows' ``percentile`` (P99 by default), or
    their mean latency with ``percentile=None``.
    """
    last = windows[-STABILITY_WINDOWS:]  # the rule reads these alone: no percentile of the others
    latencies = [window_latency(w, percentile) for w in last]
    return is_stable_figures([w.ok / window_s for w in last], latencies, tolerance)


def window_latency(window: Window, percentile: float | None = 99.0) -> float | None:
    """A window's latency at ``percentile`` (its mean with None), None when nothing succeeded."""
    if not window.ok:
        return None
    if percentile is None:
        return histogram_moments(window.histogram)[0]
    return float(window.histogram.get_value_at_percentile(percentile))


def count_windows(windows: list[Window], requests: int, window_s: float) -> tuple[list[Window], list[float]]:
    """Consecutive windows merged until each holds ``requests`` finished requests, with their lengths in s.

    perf_analyzer's count windows, built from the time windows; a last one short of the count
    is left out.
    """
    grouped: list[Window] = []
    lengths: list[float] = []
    pending: list[Window] = []
    for window in windows:
        pending.append(window)
        merged = merge(pending)
        if merged.ok + merged.error_count >= requests:
            grouped.append(merged)
            lengths.append(len(pending) * window_s)
            pending = []
    return grouped, lengths


def latency_summary(histogram: HdrHistogram) -> dict[str, float]:
    """P50/P90/P95/P99/P99.9, mean and max in µs (as the locustfile's own report gives them)."""
    return latency_figures(histogram)


def extra_summaries(window: Window) -> dict[str, dict[str, float]]:
    """The summary of each further latency of ``window`` that holds a value, by name."""
    filled = sorted((name, hist) for name, hist in window.extra.items() if hist.get_total_count())
    return {name: latency_summary(hist) for name, hist in filled}
