"""``--timeslice S``: a run's figures slice by slice over its measured time, not only over the whole.

A run's measured windows are merged a slice at a time (a slice is a whole number of windows):
per slice its start (seconds from the measured span's start), its length, requests, errors,
throughput and latency P50/P90/P99 (an LLM load also TTFT and the gaps between tokens at P50 and
P99). A load that drifts (a server warming up, a queue growing, a neighbour's burst) shows as
slices that differ where the run's whole figures would average it out.
"""

from __future__ import annotations

import math
from typing import Any

from tritongen.errors import ConfigError
from tritongen.loadtest.windows import Window, merge

SLICE_PERCENTILES = {"p50": 50.0, "p90": 90.0, "p99": 99.0}
TOKEN_FIGURES = ("ttft", "itl")
"""An LLM load's further latencies, per slice at P50 and P99."""


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
    return {key: float(histogram.get_value_at_percentile(p)) for key, p in keys.items()}


def timeslice_figures(measured: list[Window], window_s: float, timeslice_s: float) -> list[dict[str, Any]]:
    """Each slice of ``measured``: ``start_s``, ``duration_s``, ``requests``, ``errors``, ``qps``, latency.

    An LLM load's slices also have ``ttft_us`` and ``itl_us`` (P50, P99). The last slice may be
    shorter (a run measured for a time that is not a whole number of slices).
    """
    per = slice_windows(timeslice_s, window_s)
    slices = []
    for first in range(0, len(measured), per):
        group = merge(measured[first : first + per])
        seconds = min(per, len(measured) - first) * window_s
        row: dict[str, Any] = {
            "start_s": round(first * window_s, 6),
            "duration_s": round(seconds, 6),
            "requests": group.ok + group.error_count,
            "errors": group.error_count,
            "qps": group.ok / seconds,
            "latency_us": _percentiles(group, name=None),
        }
        for name in TOKEN_FIGURES:
            figures = _percentiles(group, name)
            if figures is not None:
                row[f"{name}_us"] = figures
        slices.append(row)
    return slices
