"""``--timeslice S`` and stages: a run's figures slice by slice over its measured time, not only the whole.

A run's measured windows are merged a slice at a time (a slice is a whole number of windows):
per slice its start (seconds from the measured span's start), its length, requests, errors,
throughput and latency P50/P90/P99 (an LLM load also TTFT and the gaps between tokens at P50 and
P99). A load that drifts (a server warming up, a queue growing, a neighbour's burst) shows as
slices that differ where the run's whole figures would average it out. A ramp's or ``--stages``'
run has its figures per stage the same way; an open loop, how late its sends left
(:func:`schedule_fidelity`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from tritongen.errors import ConfigError
from tritongen.io.loadgen_shared import SEND_LAG
from tritongen.loadtest.shapes.base import Stage
from tritongen.loadtest.windows import Window, merge

SLICE_PERCENTILES = {"p50": 50.0, "p90": 90.0, "p99": 99.0}
TOKEN_FIGURES = ("ttft", "itl")
"""An LLM load's further latencies, per slice at P50 and P99."""
KEPT_P99_US = 10_000.0
"""An open loop whose sends' lateness P99 is over this did not keep its schedule (it is flagged)."""


def slice_windows(timeslice_s: float, window_s: float) -> int:
    """How many measurement windows make one slice.

    Raises:
        ConfigError: the slice is not a whole number of windows.
    """
    count = round(timeslice_s / window_s)
    if count < 1 or not math.isclose(count * window_s, timeslice_s, rel_tol=1e-6):
        raise ConfigError(
            f"--timeslice {timeslice_s:g}s is not a whole number of measurement windows ({window_s:g}s)",
            f"give a multiple of {window_s:g}s, or a --window that divides it",
        )
    return count


def _percentiles(window: Window, name: str | None) -> dict[str, float] | None:
    histogram = window.histogram if name is None else window.extra.get(name)
    if histogram is None or not histogram.get_total_count():
        return None
    keys = SLICE_PERCENTILES if name is None else {"p50": 50.0, "p99": 99.0}
    figures = {key: float(histogram.get_value_at_percentile(p)) for key, p in keys.items()}
    return figures if name is not None else {**figures, "max": float(histogram.get_max_value())}


def timeslice_figures(measured: list[Window], window_s: float, timeslice_s: float) -> list[dict[str, Any]]:
    """Each slice of ``measured``: ``start_s``, ``duration_s``, ``requests``, ``sent``, ``errors``, ``qps``...

    ...and latency. ``requests`` finished in the slice (ok or not); ``sent`` left in it (an open
    loop's count; a closed loop does not count its sends: 0).

    An LLM load's slices also have ``ttft_us`` and ``itl_us`` (P50, P99). The last slice may be
    shorter (a run measured for a time that is not a whole number of slices).
    """
    per = slice_windows(timeslice_s, window_s)
    return [
        span_figures(measured[first : first + per], first, window_s) for first in range(0, len(measured), per)
    ]


def stage_figures(measured: list[Window], window_s: float, stages: Sequence[Stage]) -> list[dict[str, Any]]:
    """Each stage's figures (a slice's, with its ``stage`` label and the ``rate`` asked), where measured."""
    rows = []
    for stage in stages:
        first = round(stage.start_s / window_s)
        count = round(stage.duration_s / window_s)
        if first >= len(measured):
            break
        row = span_figures(measured[first : first + count], first, window_s)
        rows.append({"stage": stage.label, "rate": stage.rate, **row})
    return rows


def span_figures(windows: list[Window], first: int, window_s: float) -> dict[str, Any]:
    """The figures of consecutive ``windows``, the first the ``first`` of the measured span."""
    group = merge(windows)
    seconds = len(windows) * window_s
    row: dict[str, Any] = {
        "start_s": round(first * window_s, 6),
        "duration_s": round(seconds, 6),
        "requests": group.ok + group.error_count,
        "sent": group.sent,
        "errors": group.error_count,
        "qps": group.ok / seconds,
        "latency_us": _percentiles(group, name=None),
    }
    for name in TOKEN_FIGURES:
        figures = _percentiles(group, name)
        if figures is not None:
            row[f"{name}_us"] = figures
    return row


def schedule_fidelity(total: Window, shape: str | None) -> dict[str, Any] | None:
    """How late an open loop's sends left against their schedule (None: no send left on schedule).

    ``lateness_us``: P50, P99 and the longest; ``late_share``: the share over 1 ms late; ``kept``: the
    lateness P99 within :data:`KEPT_P99_US` (else the generator, not the server, shaped the load).
    """
    lateness = total.extra.get(SEND_LAG)
    if lateness is None or not lateness.get_total_count():
        return None
    count = lateness.get_total_count()
    p99 = float(lateness.get_value_at_percentile(99.0))
    figures: dict[str, Any] = {
        "lateness_us": {
            "p50": float(lateness.get_value_at_percentile(50.0)),
            "p99": p99,
            "max": float(lateness.get_max_value()),
        },
        "late_share": total.late / count,
        "kept": p99 <= KEPT_P99_US,
    }
    if shape is not None:
        figures["shape"] = shape
    return figures
