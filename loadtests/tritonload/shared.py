"""What the load generator and the tritongen package both use, written once.

The worker↔master message name and the window records it carries, the lines of
``--triton-results``, the latency histograms' bounds, the counters' names, the report's
schema keys, the stability rule and the lines a worker prints for tritongen to read (the
request data's layout is in :mod:`.request_data`). This module imports
only the standard library and numpy: tritongen imports it (through
``tritongen/io/loadgen_shared.py``) in processes that never import Locust, gevent or tritonclient.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypedDict

import numpy as np

__all__ = [
    "ARRIVAL_GAPS",
    "CLIENT_SPLIT",
    "CONFIDENCE",
    "CONVERSATION_TTFT",
    "DIGITS",
    "HIGHEST_US",
    "KERNEL_LATENCY",
    "LATENCY_KEYS",
    "LOWEST_US",
    "MASTER_SILENT_ENV",
    "MATCHED_COUNT",
    "MESSAGE",
    "MESSAGE_CHARS",
    "MISMATCHED_PREFIX",
    "OPENAI_PATHS",
    "PERCENTILES",
    "SCHEDULE_START",
    "SCHEMA",
    "SEND_LAG",
    "SERVER_KEYS",
    "STABILITY_TOLERANCE",
    "STABILITY_WINDOWS",
    "SUMMARY_KEY",
    "SUMMED_FIGURES",
    "TRACE_ID_WIDTHS",
    "TRACE_MARKS_SUFFIX",
    "UTILISATION_METRICS",
    "VALIDATION_ERROR",
    "WEB_TOKEN_ENV",
    "WEB_TOKEN_HEADER",
    "WORKER_FAILURE",
    "WORKER_JOINED",
    "WORKER_TOTAL",
    "LostLine",
    "Mismatch",
    "WindowLine",
    "client_overhead",
    "earliest_mismatches",
    "histogram_moments",
    "is_stable_figures",
    "latency_figures",
    "one_line",
    "read_schedule",
    "token_source",
    "write_schedule",
]
"""What the tritongen package takes from here (through ``tritongen/io/loadgen_shared.py``)."""

if TYPE_CHECKING:
    from typing import NotRequired

# -- worker → master: windows ----------------------------------------------------------------

MESSAGE = "tritongen_window"
"""Name of the message that carries finished windows from the workers to the master."""
LOWEST_US, HIGHEST_US, DIGITS = 1, 120_000_000, 3
"""Latency histograms: 1 µs to 120 s, 3 significant digits."""


class Mismatch(TypedDict):
    """The first response of a window whose output differed from the expected one (validation)."""

    entry: int
    """The data file's entry of the row that differed (entries counted across streams, in order)."""
    element: int
    """The first element that differed, row-major within the row; -1 when the counts differ."""
    expected: str
    received: str
    at: float
    """Epoch of the response, so that merged windows keep the earliest."""


def earliest_mismatches(into: dict[str, Mismatch], more: Mapping[str, Mismatch]) -> None:
    """Keep in ``into`` the earlier of each output's first mismatch from ``into`` and ``more``."""
    for name, mismatch in more.items():
        known = into.get(name)
        if known is None or float(mismatch["at"]) < float(known["at"]):
            into[name] = mismatch


class WindowRecord(TypedDict):
    """One worker's figures for one window, as sent to the master."""

    index: int
    ok: int
    errors: dict[str, int]
    sent: int
    hist: str
    """The window's HDR histogram, base64 of its compressed encoding; empty when nothing succeeded."""
    late: int
    max_lag_us: float
    held_back: int
    max_hold_us: float
    final: bool
    """Sent when the test stopped (the window may be partial)."""
    extra: dict[str, str]
    """Further latency histograms by name (e.g. ``first_response``), encoded like ``hist``."""
    counts: dict[str, int]
    """Further counters by name (e.g. ``responses``; ``mismatched/OUTPUT``: responses whose output
    OUTPUT differed from its expected value)."""
    mismatches: NotRequired[dict[str, Mismatch]]
    """Validation: the first mismatch of each output in this window (its count is in ``counts``)."""
    messages: NotRequired[dict[str, str]]
    """The first message of each error kind (the server's own text where it sent one), once per
    process and kind: in the window where the process first saw that kind."""


