"""What the load generator and the tritongen package both use, written once.

The worker↔master message name and the window records it carries, the lines of
``--triton-results``, the latency histograms' bounds, Triton's dtype table, the ``.npz``
reader and the request-steps layout, the random string alphabet, the report's schema keys,
the stability rule and the lines a worker prints for tritongen to read. This module imports
only the standard library and numpy: tritongen imports it (through
``tritongen/io/loadgen_shared.py``) in processes that never import Locust, gevent or tritonclient.
"""

from __future__ import annotations

import math
import os
import zipfile
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypedDict

import numpy as np
import numpy.typing as npt

__all__ = [
    "BF16",
    "BF16_STORAGE",
    "CLIENT_SPLIT",
    "CONFIDENCE",
    "DIGITS",
    "ENTRIES_KEY",
    "EXPECTED_PREFIX",
    "HIGHEST_US",
    "LATENCY_KEYS",
    "LOWEST_US",
    "MASTER_SILENT_ENV",
    "MATCHED_COUNT",
    "MESSAGE",
    "MISMATCHED_PREFIX",
    "NPZ_READ_FAILURES",
    "NUMPY_DTYPES",
    "OPENAI_PATHS",
    "PERCENTILES",
    "SCHEMA",
    "SERVER_KEYS",
    "STABILITY_TOLERANCE",
    "STABILITY_WINDOWS",
    "STEPS_KEY",
    "STEP_FAILURES",
    "STREAMS_KEY",
    "STRING_ALPHABET",
    "SUMMARY_KEY",
    "SUMMED_FIGURES",
    "TOLERANCE_KEY",
    "UTILISATION_METRICS",
    "VALIDATION_ERROR",
    "WORKER_FAILURE",
    "WORKER_JOINED",
    "WORKER_TOTAL",
    "LostLine",
    "Mismatch",
    "NpzReadError",
    "WindowLine",
    "bf16_from_floats",
    "decode_steps",
    "decode_streams",
    "decode_tolerance",
    "earliest_mismatches",
    "encode_steps",
    "histogram_moments",
    "is_bf16",
    "is_stable_figures",
    "is_string_array",
    "latency_figures",
    "random_strings",
    "read_npz",
    "split_step",
    "tensor_byte_size",
    "token_source",
]
"""What the tritongen package takes from here (through ``tritongen/io/loadgen_shared.py``)."""

if TYPE_CHECKING:
    from typing import NotRequired

Array = npt.NDArray[Any]

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


# -- tensors and request data ------------------------------------------------------------------

NUMPY_DTYPES: dict[str, type] = {
    "BOOL": np.bool_,
    "UINT8": np.uint8,
    "UINT16": np.uint16,
    "UINT32": np.uint32,
    "UINT64": np.uint64,
    "INT8": np.int8,
    "INT16": np.int16,
    "INT32": np.int32,
    "INT64": np.int64,
    "FP16": np.float16,
    "FP32": np.float32,
    "FP64": np.float64,
}
"""Triton wire type → numpy type (BF16 is :data:`BF16_STORAGE`; every other type is sent as BYTES)."""
BF16 = "BF16"
BF16_STORAGE = np.dtype("V2")
"""How BF16 data lives here, numpy having no such number: 2 raw bytes per element. An ``.npz`` of
``ml_dtypes.bfloat16`` arrays (what tritonclient takes) reads back so, and is sent as it is."""
STRING_ALPHABET = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
"""What random BYTES elements are made of."""


def is_string_array(array: Array) -> bool:
    """Whether ``array`` holds strings (``bytes``/``str`` objects, numpy ``S`` or ``U``): a BYTES tensor."""
    return array.dtype.kind in "OSU"


def item_bytes(item: Any) -> bytes:
    """One element of a string tensor as bytes (``str`` as UTF-8)."""
    return item if isinstance(item, bytes) else str(item).encode()


def random_strings(shape: Sequence[int], length: int, rng: np.random.Generator) -> Array:
    """An object array of random ASCII letters and digits, ``length`` bytes per element."""
    count = int(np.prod(shape))
    alphabet = np.frombuffer(STRING_ALPHABET, dtype=np.uint8)
    codes = alphabet[rng.integers(0, len(alphabet), size=(count, length))]
    out = np.empty(count, dtype=np.object_)
    out[:] = [row.tobytes() for row in codes]
    return out.reshape(shape)


def is_bf16(array: Array) -> bool:
    """Whether ``array`` holds BF16: 2-byte elements, no numpy number (``ml_dtypes``, or raw ``|V2``)."""
    return array.dtype.kind == "V" and array.dtype.itemsize == 2


