"""The HTTP engine's successful requests, recorded in batches rather than one by one.

Each request that succeeds adds its timestamps to a plain list (:class:`RequestBatch`); the
list goes into the process's :class:`~.recording.Recorder` at once, as arrays, when a
window or a wall-clock second ends (or the batch is full), so every request of a batch
falls in the same window and the same second of Locust's statistics. The figures are those
of recording the requests one by one: :func:`add_values` fills an HDR histogram as its
``record_value`` would, value by value, and the latencies (the client's and the kernel's), the
send/wait/receive split and the milliseconds Locust counts come from the same timestamps the same way.
"""

from __future__ import annotations

import numpy as np
from hdrh.histogram import HdrHistogram

from .request_data import Array
from .shared import HIGHEST_US, LOWEST_US

FIELDS = 6
"""What a request adds to a batch: send start, request written, first response bytes, response
complete (perf_counter seconds), response bytes, and when the kernel received the response's last
bytes (the socket's receive timestamp on the perf_counter scale; NaN: the kernel gave none)."""
MAX_REQUESTS = 8192
"""A batch holding this many requests goes into the Recorder without waiting for its boundary."""


class RequestBatch:
    """Successful requests not yet recorded, all to be counted in one window and one second."""

    def __init__(self) -> None:
        self.marks: list[float] = []
        """:data:`FIELDS` numbers per request, one request after the other."""
        self.boundary = float("-inf")
        """When (perf_counter) the window or the second of the requests in the batch ends."""

    def __len__(self) -> int:
        return len(self.marks) // FIELDS

    def take(self) -> Array:
        """The requests as rows of :data:`FIELDS` columns; the batch is empty after."""
        rows = np.array(self.marks, dtype=np.float64).reshape(-1, FIELDS)
        self.marks = []
        return rows


def latencies_us(rows: Array) -> Array:
    """Each request's latency in whole µs, clamped to the histograms' range (as ``Recorder.record``)."""
    elapsed = (rows[:, 3] - rows[:, 0]) * 1e6
    clipped: Array = np.clip(elapsed.astype(np.int64), LOWEST_US, HIGHEST_US)
    return clipped


def split_us(rows: Array) -> tuple[int, int, int]:
    """The batch's send, wait and receive times: each request's in whole µs, summed."""
    send = ((rows[:, 1] - rows[:, 0]) * 1e6).astype(np.int64).sum()
    wait = ((rows[:, 2] - rows[:, 1]) * 1e6).astype(np.int64).sum()
    receive = ((rows[:, 3] - rows[:, 2]) * 1e6).astype(np.int64).sum()
    return int(send), int(wait), int(receive)


def kernel_latencies_us(rows: Array) -> Array:
    """Each request's latency up to the kernel's receipt of its response (whole µs), where stamped."""
    stamped = rows[np.isfinite(rows[:, 5])]
    elapsed = (stamped[:, 5] - stamped[:, 0]) * 1e6
    clipped: Array = np.clip(elapsed.astype(np.int64), LOWEST_US, HIGHEST_US)
    return clipped


def milliseconds(rows: Array) -> dict[int, int]:
    """Response time in whole milliseconds → requests, as Locust's statistics round them."""
    ms = ((rows[:, 3] - rows[:, 0]) * 1000 + 0.5).astype(np.int64)
    values, counts = np.unique(ms, return_counts=True)
    return dict(zip(values.tolist(), counts.tolist(), strict=True))


def add_values(hist: HdrHistogram, values: Array) -> None:
    """Record each of ``values`` (whole numbers in the histogram's range) as ``hist.record_value`` would.

    The index of each value's count is computed as the histogram computes it (its bucket from the
    value's bit length, then its sub-bucket), for all values at once.
    """
    if not len(values):
        return
    values = values.astype(np.int64)
    _, bits = np.frexp((values | hist.sub_bucket_mask).astype(np.float64))  # bit length of each
    bucket = bits.astype(np.int64) - hist.unit_magnitude - (hist.sub_bucket_half_count_magnitude + 1)
    sub_bucket = values >> (bucket + hist.unit_magnitude)
    index = ((bucket + 1) << hist.sub_bucket_half_count_magnitude) + sub_bucket - hist.sub_bucket_half_count
    if int(index.min()) < 0 or int(index.max()) >= hist.counts_len:
        for value in values.tolist():  # out of range: record_value says what it does with them
            hist.record_value(value)
        return
    counts = np.ctypeslib.as_array(hist.counts)
    np.add.at(counts, index, 1)
    hist.total_count += len(values)
    hist.min_value = min(hist.min_value, int(values.min()))
    hist.max_value = max(hist.max_value, int(values.max()))