MESSAGE_CHARS = 300
"""An error's message is kept to this many characters (the server's tracebacks are longer)."""


def one_line(text: str, limit: int = MESSAGE_CHARS) -> str:
    """``text`` on one line (whitespace runs made one space), cut to ``limit`` characters with ``…``."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


class WindowMessage(TypedDict):
    """The message a worker sends to the master: who it is and its windows that are over."""

    worker: str
    windows: list[WindowRecord]
    t0: float
    """The run's ``--triton-t0`` as the worker got it: a master drops the windows of another run."""
    users: int
    """Users running in the worker when it sent the message."""
    final: NotRequired[bool]
    """The worker's last message of the test (its windows may be none)."""
    first_send: NotRequired[float]
    """Epoch of the worker's first request of the test, once it has sent one (the run's clock starts
    at the earliest)."""


class WindowLine(WindowRecord):
    """One line of ``--triton-results``: a window and the worker that measured it.

    tritongen reads these lines (``tritongen.loadtest.windows``); a key an older locustfile
    did not write counts as zero there.
    """

    worker: str
    users: int
    """Users running in that worker when it reported the window."""


class LostLine(TypedDict):
    """A line of ``--triton-results``: the master lost a worker (no heartbeat, or it quit), or it is back."""

    worker: str
    lost: bool
    """True: lost; False: its heartbeats resumed (a stall, e.g. on a busy machine)."""
    at: float
    """Epoch at which the master noticed."""


SUMMARY_KEY = "summary"
"""The key of the ``--triton-results`` line that holds the run's report (readers skip it)."""

# -- what a worker prints, for tritongen to read from its log ----------------------------------

WORKER_FAILURE = "tritongen worker: "
"""Prefix of the one line a worker prints when it cannot load (e.g. no request data)."""
WORKER_JOINED = "tritongen worker joined the master"
"""The line a worker prints once its master has answered (its first heartbeat)."""
WORKER_TOTAL = "tritongen worker total: "
"""Prefix of the line a worker prints when it quits: its id and the requests (ok and failed) it reported."""
MASTER_SILENT_ENV = "TRITONGEN_MASTER_SILENT_S"
"""A worker whose master sent no heartbeat for this many seconds quits (the master is gone).

``tritongen loadtest --worker`` sets it short, since it joins a fresh master per run; unset (processes
forked by a local master, a worker in a cluster) the limit is Locust's own minute, so a busy machine
does not stop a worker early."""

# -- the run's report (``tritongen.loadtest/1``) -----------------------------------------------

SCHEMA = "tritongen.loadtest/1"
"""The document ``--triton-json`` and ``tritongen loadtest --json`` write."""
LATENCY_KEYS = ("p50", "p90", "p95", "p99", "p999", "mean", "max")
PERCENTILES = {"p50": 50.0, "p90": 90.0, "p95": 95.0, "p99": 99.0, "p999": 99.9}
SERVER_KEYS = ("queue", "compute_input", "compute_infer", "compute_output")
"""Phases of the statistics API, reported as µs per request."""
UTILISATION_METRICS = {
    "nv_gpu_utilization": "gpu_util",
    "nv_gpu_memory_used_bytes": "gpu_mem_bytes",
    "nv_cpu_utilization": "cpu_util",
    "nv_cpu_memory_used_bytes": "cpu_mem_bytes",
}
"""Triton metric → figure; several GPUs: utilisation averaged, memory (``SUMMED_FIGURES``) summed."""
SUMMED_FIGURES = ("cpu_mem_bytes", "gpu_mem_bytes")
CONFIDENCE = 0.95
"""The confidence level of intervals over rounds (a report of one run states it too)."""
STABILITY_WINDOWS, STABILITY_TOLERANCE = 3, 0.10
"""Stable: the last complete windows agree within this on throughput and on P99 (perf_analyzer's rule)."""