def bf16_from_floats(values: Array) -> Array:
    """``values`` rounded to BF16 (to nearest, ties to even), as :data:`BF16_STORAGE`."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    return rounded.view(BF16_STORAGE)


def tensor_byte_size(datatype: str, dims: Sequence[int]) -> int | None:
    """Bytes of a tensor of wire type ``datatype`` and shape ``dims`` (at least 1); None if unknown.

    Unknown: a BYTES (or other non-numeric) tensor, or a dynamic (negative) dim.
    """
    dtype = BF16_STORAGE if datatype == BF16 else NUMPY_DTYPES.get(datatype)
    if dtype is None or any(d < 0 for d in dims):
        return None
    return max(1, math.prod(dims) * np.dtype(dtype).itemsize)


# -- .npz files: plain arrays, or request steps ----------------------------------------------

NPZ_READ_FAILURES: tuple[type[Exception], ...] = (OSError, ValueError, EOFError, zipfile.BadZipFile)
"""What ``numpy.load`` raises for a file that is not a readable array file."""
STEPS_KEY = "__tritongen_steps__"
"""Marks an ``.npz`` of request steps; holds ``[number of steps]``. Without it an ``.npz`` is one step.

In a steps file a numeric array of step ``i`` is ``i/NAME``; a string array is ``n<i>/NAME``
(each element's byte length, in the tensor's shape) and ``b<i>/NAME`` (the elements' bytes,
concatenated): stored without pickling and without losing trailing NUL bytes."""
STREAMS_KEY = "__tritongen_streams__"
"""In a steps file of a sequence model's streams: the number of steps of each stream, in order.

Each stream is one sequence: its steps (consecutive in the file) sent in order, the first with
the start flag and the last with the end flag."""
EXPECTED_PREFIX = "expected:"
"""In a request step, the array ``expected:NAME`` holds what output NAME must answer (validation).

It is flat per row: ``[rows, elements]`` for a batching model, ``[elements]`` otherwise; a row's
elements are the output's, row-major. A step that has expected outputs has ``ENTRIES_KEY`` too."""
ENTRIES_KEY = "entries:"
"""In a step with expected outputs: the data file's entry of each row (int64), named in mismatches."""
TOLERANCE_KEY = "__tritongen_tolerance__"
"""In a steps file with expected outputs: ``[atol, rtol]`` for floating-point outputs
(``|received - expected| <= atol + rtol * |expected|``); other types compare exactly."""
VALIDATION_ERROR = "validation"
"""The error kind of a response whose outputs differ from the expected ones."""
MATCHED_COUNT = "validation_matched"
"""The counter of responses whose outputs all matched (validated: these and the ``validation`` errors)."""
CLIENT_SPLIT = ("client_send_us", "client_wait_us", "client_recv_us")
"""Counters of a plain HTTP request's parts, summed in µs over the successful requests: writing the
request, waiting for the response's first bytes, reading the rest."""
MISMATCHED_PREFIX = "mismatched/"
"""``mismatched/OUTPUT``: the counter of responses whose output OUTPUT differed."""
STEP_FAILURES: tuple[type[Exception], ...] = (ValueError, KeyError, IndexError)
"""What :func:`decode_steps` raises for malformed request steps."""


