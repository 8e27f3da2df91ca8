"""Recording and windows: each process's latencies per wall-clock window, merged on the master.

Every request's latency goes into an HDR histogram (µs) of the process that sent it, one
per measurement window; windows are aligned to the wall clock (``--triton-t0``,
``--triton-window``), so windows of different workers and machines line up. A worker
sends the windows that are over to the master (:mod:`.messages`), whose :class:`Collector`
appends them to ``--triton-results`` and merges them; a lone local runner is both.
In open-loop mode latency counts from each request's *scheduled* send time; sends held
back at the in-flight cap are counted (``held_back``) with their longest wait (``max_hold_us``).
"""

from __future__ import annotations

import base64
import json
import time
from dataclasses import dataclass, field
from typing import Any

import gevent
import gevent.monkey
from hdrh.histogram import HdrHistogram
from locust.runners import MasterRunner
from locust.stats import RequestStats

from .batches import RequestBatch, add_values, kernel_latencies_us, latencies_us, milliseconds, split_us
from .locust_stats import StatsFeed
from .shared import (
    CLIENT_SPLIT,
    DIGITS,
    HIGHEST_US,
    KERNEL_LATENCY,
    LOWEST_US,
    MATCHED_COUNT,
    MISMATCHED_PREFIX,
    PERCENTILES,
    SEND_LAG,
    VALIDATION_ERROR,
    Mismatch,
    WindowLine,
    WindowMessage,
    WindowRecord,
    earliest_mismatches,
)

LATE_S = 0.001
"""A send leaving more than this after its scheduled time counts as late."""
DRAIN_GRACE_S = 0.03
"""A window is drained this long after it ends: the HTTP engine flushes its batch at the window's end, so
its last piece is in by then (a piece later still is sent with the next report and merged by index)."""


def real_lock() -> Any:
    """A lock of the OS, not gevent's (Locust monkey-patches threading)."""
    return gevent.monkey.get_original("_thread", "allocate_lock")()


def new_histogram() -> HdrHistogram:
    """An empty latency histogram in µs."""
    return HdrHistogram(LOWEST_US, HIGHEST_US, DIGITS)


@dataclass
class OpenWindow:
    """What this process has counted so far in one window."""

    index: int
    hist: HdrHistogram = field(default_factory=new_histogram)
    errors: dict[str, int] = field(default_factory=dict)
    sent: int = 0
    late: int = 0
    max_lag_us: float = 0.0
    held_back: int = 0
    max_hold_us: float = 0.0
    extra: dict[str, HdrHistogram] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    mismatches: dict[str, Mismatch] = field(default_factory=dict)
    messages: dict[str, str] = field(default_factory=dict)  # each error kind's first, where it first failed

    def extra_histogram(self, name: str) -> HdrHistogram:
        """The histogram of the further latency ``name``, new where there was none."""
        hist = self.extra.get(name)
        if hist is None:
            hist = self.extra[name] = new_histogram()
        return hist

    def record(self, final: bool) -> WindowRecord:
        """The window as sent to the master."""
        ok = self.hist.get_total_count()
        return WindowRecord(
            index=self.index,
            ok=ok,
            errors=self.errors,
            sent=self.sent,
            hist=base64.b64encode(self.hist.encode()).decode() if ok else "",
            late=self.late,
            max_lag_us=self.max_lag_us,
            held_back=self.held_back,
            max_hold_us=self.max_hold_us,
            final=final,
            extra={
                name: base64.b64encode(hist.encode()).decode()
                for name, hist in self.extra.items()
                if hist.get_total_count()
            },
            counts=dict(self.counts),
            mismatches=dict(self.mismatches),
            messages=dict(self.messages),
        )