class Histogram(Protocol):
    """What the report reads of an HDR latency histogram (``hdrh.histogram.HdrHistogram``)."""

    def get_value_at_percentile(self, percentile: float) -> int:
        """The value at ``percentile`` (0..100)."""
        ...

    def get_mean_value(self) -> float:
        """The mean value."""
        ...

    def get_max_value(self) -> int:
        """The largest value."""
        ...

    def get_total_count(self) -> int:
        """How many values it holds."""
        ...

    def get_value_from_index(self, index: int) -> int:
        """The value counted at ``index`` of ``counts``."""
        ...

    def get_lowest_equivalent_value(self, value: int) -> int:
        """The lowest value counted together with ``value``."""
        ...

    def get_highest_equivalent_value(self, value: int) -> int:
        """The highest value counted together with ``value``."""
        ...

    @property
    def counts(self) -> Any:
        """The count at each index (a ctypes array)."""
        ...

    @property
    def total_count(self) -> int:
        """Values recorded."""
        ...


def histogram_moments(histogram: Histogram) -> tuple[float, float]:
    """The mean and standard deviation of a histogram's values, as hdrh defines them, in one pass.

    Each count stands for the middle of its range of equivalent values, as in
    ``get_mean_value`` and ``get_stddev``; only the indexes that hold a count are visited
    (hdrh's own iterator walks every bucket up to the largest value, twice for the deviation).
    """
    total = int(histogram.total_count)
    if not total:
        return 0.0, 0.0
    counts = np.ctypeslib.as_array(histogram.counts)
    indexes = np.flatnonzero(counts)
    middles = np.empty(len(indexes))
    for slot, index in enumerate(indexes):
        value = histogram.get_value_from_index(int(index))
        low = histogram.get_lowest_equivalent_value(value)
        middles[slot] = low + ((histogram.get_highest_equivalent_value(value) - low + 1) >> 1)
    weights = counts[indexes].astype(float)
    mean = float(np.dot(middles, weights)) / total
    return mean, math.sqrt(float(np.dot((middles - mean) ** 2, weights)) / total)


def latency_figures(histogram: Histogram) -> dict[str, float]:
    """P50, P90, P95, P99, P99.9, mean and max in µs."""
    figures = {key: float(histogram.get_value_at_percentile(p)) for key, p in PERCENTILES.items()}
    return figures | {"mean": histogram_moments(histogram)[0], "max": float(histogram.get_max_value())}


def client_overhead(latency: Histogram, kernel: Histogram | None) -> dict[str, float] | None:
    """The client's own time at P50, P90, P99, P99.9 (µs): the latency's percentile less the kernel's.

    ``kernel`` holds the same requests' latency up to the kernel's receipt of the response's last
    bytes; None (the result) unless it holds every request of ``latency``.
    """
    ok = latency.get_total_count()
    if not ok or kernel is None or kernel.get_total_count() != ok:
        return None
    return {
        key: float(latency.get_value_at_percentile(p) - kernel.get_value_at_percentile(p))
        for key, p in PERCENTILES.items()
        if key != "p95"
    }


OPENAI_PATHS = {"openai-chat": "/v1/chat/completions", "openai-completions": "/v1/completions"}
"""Each OpenAI API's endpoint, under the server's base URL."""


def token_source(usage: int, tokenizer: int, ok: int) -> str:
    """Where an LLM run's output token counts came from.

    ``usage`` (every answer's from the server's usage report), ``tokenizer`` (every answer's
    text counted with ``--tokenizer``: the server gave no usage), ``events`` (one per output
    event: neither) or ``mixed``.
    """
    if not usage and not tokenizer:
        return "events"
    if usage == ok:
        return "usage"
    return "tokenizer" if tokenizer == ok else "mixed"