class NpzReadError(ValueError):
    """An ``.npz`` file that is missing (``kind`` ``missing``) or not a readable archive (``unreadable``)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


def read_npz(path: str | os.PathLike[str], label: str) -> dict[str, Array]:
    """Every array of an ``.npz`` file by name; pickled objects are refused.

    ``label`` names the file in messages, e.g. ``input data batch.npz``.

    Raises:
        NpzReadError: The file does not exist, or is not an archive of plain arrays.
    """
    unreadable = f"cannot read {label} as an .npz archive"
    try:
        loaded = np.load(path, allow_pickle=False)
    except FileNotFoundError as e:
        raise NpzReadError("missing", f"{label} does not exist") from e
    except NPZ_READ_FAILURES as e:
        raise NpzReadError("unreadable", f"{unreadable}: {e}") from e
    if not isinstance(loaded, np.lib.npyio.NpzFile):
        raise NpzReadError("unreadable", f"{unreadable}: it holds a single array")
    try:
        with loaded:
            arrays = {name: loaded[name] for name in loaded.files}
    except NPZ_READ_FAILURES as e:
        raise NpzReadError("unreadable", f"{unreadable}: {e}") from e
    stray = [name for name, value in arrays.items() if not isinstance(value, np.ndarray)]
    if stray:
        raise NpzReadError("unreadable", f"{unreadable}: {stray[0]!r} is not an array")
    return arrays


def encode_steps(
    steps: Sequence[Mapping[str, Array]],
    streams: Sequence[int] | None = None,
    tolerance: tuple[float, float] | None = None,
) -> dict[str, Array]:
    """The arrays of one ``.npz`` holding request ``steps`` (see ``STEPS_KEY``), in ``streams`` if given.

    ``tolerance`` (``TOLERANCE_KEY``) goes with steps that carry expected outputs.

    Raises:
        ValueError: stream lengths that are not positive or do not add up to the steps.
    """
    stored: dict[str, Array] = {STEPS_KEY: np.array([len(steps)], dtype=np.int64)}
    if streams is not None:
        if min(streams, default=0) < 1 or sum(streams) != len(steps):
            raise ValueError(f"streams of {list(streams)} steps do not split {len(steps)} steps")
        stored[STREAMS_KEY] = np.array(list(streams), dtype=np.int64)
    if tolerance is not None:
        stored[TOLERANCE_KEY] = np.array(tolerance, dtype=np.float64)
    for index, step in enumerate(steps):
        for name, array in step.items():
            if not is_string_array(array):
                stored[f"{index}/{name}"] = np.ascontiguousarray(array)
                continue
            items = [item_bytes(item) for item in array.reshape(-1).tolist()]
            lengths = np.array([len(item) for item in items], np.int64)
            stored[f"n{index}/{name}"] = lengths.reshape(array.shape)
            stored[f"b{index}/{name}"] = np.frombuffer(b"".join(items), dtype=np.uint8)
    return stored


def decode_steps(arrays: Mapping[str, Array]) -> list[dict[str, Array]]:
    """The request steps held by the arrays of an ``.npz`` that has ``STEPS_KEY``.

    String tensors come back as object arrays of ``bytes``, in their shape.

    Raises:
        ValueError: String lengths that do not add up to their bytes, or a bad step number.
        KeyError: The bytes of a string tensor are missing.
        IndexError: An array of a step beyond the number of steps.
    """
    count = int(arrays[STEPS_KEY].reshape(-1)[0])
    steps: list[dict[str, Array]] = [{} for _ in range(count)]
    for key, array in arrays.items():
        head, _, name = key.partition("/")
        if key in (STEPS_KEY, STREAMS_KEY, TOLERANCE_KEY) or head.startswith("b"):
            continue
        if head.startswith("n"):
            steps[int(head[1:])][name] = _split_strings(arrays[f"b{head[1:]}/{name}"], array, name)
        else:
            steps[int(head)][name] = array
    return steps


def decode_streams(arrays: Mapping[str, Array]) -> list[int] | None:
    """The stream lengths of a steps file (``STREAMS_KEY``), or ``None`` when its steps are one series.

    Raises:
        ValueError: lengths that are not positive or do not add up to the file's steps.
    """
    if STREAMS_KEY not in arrays:
        return None
    lengths = [int(n) for n in arrays[STREAMS_KEY].reshape(-1).tolist()]
    count = int(arrays[STEPS_KEY].reshape(-1)[0])
    if min(lengths, default=0) < 1 or sum(lengths) != count:
        raise ValueError(f"streams of {lengths} steps do not split {count} steps")
    return lengths


def decode_tolerance(arrays: Mapping[str, Array]) -> tuple[float, float]:
    """``(atol, rtol)`` of a steps file's expected outputs (exact, ``(0, 0)``, when it states none).

    Raises:
        ValueError: not two non-negative numbers.
    """
    if TOLERANCE_KEY not in arrays:
        return 0.0, 0.0
    values = [float(v) for v in arrays[TOLERANCE_KEY].reshape(-1).tolist()]
    if len(values) != 2 or min(values) < 0 or any(math.isnan(v) for v in values):
        raise ValueError(f"the tolerance {values} is not [atol, rtol] of two non-negative numbers")
    return values[0], values[1]


def split_step(step: Mapping[str, Array]) -> tuple[dict[str, Array], dict[str, Array], Array | None]:
    """A step's inputs, its expected outputs by output name (``EXPECTED_PREFIX``) and its rows' entries."""
    inputs, expected = {}, {}
    for name, array in step.items():
        if name.startswith(EXPECTED_PREFIX):
            expected[name[len(EXPECTED_PREFIX) :]] = array
        elif name != ENTRIES_KEY:
            inputs[name] = array
    return inputs, expected, step.get(ENTRIES_KEY)


def _split_strings(data: Array, lengths: Array, name: str) -> Array:
    """An object array of ``bytes`` shaped like ``lengths``, cut from the concatenated ``data``."""
    sizes = lengths.reshape(-1).astype(np.int64).tolist()
    raw = data.tobytes()
    if sum(sizes) != len(raw) or min(sizes, default=0) < 0:
        raise ValueError(f"the lengths of {name!r} do not add up to its bytes")
    items, at = [], 0
    for size in sizes:
        items.append(raw[at : at + size])
        at += size
    out = np.empty(len(items), dtype=np.object_)
    out[:] = items
    return out.reshape(lengths.shape)