class Recorder:
    """Latencies of this process, one HDR histogram per wall-clock-aligned window."""

    def __init__(self, t0: float, window_s: float, feed: StatsFeed | None = None) -> None:
        self.t0 = t0
        self.window_s = window_s
        # perf_counter for durations, mapped to the wall clock once.
        self.wall_offset = time.time() - time.perf_counter()
        self.windows: dict[int, OpenWindow] = {}
        self.feed = feed
        """Where every recorded request also goes, for Locust's own statistics."""
        self.first_send: float | None = None  # epoch of this process's first request of the test
        self.told: set[str] = set()  # error kinds whose first message is in a window already
        self.deferred: dict[int, dict[str, int]] = {}  # counts for a greenlet's next record (defer_count)
        # The HTTP engine records from an OS thread; the reporter drains from the hub.
        self.lock = real_lock()

    def _window(self, perf_time: float) -> OpenWindow:
        index = int((perf_time + self.wall_offset - self.t0) // self.window_s)
        window = self.windows.get(index)
        if window is None:
            window = self.windows[index] = OpenWindow(index)
        return window

    def record(self, start: float, end: float, error: str | None, size: int = 0) -> None:
        """Count one finished request; ``start`` is its scheduled (open loop) or actual send time.

        ``size`` is the response's byte count where the transport knows it (else 0); only
        Locust's statistics use it. The first failure of each kind also keeps its message (a
        :class:`~.transports.Failure` carries one; another kind says only its name).
        """
        with self.lock:
            if self.first_send is None:
                self.first_send = start + self.wall_offset
            window = self._window(end)
            deferred = self.deferred.pop(id(gevent.getcurrent()), None) if self.deferred else None
            if error is None:
                window.hist.record_value(min(max(int((end - start) * 1e6), LOWEST_US), HIGHEST_US))
                for name, amount in (deferred or {}).items():
                    window.counts[name] = window.counts.get(name, 0) + amount
            else:
                kind = str(error)
                window.errors[kind] = window.errors.get(kind, 0) + 1
                if kind not in self.told:
                    self.told.add(kind)
                    window.messages[kind] = getattr(error, "message", "") or kind
            if self.feed is not None:
                self.feed.add(
                    end + self.wall_offset, end - start, None if error is None else str(error), size
                )

    def boundary_after(self, perf_time: float) -> float:
        """When (perf_counter) the window or the wall-clock second of ``perf_time`` ends, the earlier."""
        wall = perf_time + self.wall_offset
        window_end = self.t0 + ((wall - self.t0) // self.window_s + 1) * self.window_s
        return min(window_end, wall // 1 + 1) - self.wall_offset

    def record_batch(self, batch: RequestBatch) -> None:
        """Count a batch of successful requests (one window, one second) as ``record`` would, each."""
        if not batch.marks:
            return
        rows = batch.take()
        end = float(rows[:, 3].max())
        values, split = latencies_us(rows), split_us(rows)
        times_ms = milliseconds(rows) if self.feed is not None else {}
        with self.lock:
            if self.first_send is None:
                self.first_send = float(rows[:, 0].min()) + self.wall_offset
            window = self._window(end)
            add_values(window.hist, values)
            if len(kernel := kernel_latencies_us(rows)):
                add_values(window.extra_histogram(KERNEL_LATENCY), kernel)
            for name, amount in zip(CLIENT_SPLIT, split, strict=True):
                window.counts[name] = window.counts.get(name, 0) + amount
            if self.feed is not None:
                self.feed.add_batch(end + self.wall_offset, times_ms, int(rows[:, 4].sum()))

    def record_extra(self, name: str, end: float, value_s: float) -> None:
        """Count one value of a further latency (e.g. time to first response), in the window of ``end``."""
        with self.lock:
            value = min(max(int(value_s * 1e6), LOWEST_US), HIGHEST_US)
            self._window(end).extra_histogram(name).record_value(value)

    def defer_count(self, name: str, amount: int) -> None:
        """Add to a counter in the window where this greenlet's next ``record`` counts its request.

        A stream's responses per request must land in the same window as the request itself,
        which is counted a moment later (by the user that sent it), possibly in the next window.
        """
        with self.lock:
            pending = self.deferred.setdefault(id(gevent.getcurrent()), {})
            pending[name] = pending.get(name, 0) + amount

    def defer_split(self, send_s: float, wait_s: float, recv_s: float) -> None:
        """Add a request's send, wait and receive times (µs) to the counters its ``record`` counts in."""
        with self.lock:
            pending = self.deferred.setdefault(id(gevent.getcurrent()), {})
            for name, seconds in zip(CLIENT_SPLIT, (send_s, wait_s, recv_s), strict=True):
                pending[name] = pending.get(name, 0) + int(seconds * 1e6)

    def count(self, name: str, when: float, amount: int = 1) -> None:
        """Add to a further counter (e.g. responses received) in the window of ``when``."""
        with self.lock:
            window = self._window(when)
            window.counts[name] = window.counts.get(name, 0) + amount

    def mismatch(self, output: str, detail: Mismatch, when: float | None = None) -> None:
        """Count a response whose ``output`` differed from the expected one; a window keeps its first.

        ``when`` (perf_counter) puts it in the window its request is recorded in (default: now).
        """
        with self.lock:
            window = self._window(time.perf_counter() if when is None else when)
            name = MISMATCHED_PREFIX + output
            window.counts[name] = window.counts.get(name, 0) + 1
            window.mismatches.setdefault(output, detail)

    def sent(self, when: float, lag_s: float, held: bool = False) -> None:
        """Count one send ``lag_s`` late (``held`` at the in-flight cap: its wait goes to ``max_hold_us``)."""
        with self.lock:
            window = self._window(when)
            window.sent += 1
            if held:
                window.max_hold_us = max(window.max_hold_us, lag_s * 1e6)
                return
            if lag_s > LATE_S:
                window.late += 1
            window.extra_histogram(SEND_LAG).record_value(min(HIGHEST_US, max(LOWEST_US, lag_s * 1e6)))
            window.max_lag_us = max(window.max_lag_us, lag_s * 1e6)

    def hold(self, scheduled: float) -> None:
        """Count one send held back at its scheduled time (the in-flight cap was reached)."""
        with self.lock:
            self._window(scheduled).held_back += 1

    def feed_stats(self, stats: RequestStats) -> None:
        """Move what was counted so far into Locust's ``stats`` (nothing without a feed)."""
        if self.feed is not None:
            self.feed.flush(stats, self.lock)

    def drain(self, everything: bool) -> list[WindowRecord]:
        """Windows that are over (or all of them), encoded for the master.

        A window counts as over :data:`DRAIN_GRACE_S` after its end, once the HTTP engine has
        recorded its last batch of it.
        """
        now_index = int((time.time() - DRAIN_GRACE_S - self.t0) // self.window_s)
        with self.lock:
            ready = sorted(i for i in self.windows if everything or i < now_index)
            popped = [self.windows.pop(index) for index in ready]
        return [window.record(everything) for window in popped]


@dataclass
class WorkerPart:
    """On the master: one worker's part of the run."""

    ok: int = 0
    errors: int = 0
    hist: HdrHistogram = field(default_factory=new_histogram)


@dataclass
class MergedWindow:
    """On the master: one wall-clock window merged across workers, until its figures are kept."""

    index: int
    ok: int = 0
    errors: int = 0
    hist: HdrHistogram = field(default_factory=new_histogram)


WINDOWS_OPEN = 3
"""A window is merged until one this many indexes newer arrives; then only its figures are kept."""


class Collector:
    """On the master (or a lone local runner): write windows and keep the merged figures."""

    def __init__(self, path: str, window_s: float = 1.0) -> None:
        self.path = path
        self.window_s = window_s
        self.reset()
        if path:
            open(path, "w").close()  # truncate once

    def start_run(self, path: str, window_s: float) -> None:
        """A new test, its windows written to ``path`` (emptied when it changes) in windows of ``window_s``.

        A Locust that stays up across runs gets each run's own file and window with the run.
        """
        if path != self.path and path:
            open(path, "w").close()
        self.path, self.window_s = path, window_s
        self.reset()

    def reset(self) -> None:
        """Forget the figures of an earlier test (a master whose web UI starts another one)."""
        self.total = new_histogram()
        self.errors: dict[str, int] = {}
        self.held_back = 0
        self.sent = self.late = 0
        self.max_lag_us = self.max_hold_us = 0.0
        self.extra: dict[str, HdrHistogram] = {}
        self.counts: dict[str, int] = {}
        self.mismatches: dict[str, Mismatch] = {}
        self.messages: dict[str, str] = {}  # each error kind's first message, as the workers sent it
        self.workers: dict[str, int] = {}  # requests (ok and failed) by worker
        self.parts: dict[str, WorkerPart] = {}
        self.finals: set[str] = set()  # workers whose last windows (sent as their test stopped) came
        self.lost: dict[str, float] = {}  # workers the master lost (and not back): when it noticed
        self.open_windows: dict[int, MergedWindow] = {}
        self.kept: dict[int, dict[str, float | None]] = {}
        """Each window's figures once merged: ``index``, ``qps``, ``p99_us``, ``errors``."""
        self.partial: set[int] = set()  # windows cut short by the test's stop
        self.started = time.monotonic()
        self.started_at = time.time()
        self.first_send: float | None = None  # epoch of the run's first request, the earliest reported
        self.stopped: float | None = None
        self.last_final: float | None = None
        self.interrupted = False  # the process was told to quit while the test ran
        self.printed = False

    def receive(self, environment: Any, msg: Any, **_: Any) -> None:
        """Handle one worker message: append its windows, merge its histograms."""
        message: WindowMessage = msg.data
        if not from_this_run(environment, msg):
            return
        if self.path:
            with open(self.path, "a") as out:
                for window in message["windows"]:
                    line: WindowLine = {"worker": message["worker"], "users": message["users"], **window}
                    out.write(json.dumps(line) + "\n")
        for window in message["windows"]:
            self.add(message["worker"], window)
        if message.get("final"):
            self.finals.add(message["worker"])
        first = message.get("first_send")
        if first is not None and (self.first_send is None or first < self.first_send):
            self.first_send = float(first)
        self.keep_windows(everything=False)

    def add(self, worker: str, window: WindowRecord) -> None:
        """Merge one window of one worker."""
        hist = HdrHistogram.decode(base64.b64decode(window["hist"])) if window["hist"] else None
        failed = sum(window["errors"].values())
        for kind, count in window["errors"].items():
            self.errors[kind] = self.errors.get(kind, 0) + count
        self.held_back += int(window.get("held_back", 0))
        self.sent += int(window.get("sent", 0))
        self.late += int(window.get("late", 0))
        self.max_lag_us = max(self.max_lag_us, float(window.get("max_lag_us", 0.0)))
        self.max_hold_us = max(self.max_hold_us, float(window.get("max_hold_us", 0.0)))
        for name, encoded in window.get("extra", {}).items():
            self.extra.setdefault(name, new_histogram()).add(HdrHistogram.decode(base64.b64decode(encoded)))
        for name, count in window.get("counts", {}).items():
            self.counts[name] = self.counts.get(name, 0) + int(count)
        earliest_mismatches(self.mismatches, window.get("mismatches", {}))
        for kind, text in window.get("messages", {}).items():
            self.messages.setdefault(kind, text)
        ok = int(window["ok"])
        self.workers[worker] = self.workers.get(worker, 0) + ok + failed
        part = self.parts.setdefault(worker, WorkerPart())
        part.ok, part.errors = part.ok + ok, part.errors + failed
        index = int(window["index"])
        if window.get("final"):
            self.finals.add(worker)
            self.partial.add(index)
            self.last_final = time.monotonic()
        kept = self.kept.get(index)
        if kept is not None:  # a late window: its counts still count
            kept["qps"] = float(kept["qps"] or 0.0) + ok / self.window_s
            kept["errors"] = int(kept["errors"] or 0) + failed
        merged = self.open_windows.setdefault(index, MergedWindow(index)) if kept is None else None
        if merged is not None:
            merged.ok, merged.errors = merged.ok + ok, merged.errors + failed
        for target in (self.total, part.hist, merged.hist if merged is not None else None):
            if hist is not None and target is not None:
                target.add(hist)

    def note_lost(self, worker: str, lost: bool) -> None:
        """The master lost ``worker`` (``lost``), or it is back."""
        if lost:
            self.lost.setdefault(worker, time.time())
        else:
            self.lost.pop(worker, None)

    def keep_windows(self, everything: bool) -> None:
        """Turn merged windows that no worker will add to any more (or all of them) into figures."""
        newest = max(self.open_windows, default=0)
        for index in sorted(self.open_windows):
            if everything or index <= newest - WINDOWS_OPEN:
                window = self.open_windows.pop(index)
                p99 = window.hist.get_value_at_percentile(99.0) if window.ok else None
                self.kept[index] = {
                    "index": index,
                    "qps": window.ok / self.window_s,
                    "p99_us": None if p99 is None else float(p99),
                    "errors": window.errors,
                }

    def began(self) -> float:
        """When the run's load began (monotonic): its first request, else the test's start."""
        if self.first_send is None:
            return self.started
        return max(self.started, self.started + (self.first_send - self.started_at))

    def end(self) -> float:
        """When the run ended: the test's stop, or the last worker's last windows if they came later."""
        return max(self.stopped or 0.0, self.last_final or 0.0) or time.monotonic()

    def summary(self) -> str:
        """Requests, their rate over the run, microsecond percentiles, errors and each worker's part."""
        h = self.total
        failed = sum(self.errors.values())
        requests = h.get_total_count() + failed
        if not requests:
            return "tritongen: no requests"
        elapsed = self.end() - self.began()
        counts = f"{requests} requests in {elapsed:.1f} s ({requests / max(elapsed, 1e-9):.1f} req/s), "
        counts += f"errors {failed}" + (f" {self.errors}" if failed else "")
        if self.held_back:
            counts += f", {self.held_back} sends held back at the in-flight cap"
        pcts = ", ".join(f"p{p:g} {h.get_value_at_percentile(p)} µs" for p in PERCENTILES.values())
        latency = f"{pcts}; max {h.get_max_value()} µs" if h.get_total_count() else "no successful request"
        workers = ", ".join(f"{worker} {n}" for worker, n in sorted(self.workers.items()))
        return f"tritongen: {counts}; {latency}; per worker: {workers}{self.validation_summary()}"

    def validation(self) -> dict[str, Any] | None:
        """The run's check of the responses as the package's ``RunResult.validation`` holds it (None: none).

        The master knows no data file: an entry is named by its number (``entry 3``), and only
        outputs that had a mismatch are listed.
        """
        mismatched = self.errors.get(VALIDATION_ERROR, 0)
        matched = self.counts.get(MATCHED_COUNT, 0)
        if not matched and not mismatched:
            return None
        outputs: dict[str, Any] = {}
        for name, first in sorted(self.mismatches.items()):
            outputs[name] = {
                "mismatched": self.counts.get(MISMATCHED_PREFIX + name, 0),
                "first": {
                    "entry": f"entry {first['entry']}",
                    "element": first["element"],
                    "expected": first["expected"],
                    "received": first["received"],
                },
            }
        return {
            "validated": matched + mismatched,
            "matched": matched,
            "mismatched": mismatched,
            "outputs": outputs,
        }

    def validation_summary(self) -> str:
        """``; validated N responses: all match`` (or how many did not), empty without validation."""
        mismatched = self.errors.get(VALIDATION_ERROR, 0)
        validated = self.counts.get(MATCHED_COUNT, 0) + mismatched
        if not validated:
            return ""
        if not mismatched:
            return f"; validated {validated:,} responses: all match"
        outputs = ", ".join(
            f"{name[len(MISMATCHED_PREFIX) :]} {count:,}"
            for name, count in sorted(self.counts.items())
            if name.startswith(MISMATCHED_PREFIX)
        )
        return f"; validated {validated:,} responses: {mismatched:,} did not match ({outputs})"


def from_this_run(environment: Any, msg: Any) -> bool:
    """Whether a window message belongs to this run: sent by a connected worker, for this ``--triton-t0``.

    A worker left over from an earlier run (an earlier master on the same port) may still send.
    """
    runner = environment.runner
    if isinstance(runner, MasterRunner) and msg.node_id not in runner.clients:
        return False
    return float(msg.data.get("t0", -1.0)) == run_t0(environment)


def run_t0(environment: Any) -> float:
    """This run's ``--triton-t0`` (a worker gets the master's with its first spawn)."""
    return float(getattr(environment.parsed_options, "triton_t0", 0.0) or 0.0)