def is_stable_figures(
    qps: Sequence[float], p99_us: Sequence[float | None], tolerance: float = STABILITY_TOLERANCE
) -> bool:
    """Whether the last ``STABILITY_WINDOWS`` windows agree within ``tolerance`` on both figures.

    ``qps`` and ``p99_us`` are the windows' throughput and latency (P99, or the figure a run
    stabilises on), oldest first; a window without a request or without a latency is never stable.
    """
    rates, p99s = list(qps[-STABILITY_WINDOWS:]), list(p99_us[-STABILITY_WINDOWS:])
    if len(rates) < STABILITY_WINDOWS or min(rates) <= 0 or any(p is None for p in p99s):
        return False
    return _within(rates, tolerance) and _within([float(p) for p in p99s if p is not None], tolerance)


def _within(values: list[float], tolerance: float) -> bool:
    mean = sum(values) / len(values)
    return all(abs(v - mean) <= tolerance * mean for v in values)


# -- counters every window carries by name ---------------------------------------------------

VALIDATION_ERROR = "validation"
"""The error kind of a response whose outputs differ from the expected ones."""
MATCHED_COUNT = "validation_matched"
"""The counter of responses whose outputs all matched (validated: these and the ``validation`` errors)."""
ARRIVAL_GAPS = ("arrival_gaps", "arrival_gap_us", "arrival_gap_us2")
"""Counters of an open loop's sends that left on schedule: the gaps between them, their sum and their
sum of squares in µs (the achieved inter-arrival CV comes from these)."""
TRACE_ID_WIDTHS = (6, 7, 9)
"""A traced request's id: a run's tag, its process's id and its count, each this wide (digits padded)."""
TRACE_MARKS_SUFFIX = ".ids-"
"""A load process writes its traced requests' times to ``RESULTS.ids-PID.npy`` (tritonload/request_ids.py)."""
CLIENT_SPLIT = ("client_send_us", "client_wait_us", "client_recv_us")
"""Counters of a plain HTTP request's parts, summed in µs over the successful requests: writing the
request, waiting for the response's first bytes, reading the rest."""
KERNEL_LATENCY = "kernel"
"""The further latency of a plain HTTP request up to the kernel's receipt of its response's last bytes
(the socket's receive timestamp): its latency less the client's own time after the bytes came."""
CONVERSATION_TTFT = ("ttft_first_turn", "ttft_later_turns")
"""Chat sessions: the further latencies (time to first token) of their first turns and of later ones."""
SEND_LAG = "send_lag"
"""The further latency of an open loop's sends that left on schedule: how late each left (its lateness)."""
SCHEDULE_START = "schedule_start"
"""The counter a replayed schedule (``--triton-schedule``) puts in the window its schedule's time 0 opens:
the measured span starts there."""
MISMATCHED_PREFIX = "mismatched/"
"""``mismatched/OUTPUT``: the counter of responses whose output OUTPUT differed."""

# -- the web API of a Locust that tritongen drives ---------------------------------------------

WEB_TOKEN_ENV = "TRITONGEN_LOCUST_TOKEN"
"""A secret that tritongen gives a Locust it drives through the web API (in its environment, which
other users of the machine cannot read): every request to that API must carry it."""
WEB_TOKEN_HEADER = "X-Tritongen-Token"
"""The header a request to such a Locust's web API carries the secret in."""


# -- a replayed schedule (``--triton-schedule``) ----------------------------------------------


def write_schedule(path: Any, warmup_s: float, times_s: Any, steps: Any) -> None:
    """Write a schedule's sends to ``path``, in time order.

    Each send's time is in s from the measured span's start (the warm-up's before 0, from
    ``-warmup_s``); its step is the request it sends (-1: the next in turn).
    """
    times = np.asarray(times_s, dtype=np.float64)
    if len(times) > 1 and bool(np.any(np.diff(times) < 0)):
        raise ValueError("a schedule's times must not go back")
    with open(path, "wb") as out:
        np.savez(out, times=times, steps=np.asarray(steps, dtype=np.int64), warmup_s=np.float64(warmup_s))


def read_schedule(path: Any) -> tuple[float, Any, Any]:
    """What :func:`write_schedule` wrote: the warm-up in s, the times and the steps."""
    with np.load(path) as data:
        return float(data["warmup_s"]), data["times"].astype(np.float64), data["steps"].astype(np.int64)
