r"""Locust users that load one Triton model over HTTP or gRPC, timed at microsecond resolution.

Standalone::

    locust -f loadtests/locustfile.py --headless -u 8 -t 30s --host http://127.0.0.1:8000 \\
        --triton-model mlp_onnx

    # gRPC, open loop at 200 requests/s per user, Poisson arrivals:
    locust -f loadtests/locustfile.py --headless -u 1 -t 30s --host 127.0.0.1:8001 \\
        --triton-model mlp_onnx --triton-protocol grpc --triton-user-rate 200 --triton-arrival poisson

Every option also reads an environment variable (``TRITONGEN_MODEL``, ``TRITONGEN_PROTOCOL``,
...; see ``--help``). ``tritongen loadtest`` runs this file as headless Locust subprocesses;
the compose ``loadtest`` profile runs it as a master with workers.

How it measures: every request's latency goes into an HDR histogram of the worker that
sent it (Locust's own percentiles are rounded to whole milliseconds). Each worker sends
one histogram per measurement window (wall-clock aligned, so windows of different
workers and machines line up) to the master, which merges them, appends them to
``--triton-results`` (JSON lines) and prints the run's report when the test ends (with the
server's statistics and utilisation; ``--triton-json`` writes it, see :class:`MasterReport`).
In open-loop mode (``--triton-user-rate``) latency is counted from each request's
*scheduled* send time, so a slow server or a late generator cannot hide queueing delay.
When ``--triton-max-inflight`` requests are in flight, a send is *held back*: it waits,
oldest first, for a request to finish, goes out then, and still counts from its scheduled
time; the windows count such sends (``held_back``) and their longest wait (``max_hold_us``).

Locust's own statistics (web UI, console table, ``--csv``/``--html``, a master's merged
reports) see every request as well, fed in batches (:class:`StatsFeed`): same request and
failure counts, a row per model with the method ``POST`` (HTTP), ``grpc`` or ``grpc-stream``.
Their times are whole milliseconds; the microsecond percentiles above stay the reference.
Response sizes there are the HTTP engine's response bytes, 0 for the other transports.

Payloads are built once per process: HTTP bodies use Triton's binary tensor extension,
gRPC requests carry raw tensor contents. ``--triton-inputs`` may hold several requests
(steps, see :func:`read_steps`); each user (each connection of the HTTP engine) sends them
in turn, starting at a step of its own. String arrays (``bytes``/``str`` objects, numpy
``S``/``U``) go out as BYTES; random BYTES data are strings of ``--triton-string-length``.
The file imports nothing from tritongen so it also runs in a plain Locust container.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import itertools
import json
import os
import random
import select
import socket
import tempfile
import time
import urllib.request
import weakref
import zipfile
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any, Protocol, TypedDict, cast

import gevent
import gevent.event
import gevent.lock
import locust.stats
import numpy as np
import numpy.typing as npt
from hdrh.histogram import HdrHistogram
from locust import User, events, task
from locust.runners import LocalRunner, MasterRunner, WorkerRunner

if TYPE_CHECKING:
    from typing import NotRequired
from locust.stats import RequestStats, StatsEntry, StatsError

# -- what this file shares with the tritongen package (tests/test_locustfile_copies.py) ----

MESSAGE = "tritongen_window"
"""Name of the message that carries finished windows from the workers to the master."""
LOWEST_US, HIGHEST_US, DIGITS = 1, 120_000_000, 3
"""Latency histograms: 1 µs to 120 s, 3 significant digits."""
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
"""Triton wire type → numpy type (every other type is sent as BYTES)."""
NPZ_READ_FAILURES: tuple[type[Exception], ...] = (OSError, ValueError, EOFError, zipfile.BadZipFile)
"""What ``numpy.load`` raises for a file that is not a readable array file."""
STEPS_KEY = "__tritongen_steps__"
"""Marks an ``.npz`` of request steps (holding their number); without it an ``.npz`` is one step."""

Array = npt.NDArray[Any]

# -- the rest is this file's own -----------------------------------------------------------

RECV_BYTES = 262144
MAX_GRPC_MESSAGE = 2**31 - 1
LATE_S = 0.001
"""A send leaving more than this after its scheduled time counts as late."""
TIMER_SLACK_S = 0.001
EPOLL_READ = select.EPOLLIN | select.EPOLLERR | select.EPOLLHUP
EPOLL_READ_WRITE = EPOLL_READ | select.EPOLLOUT


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
    """Further counters by name (e.g. ``responses``)."""


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
    """One line of ``--triton-results``: a window and the worker that measured it."""

    worker: str
    users: int
    """Users running in that worker when it reported the window."""


class TensorMeta(TypedDict):
    """One tensor of the model metadata."""

    name: str
    datatype: str
    shape: list[int]


class ModelMeta(TypedDict):
    """The model metadata this file reads."""

    inputs: list[TensorMeta]
    outputs: list[TensorMeta]


# -- options ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Option:
    """One ``--triton-*`` option; its environment variable is ``TRITONGEN_`` plus its name."""

    name: str
    default: str | int | float
    help: str | None = None
    choices: tuple[str, ...] | None = None

    def add_to(self, group: Any) -> None:
        """Add the option to an argument group of Locust's parser."""
        extra: dict[str, Any] = {"help": self.help} if self.help else {}
        if self.choices:
            extra["choices"] = list(self.choices)
        if not isinstance(self.default, str):
            extra["type"] = type(self.default)
        env_var = "TRITONGEN_" + self.name.upper().replace("-", "_")
        group.add_argument(f"--triton-{self.name}", env_var=env_var, default=self.default, **extra)


OPTIONS = (
    _Option("model", "", "Model to load."),
    _Option("protocol", "http", choices=("http", "grpc")),
    _Option("inputs", "", ".npz with one array per input (full shape), or request steps sent round-robin."),
    _Option("batch-size", 1),
    _Option("dynamic-dim", 8, "Value of -1 dims."),
    _Option("string-length", 16, "Bytes per element of random BYTES inputs."),
    _Option("user-rate", 0.0, "Open loop: requests/s each user schedules (0 = closed loop)."),
    _Option("arrival", "constant", choices=("constant", "poisson")),
    _Option(
        "max-inflight",
        1024,
        "Open loop: requests in flight per user; further sends are held back until one finishes.",
    ),
    _Option("window", 1.0, "Window in s."),
    _Option("t0", 0.0, "Epoch of window 0."),
    _Option("results", "", "JSON-lines output."),
    _Option("json", "", "Master: write the run's report as a tritongen.loadtest/1 document here."),
    _Option(
        "metrics-url",
        "",
        "Master: Triton's metrics endpoint, sampled each second (default the host's port 8002; none: off).",
    ),
    _Option("timeout", 60.0),
    _Option("streaming", 0, "1: a decoupled model, over gRPC streams (in flight until its final response)."),
    _Option("seed", 0),
    _Option(
        "shared-memory",
        "none",
        "system: tensors pass through system shared memory (a server on this host).",
        choices=("none", "system"),
    ),
    _Option("shm-prefix", "", "Name prefix of the shared-memory regions (default tritongen_<pid>_<hex>_)."),
    _Option("output-shm-size", 0, "Shared-memory bytes of an output whose size the metadata leaves open."),
    _Option("sequences", 0, "1: each user runs sequences (correlation ID, start/end flags), one at a time."),
    _Option("sequence-length", 0, "Requests per sequence (0: one per data step)."),
    _Option("sequence-ids", "", "Correlation IDs START:END (END excluded; default: from the process id)."),
)


@dataclass(frozen=True)
class TritonOptions:
    """The ``--triton-*`` options, one field per option (dashes become underscores)."""

    model: str
    protocol: str
    inputs: str
    batch_size: int
    dynamic_dim: int
    string_length: int
    user_rate: float
    arrival: str
    max_inflight: int
    window: float
    t0: float
    results: str
    json: str
    metrics_url: str
    timeout: float
    streaming: int
    seed: int
    shared_memory: str
    shm_prefix: str
    output_shm_size: int
    sequences: int
    sequence_length: int
    sequence_ids: str

    @classmethod
    def from_parsed(cls, parsed: Any) -> TritonOptions:
        """Read them from Locust's parsed options."""
        return cls(**{f.name: getattr(parsed, f"triton_{f.name}") for f in fields(cls)})


@events.init_command_line_parser.add_listener
def _add_arguments(parser: Any) -> None:
    group = parser.add_argument_group("tritongen", "Triton load options")
    for option in OPTIONS:
        option.add_to(group)


# -- payloads ---------------------------------------------------------------------------


class NpzReadError(ValueError):
    """An ``--triton-inputs`` file that is missing (``kind`` ``missing``) or not a readable .npz."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def read_npz(path: str, label: str) -> dict[str, Array]:
    """Every array of an ``.npz`` file by name; pickled objects are refused.

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


def host_port(host: str, default_port: int) -> tuple[str, int]:
    """Host name and port of a ``--host`` value, with or without a scheme."""
    for scheme in ("http://", "https://", "grpc://"):
        if host.startswith(scheme):
            host = host[len(scheme) :]
    host = host.rstrip("/")
    name, _, port = host.rpartition(":")
    return (name, int(port)) if name else (host, default_port)


def interface_http(host: str, port: int, model: str) -> tuple[ModelMeta, int]:
    """The model's metadata and max batch size, over HTTP."""

    def get(path: str) -> Any:
        with urllib.request.urlopen(f"http://{host}:{port}{path}", timeout=30) as response:
            return json.loads(response.read())

    return get(f"/v2/models/{model}"), int(get(f"/v2/models/{model}/config").get("max_batch_size", 0))


def interface_grpc(stub: Any, model: str) -> tuple[ModelMeta, int]:
    """The model's metadata and max batch size, over gRPC."""
    from google.protobuf import json_format
    from tritonclient.grpc import service_pb2

    meta = json_format.MessageToDict(
        stub.ModelMetadata(service_pb2.ModelMetadataRequest(name=model)), preserving_proto_field_name=True
    )
    config = stub.ModelConfig(service_pb2.ModelConfigRequest(name=model)).config
    for tensor in meta["inputs"]:
        tensor["shape"] = [int(d) for d in tensor.get("shape", [])]
    return cast(ModelMeta, meta), int(config.max_batch_size)


STRING_ALPHABET = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
"""What random BYTES elements are made of."""


def random_arrays(meta: ModelMeta, max_batch: int, options: TritonOptions) -> dict[str, Array]:
    """One request of random data shaped from the metadata; BYTES elements have ``--triton-string-length``."""
    rng = np.random.default_rng(options.seed)
    alphabet = np.frombuffer(STRING_ALPHABET, dtype=np.uint8)
    arrays = {}
    for tensor in meta["inputs"]:
        dims = [options.dynamic_dim if int(d) == -1 else int(d) for d in tensor["shape"]]
        if max_batch > 0:
            dims[0] = options.batch_size
        dtype = NUMPY_DTYPES.get(tensor["datatype"])
        if dtype is None:
            count = int(np.prod(dims))
            codes = alphabet[rng.integers(0, len(alphabet), size=(count, options.string_length))]
            strings = np.empty(count, dtype=np.object_)
            strings[:] = [row.tobytes() for row in codes]
            arrays[tensor["name"]] = strings.reshape(dims)
        elif np.issubdtype(dtype, np.floating):
            arrays[tensor["name"]] = rng.standard_normal(dims).astype(dtype)
        else:
            arrays[tensor["name"]] = rng.integers(0, 2, size=dims).astype(dtype)
    return arrays


def read_steps(path: str, label: str) -> list[dict[str, Array]]:
    """The request steps of an ``.npz``: those tritongen wrote (``STEPS_KEY``), or its arrays as one step.

    In a steps file a numeric array of step ``i`` is ``i/NAME``; a string array is
    ``n<i>/NAME`` (each element's byte length, in the tensor's shape) and ``b<i>/NAME``
    (the elements' bytes, concatenated), read back as an object array of ``bytes``.

    Raises:
        NpzReadError: The file does not exist, or is not a readable archive of arrays or of steps.
    """
    arrays = read_npz(path, label)
    if STEPS_KEY not in arrays:
        return [arrays]
    try:
        steps: list[dict[str, Array]] = [{} for _ in range(int(arrays[STEPS_KEY].reshape(-1)[0]))]
        for key, array in arrays.items():
            head, _, name = key.partition("/")
            if key == STEPS_KEY or head.startswith("b"):
                continue
            if head.startswith("n"):
                steps[int(head[1:])][name] = split_strings(arrays[f"b{head[1:]}/{name}"], array)
            else:
                steps[int(head)][name] = array
    except (ValueError, KeyError, IndexError) as e:
        raise NpzReadError("unreadable", f"cannot read {label} as request steps: {e}") from e
    return steps


def split_strings(data: Array, lengths: Array) -> Array:
    """An object array of ``bytes`` shaped like ``lengths``, cut from the concatenated ``data``.

    Raises:
        ValueError: The lengths do not add up to the bytes.
    """
    sizes = lengths.reshape(-1).astype(np.int64).tolist()
    raw = data.tobytes()
    if sum(sizes) != len(raw) or min(sizes, default=0) < 0:
        raise ValueError("string lengths do not add up to their bytes")
    items, at = [], 0
    for size in sizes:
        items.append(raw[at : at + size])
        at += size
    out = np.empty(len(items), dtype=np.object_)
    out[:] = items
    return out.reshape(lengths.shape)


def build_steps(meta: ModelMeta, max_batch: int, options: TritonOptions) -> list[dict[str, Array]]:
    """The requests to send round-robin: the steps of ``--triton-inputs``, else one of random data."""
    if options.inputs:
        return read_steps(options.inputs, f"--triton-inputs {options.inputs}")
    return [random_arrays(meta, max_batch, options)]


def build_arrays(meta: ModelMeta, max_batch: int, options: TritonOptions) -> dict[str, Array]:
    """One request's arrays: the first of :func:`build_steps`."""
    return build_steps(meta, max_batch, options)[0]


def wire_datatype(array: Array) -> str:
    """The Triton wire type of ``array``; strings (``bytes``/``str`` objects, numpy ``S``/``U``) are BYTES."""
    if array.dtype.kind in "OSU":
        return "BYTES"
    return next(name for name, dtype in NUMPY_DTYPES.items() if np.dtype(dtype) == array.dtype)


def raw_bytes(array: Array) -> bytes:
    """The tensor contents as Triton takes them (BYTES: each item length-prefixed, ``str`` as UTF-8)."""
    if array.dtype.kind not in "OSU":
        return np.ascontiguousarray(array).tobytes()
    chunks = []
    for item in array.reshape(-1).tolist():
        data = item if isinstance(item, bytes) else str(item).encode()
        chunks.append(len(data).to_bytes(4, "little") + data)
    return b"".join(chunks)


def http_body(arrays: dict[str, Array], outputs: list[str]) -> tuple[bytes, dict[str, str]]:
    """A request in Triton's binary tensor extension: JSON header, then raw tensor bytes."""
    raws = {name: raw_bytes(array) for name, array in arrays.items()}
    header = {
        "inputs": [
            {
                "name": name,
                "shape": list(array.shape),
                "datatype": wire_datatype(array),
                "parameters": {"binary_data_size": len(raws[name])},
            }
            for name, array in arrays.items()
        ],
        "outputs": [{"name": name, "parameters": {"binary_data": True}} for name in outputs],
    }
    head = json.dumps(header, separators=(",", ":")).encode()
    body = head + b"".join(raws.values())
    headers = {
        "Content-Type": "application/octet-stream",
        "Inference-Header-Content-Length": str(len(head)),
        "Connection": "keep-alive",
    }
    return body, headers


def http_request(model: str, host: str, port: int, arrays: dict[str, Array], outputs: list[str]) -> bytes:
    """The whole HTTP/1.1 inference request, head and body."""
    body, headers = http_body(arrays, outputs)
    head = f"POST /v2/models/{model}/infer HTTP/1.1\r\nHost: {host}:{port}\r\n"
    head += "".join(f"{key}: {value}\r\n" for key, value in headers.items())
    head += f"Content-Length: {len(body)}\r\n\r\n"
    return head.encode() + body


def grpc_request(model: str, arrays: dict[str, Array], outputs: list[str]) -> Any:
    """A ``ModelInferRequest`` with raw tensor contents."""
    from tritonclient.grpc import service_pb2

    request = service_pb2.ModelInferRequest(model_name=model)
    for name, array in arrays.items():
        tensor = request.inputs.add()
        tensor.name = name
        tensor.datatype = wire_datatype(array)
        tensor.shape.extend(array.shape)
        request.raw_input_contents.append(raw_bytes(array))
    for name in outputs:
        request.outputs.add().name = name
    return request


def batch_rows(arrays: dict[str, Array], max_batch: int) -> int:
    """Rows per request: the batch dim of the arrays when the model batches, else 1."""
    return next(iter(arrays.values())).shape[0] if max_batch > 0 else 1


# -- per-process recording ----------------------------------------------------------------


def real_lock() -> Any:
    """A lock of the OS, not gevent's (Locust monkey-patches threading)."""
    from gevent.monkey import get_original

    return get_original("_thread", "allocate_lock")()


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
        self.deferred: dict[int, dict[str, int]] = {}
        """Counts waiting for the request a greenlet records next (see :meth:`defer_count`)."""
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
        Locust's statistics use it.
        """
        with self.lock:
            window = self._window(end)
            deferred = self.deferred.pop(id(gevent.getcurrent()), None) if self.deferred else None
            if error is None:
                window.hist.record_value(min(max(int((end - start) * 1e6), LOWEST_US), HIGHEST_US))
                for name, amount in (deferred or {}).items():
                    window.counts[name] = window.counts.get(name, 0) + amount
            else:
                window.errors[error] = window.errors.get(error, 0) + 1
            if self.feed is not None:
                self.feed.add(end + self.wall_offset, end - start, error, size)

    def record_extra(self, name: str, end: float, value_s: float) -> None:
        """Count one value of a further latency (e.g. time to first response), in the window of ``end``."""
        with self.lock:
            window = self._window(end)
            hist = window.extra.get(name)
            if hist is None:
                hist = window.extra[name] = new_histogram()
            hist.record_value(min(max(int(value_s * 1e6), LOWEST_US), HIGHEST_US))

    def defer_count(self, name: str, amount: int) -> None:
        """Add to a counter in the window where this greenlet's next ``record`` counts its request.

        A stream's responses per request must land in the same window as the request itself,
        which is counted a moment later (by the user that sent it), possibly in the next window.
        """
        with self.lock:
            pending = self.deferred.setdefault(id(gevent.getcurrent()), {})
            pending[name] = pending.get(name, 0) + amount

    def count(self, name: str, when: float, amount: int = 1) -> None:
        """Add to a further counter (e.g. responses received) in the window of ``when``."""
        with self.lock:
            window = self._window(when)
            window.counts[name] = window.counts.get(name, 0) + amount

    def sent(self, when: float, lag_s: float, held: bool = False) -> None:
        """Count one request leaving; ``lag_s`` is how late it left against its schedule.

        A send that was held back (``held``) left late because the in-flight cap was reached,
        not because the generator fell behind: its wait goes to ``max_hold_us``, not ``late``.
        """
        with self.lock:
            window = self._window(when)
            window.sent += 1
            if held:
                window.max_hold_us = max(window.max_hold_us, lag_s * 1e6)
                return
            if lag_s > LATE_S:
                window.late += 1
            window.max_lag_us = max(window.max_lag_us, lag_s * 1e6)

    def hold(self, scheduled: float) -> None:
        """Count one send held back at its scheduled time (the in-flight cap was reached)."""
        with self.lock:
            self._window(scheduled).held_back += 1

    def drain(self, everything: bool) -> list[WindowRecord]:
        """Windows that are over (or all of them), encoded for the master."""
        now_index = int((time.time() - self.t0) // self.window_s)
        with self.lock:
            ready = sorted(i for i in self.windows if everything or i < now_index)
            popped = [self.windows.pop(index) for index in ready]
        return [window.record(everything) for window in popped]


# -- Locust's own statistics, fed in batches ------------------------------------------------


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


# -- master side: merge and write ---------------------------------------------------------


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

    def reset(self) -> None:
        """Forget the figures of an earlier test (a master whose web UI starts another one)."""
        self.total = new_histogram()
        self.errors: dict[str, int] = {}
        self.held_back = 0
        self.sent = self.late = 0
        self.max_lag_us = self.max_hold_us = 0.0
        self.extra: dict[str, HdrHistogram] = {}
        self.counts: dict[str, int] = {}
        self.workers: dict[str, int] = {}  # requests (ok and failed) by worker
        self.parts: dict[str, WorkerPart] = {}
        self.finals: set[str] = set()
        """Workers whose last windows (sent as their test stopped) have arrived."""
        self.lost: dict[str, float] = {}
        """Workers the master lost (and not back), with the epoch it noticed."""
        self.open_windows: dict[int, MergedWindow] = {}
        self.kept: dict[int, dict[str, float | None]] = {}
        """Each window's figures once merged: ``index``, ``qps``, ``p99_us``, ``errors``."""
        self.partial: set[int] = set()
        """Windows cut short by the test's stop."""
        self.started = time.monotonic()
        self.started_at = time.time()
        self.stopped: float | None = None
        self.last_final: float | None = None
        self.interrupted = False
        """The process was told to quit while the test ran."""
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
        elapsed = self.end() - self.started
        counts = f"{requests} requests in {elapsed:.1f} s ({requests / max(elapsed, 1e-9):.1f} req/s), "
        counts += f"errors {failed}" + (f" {self.errors}" if failed else "")
        if self.held_back:
            counts += f", {self.held_back} sends held back at the in-flight cap"
        pcts = ", ".join(f"p{p:g} {h.get_value_at_percentile(p)} µs" for p in (50, 90, 95, 99, 99.9))
        latency = f"{pcts}; max {h.get_max_value()} µs" if h.get_total_count() else "no successful request"
        workers = ", ".join(f"{worker} {n}" for worker, n in sorted(self.workers.items()))
        return f"tritongen: {counts}; {latency}; per worker: {workers}"


# -- master side: the run's report ------------------------------------------------------------
# At the end of a test the master (or a lone local runner) prints the merged figures with the
# server's own (statistics API: queue and compute time, batch size) and its CPU and GPU
# utilisation (metrics endpoint, sampled every second), writes them as a ``tritongen.loadtest/1``
# document (``--triton-json``) and appends them to ``--triton-results`` as one ``summary`` line.
# Only the master talks to the server this way, from greenlets with short timeouts; a failure
# leaves those figures null and says so in one line.

SCHEMA = "tritongen.loadtest/1"
"""The document ``--triton-json`` writes (``tritongen.loadtest.result``)."""
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
STABILITY_WINDOWS, STABILITY_TOLERANCE = 3, 0.10
"""Stable: the last complete windows agree within this on throughput and on P99."""
CONFIDENCE = 0.95
SUMMARY_KEY = "summary"
"""The key of the ``--triton-results`` line that holds the run's report (readers skip it)."""
SERVER_TIMEOUT_S = 2.0
"""Timeout of each call to the statistics API or the metrics endpoint."""
METRICS_INTERVAL_S = 1.0
FINAL_WAIT_S = 2.0
"""How long the report waits for the workers' last windows, beyond their stop timeout."""


def say(line: str) -> None:
    """Print one line of the master's."""
    print(f"tritongen: {line}", flush=True)


def failure_text(error: BaseException) -> str:
    """A failed call to the server in a few words."""
    from urllib.error import HTTPError

    if isinstance(error, HTTPError):
        return f"HTTP {error.code}"
    return str(getattr(error, "reason", None) or error) or type(error).__name__


def utilisation(found: dict[str, list[float]]) -> dict[str, float]:
    """Each figure over its label sets (GPUs): memory summed, utilisation averaged."""
    return {
        figure: (sum(values) if figure in SUMMED_FIGURES else sum(values) / len(values))
        for figure, values in found.items()
        if values
    }


def parse_metric_lines(text: str) -> dict[str, list[float]]:
    """The utilisation samples of Prometheus text, without ``prometheus_client``.

    Tolerant: comments, other metrics and lines it cannot read are skipped. A sample line is
    ``name[{labels}] value [timestamp]``; the labels end at the line's last ``}``.
    """
    found: dict[str, list[float]] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        brace = line.find("{")
        if brace >= 0:
            name, rest = line[:brace].strip(), line[line.rfind("}") + 1 :]
        else:
            name, _, rest = line.partition(" ")
        figure = UTILISATION_METRICS.get(name)
        parts = rest.split()
        if figure is None or not parts:
            continue
        try:
            value = float(parts[0])
        except ValueError:
            continue
        found.setdefault(figure, []).append(value)
    return found


def parse_metrics(text: str) -> dict[str, float]:
    """Utilisation figures of Prometheus text: ``prometheus_client``'s parser where it is installed."""
    try:
        from prometheus_client.parser import text_string_to_metric_families
    except ImportError:
        return utilisation(parse_metric_lines(text))
    found: dict[str, list[float]] = {}
    for family in text_string_to_metric_families(text):
        figure = UTILISATION_METRICS.get(family.name)
        if figure is not None:
            for sample in family.samples:
                if sample.name == family.name:
                    found.setdefault(figure, []).append(float(sample.value))
    return utilisation(found)


def metrics_url(option: str, host: str) -> str:
    """``--triton-metrics-url``: ``none`` for none, default the Triton host's port 8002."""
    if option.strip().lower() == "none":
        return ""
    return option or f"http://{host_port(host, 8000)[0]}:8002/metrics"


@dataclass
class UtilisationSampler:
    """On the master: the metrics endpoint scraped every second in a greenlet."""

    url: str
    samples: list[dict[str, float]] = field(default_factory=list)
    failures: int = 0
    greenlet: Any = None

    def start(self) -> UtilisationSampler:
        """Start scraping."""
        self.greenlet = gevent.spawn(self._loop)
        return self

    def stop(self) -> None:
        """Stop scraping."""
        if self.greenlet is not None:
            self.greenlet.kill(block=False)

    def _loop(self) -> None:
        while True:
            started = time.monotonic()
            self.sample()
            gevent.sleep(max(0.0, METRICS_INTERVAL_S - (time.monotonic() - started)))

    def sample(self) -> None:
        """Scrape once; the first failure says so in one line."""
        try:
            with urllib.request.urlopen(self.url, timeout=SERVER_TIMEOUT_S) as response:
                text = response.read().decode("utf-8", errors="replace")
            self.samples.append(parse_metrics(text))
        except Exception as e:  # an endpoint down or garbled: no figures, never a failed run
            self.failures += 1
            if self.failures == 1:
                say(f"no CPU/GPU figures from the metrics endpoint {self.url}: {failure_text(e)}")

    def summary(self, kind: str) -> dict[str, Any] | None:
        """``util_mean``, ``util_max`` (0..1), ``mem_max_bytes`` of ``cpu`` or ``gpu``; None without any."""
        utils = [s[f"{kind}_util"] for s in self.samples if f"{kind}_util" in s]
        mems = [s[f"{kind}_mem_bytes"] for s in self.samples if f"{kind}_mem_bytes" in s]
        if not utils and not mems:
            return None
        figures: dict[str, Any] = {
            "util_mean": sum(utils) / len(utils) if utils else None,
            "util_max": max(utils) if utils else None,
            "mem_max_bytes": int(max(mems)) if mems else None,
            "source": "triton",
        }
        if kind == "gpu":
            figures |= {"memory_scope": "device", "devices": []}
        return figures


def grpc_stub(host: str) -> tuple[Any, Any]:
    """A gRPC channel to the server (gevent-friendly) and its stub."""
    import grpc
    from grpc.experimental import gevent as grpc_gevent
    from tritonclient.grpc import service_pb2_grpc

    grpc_gevent.init_gevent()
    channel = grpc.insecure_channel("{}:{}".format(*host_port(host, 8001)))
    return channel, service_pb2_grpc.GRPCInferenceServiceStub(channel)


def server_get(host: str, path: str) -> Any:
    """GET a JSON document from the server's HTTP API."""
    name, port = host_port(host, 8000)
    with urllib.request.urlopen(f"http://{name}:{port}{path}", timeout=SERVER_TIMEOUT_S) as response:
        return json.loads(response.read())


def model_statistics(host: str, protocol: str, model: str) -> list[dict[str, Any]]:
    """The model's ``model_stats`` entries (one per version), over the load's own protocol."""
    if protocol != "grpc":
        return list(server_get(host, f"/v2/models/{model}/stats").get("model_stats", []))
    from google.protobuf import json_format
    from tritonclient.grpc import service_pb2

    channel, stub = grpc_stub(host)
    with channel:
        reply = stub.ModelStatistics(service_pb2.ModelStatisticsRequest(name=model), timeout=SERVER_TIMEOUT_S)
    return list(json_format.MessageToDict(reply, preserving_proto_field_name=True).get("model_stats", []))


def model_max_batch(host: str, protocol: str, model: str) -> int:
    """The model's ``max_batch_size``."""
    if protocol != "grpc":
        return int(server_get(host, f"/v2/models/{model}/config").get("max_batch_size", 0))
    from tritonclient.grpc import service_pb2

    channel, stub = grpc_stub(host)
    with channel:
        reply = stub.ModelConfig(service_pb2.ModelConfigRequest(name=model), timeout=SERVER_TIMEOUT_S)
    return int(reply.config.max_batch_size)


def stats_counters(entries: list[dict[str, Any]]) -> dict[str, int]:
    """Cumulative counters over the model's versions: inferences, executions, and ns and count per phase."""
    counters: dict[str, int] = {}

    def add(key: str, value: Any) -> None:
        counters[key] = counters.get(key, 0) + int(value or 0)

    for entry in entries:
        add("inferences", entry.get("inference_count"))
        add("executions", entry.get("execution_count"))
        for phase in SERVER_KEYS:
            figures = entry.get("inference_stats", {}).get(phase, {})
            add(f"{phase}_ns", figures.get("ns"))
            add(f"{phase}_count", figures.get("count"))
    return counters


def server_breakdown(
    before: dict[str, int], after: dict[str, int]
) -> tuple[dict[str, float | None], float | None]:
    """µs per request in each phase and the mean batch between two snapshots (as the package's)."""

    def delta(key: str) -> int:
        return after.get(key, 0) - before.get(key, 0)

    server_us = {
        phase: delta(f"{phase}_ns") / delta(f"{phase}_count") / 1000 if delta(f"{phase}_count") > 0 else None
        for phase in SERVER_KEYS
    }
    executions = delta("executions")
    return server_us, (max(1.0, delta("inferences") / executions) if executions > 0 else None)


def latency_figures(hist: HdrHistogram) -> dict[str, float]:
    """P50…P99.9, mean and max in µs."""
    figures = {key: float(hist.get_value_at_percentile(p)) for key, p in PERCENTILES.items()}
    return figures | {"mean": float(hist.get_mean_value()), "max": float(hist.get_max_value())}


def is_stable(windows: list[dict[str, float | None]]) -> bool:
    """The last complete windows agree within 10% on throughput and on P99 (the package's rule)."""
    last = windows[-STABILITY_WINDOWS:]
    if len(last) < STABILITY_WINDOWS:
        return False
    for key in ("qps", "p99_us"):
        values = [float(w[key] or 0.0) for w in last]
        mean = sum(values) / len(values)
        if mean <= 0 or any(abs(v - mean) > STABILITY_TOLERANCE * mean for v in values):
            return False
    return True


def one_round(value: float) -> dict[str, Any]:
    """A figure measured once, as a level summary holds it (no interval)."""
    return {
        "median": value,
        "ci_low": None,
        "ci_high": None,
        "cv": None,
        "mean": value,
        "rounds": 1,
        "confidence": CONFIDENCE,
        "values": [value],
    }


def level_of(run: dict[str, Any]) -> dict[str, Any]:
    """The document's ``levels`` entry of its one run."""
    ok = run["status"] == "ok"
    latency = run["latency_us"] if ok and run["latency_us"] else {}
    concurrency = run["mode"] == "concurrency"
    return {
        "mode": run["mode"],
        "concurrency" if concurrency else "target_rate": run["concurrency" if concurrency else "target_rate"],
        "rounds": 1 if ok else 0,
        "infer_per_s": one_round(run["infer_per_s"]) if ok else None,
        "qps": one_round(run["qps"]) if ok else None,
        "latency_us": {k: one_round(v) for k, v in latency.items() if k != "max"},
    }


@dataclass(frozen=True)
class ServerFigures:
    """What the report adds from the server: the statistics API and the metrics endpoint."""

    server_us: dict[str, float | None] | None
    avg_batch: float | None
    cpu: dict[str, Any] | None
    gpu: dict[str, Any] | None
    rows: int
    """Rows per request (the batch dim where the model batches, else 1)."""


def request_rows(options: TritonOptions, max_batch: int | None) -> int:
    """Rows per request: the request data's batch dim (or ``--triton-batch-size``) where the model batches."""
    if max_batch == 0:
        return 1
    if options.inputs:
        try:
            return batch_rows(read_steps(options.inputs, "--triton-inputs")[0], max_batch or 1)
        except Exception:  # a master without the workers' data: the option's value
            return options.batch_size
    return options.batch_size


def worker_figures(collector: Collector) -> dict[str, dict[str, Any]]:
    """Each worker's part: ``requests``, ``errors``, ``ok``, ``lost``, ``lost_at_s``, ``histogram``."""
    figures: dict[str, dict[str, Any]] = {}
    for worker, part in sorted(collector.parts.items()):
        lost_at = collector.lost.get(worker)
        figures[worker] = {
            "requests": part.ok + part.errors,
            "errors": part.errors,
            "ok": part.ok,
            "lost": lost_at is not None,
            "lost_at_s": None if lost_at is None else round(lost_at - collector.started_at, 3),
            "histogram": base64.b64encode(part.hist.encode()).decode() if part.ok else "",
        }
    return figures


def run_result(
    collector: Collector, options: TritonOptions, users: int, server: ServerFigures
) -> dict[str, Any]:
    """The run as the package's ``RunResult`` holds it (every field)."""
    duration = max(collector.end() - collector.started, 1e-6)
    ok, failed = collector.total.get_total_count(), sum(collector.errors.values())
    qps = ok / duration
    status, reason = ("ok", None) if ok + failed else ("aborted", "no requests")
    if collector.interrupted:
        status, reason = "interrupted", "told to quit while the test ran"
    rate = options.user_rate > 0
    windows = [collector.kept[index] for index in sorted(collector.kept)]
    complete = [w for w in windows[1:] if int(w["index"] or 0) not in collector.partial]
    return {
        "mode": "rate" if rate else "concurrency",
        "concurrency": None if rate else users,
        "target_rate": options.user_rate * users if rate else None,
        "batch_size": server.rows,
        "duration_s": round(duration, 3),
        "requests": ok + failed,
        "errors": failed,
        "errors_by_kind": dict(sorted(collector.errors.items())),
        "qps": qps,
        "infer_per_s": qps * server.rows,
        "latency_us": latency_figures(collector.total) if ok else None,
        "server_us": server.server_us,
        "avg_batch": server.avg_batch,
        "stable": is_stable(complete),
        "gpu": server.gpu,
        "cpu": server.cpu,
        "status": status,
        "reason": reason,
        "processes": max(1, len(collector.parts)),
        "achieved_rate": collector.sent / duration if rate else None,
        "late_sends": collector.late,
        "max_send_lag_us": collector.max_lag_us,
        "held_back_sends": collector.held_back,
        "max_hold_us": collector.max_hold_us,
        "warnings": [],
        "windows": windows,
        "round": 1,
        "models": {},
        "server_models": {},
        "latencies_us": {
            k: latency_figures(h) for k, h in sorted(collector.extra.items()) if h.get_total_count()
        },
        "counts": dict(sorted(collector.counts.items())),
        "streaming": bool(options.streaming),
        "responses_per_s": None,
        "responses_per_request": None,
        "sequences_per_s": None,
        "requests_per_sequence": None,
        "workers": worker_figures(collector),
    }


def report_document(options: TritonOptions, url: str, run: dict[str, Any]) -> dict[str, Any]:
    """The ``tritongen.loadtest/1`` document of one run (``tritongen report`` renders it)."""
    import platform

    return {
        "schema": SCHEMA,
        "tritongen_version": None,
        "written_by": "locustfile",
        "model": options.model,
        "protocol": options.protocol,
        "url": url,
        "status": run["status"],
        "rounds": 1,
        "confidence": CONFIDENCE,
        "shared_memory": options.shared_memory,
        "host": {"machine": platform.machine(), "python": platform.python_version()},
        "runs": [run],
        "levels": [level_of(run)],
    }


def figures_text(figures: dict[str, Any] | None) -> str:
    """CPU or GPU utilisation and peak memory in words."""
    if figures is None:
        return "no figures"
    parts = []
    if figures["util_mean"] is not None:
        parts.append(f"util mean {figures['util_mean'] * 100:.1f} %, max {figures['util_max'] * 100:.1f} %")
    if figures["mem_max_bytes"] is not None:
        parts.append(f"memory peak {figures['mem_max_bytes'] / 2**30:.2f} GiB")
    return "; ".join(parts)


def report_lines(run: dict[str, Any], options: TritonOptions, url: str) -> list[str]:
    """The report's lines after the summary line."""
    load = (
        f"concurrency {run['concurrency']}"
        if run["mode"] == "concurrency"
        else f"{run['target_rate']:g} req/s"
    )
    errors = ", ".join(f"{kind} {n}" for kind, n in run["errors_by_kind"].items())
    lines = [
        f"tritongen report: {options.model} at {url} ({options.protocol}), {load}, "
        f"batch {run['batch_size']}, {run['duration_s']:.1f} s, {len(run['workers'])} worker(s)",
        f"  requests    {run['requests']} (ok {run['requests'] - run['errors']}, errors {run['errors']}"
        + (f": {errors})" if errors else ")"),
        f"  throughput  {run['qps']:.1f} successful req/s, {run['infer_per_s']:.1f} inferences/s",
    ]
    latency = run["latency_us"]
    names = {"p999": "p99.9"}
    lines.append(
        "  latency µs  " + "  ".join(f"{names.get(k, k)} {latency[k]:.0f}" for k in LATENCY_KEYS)
        if latency
        else "  latency µs  no successful request"
    )
    server = run["server_us"]
    if server is None:
        lines.append("  server µs   no statistics")
    else:
        phases = "  ".join(
            f"{phase.replace('_', ' ')} " + ("-" if server[phase] is None else f"{server[phase]:.1f}")
            for phase in SERVER_KEYS
        )
        batch = "-" if run["avg_batch"] is None else f"{run['avg_batch']:.2f}"
        lines.append(f"  server µs   {phases}; avg batch {batch}")
    lines.append(f"  cpu         {figures_text(run['cpu'])}")
    lines.append(f"  gpu         {figures_text(run['gpu'])}")
    parts = ", ".join(f"{worker} {part['requests']}" for worker, part in run["workers"].items())
    lines.append(f"  workers     {parts or 'none'}")
    lines.append(f"  stable      {'yes' if run['stable'] else 'no'} (the last 3 complete windows within 10%)")
    return lines


def write_document(path: str, document: dict[str, Any]) -> None:
    """Write ``--triton-json`` whole or not at all; a failure is one line."""
    temp = ""
    try:
        handle, temp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)), prefix=".tritongen-")
        with os.fdopen(handle, "w") as out:
            out.write(json.dumps(document, indent=2) + "\n")
        os.replace(temp, path)
    except OSError as e:
        say(f"cannot write --triton-json {path}: {e.strerror or e}")
        if temp:
            with contextlib.suppress(OSError):
                os.unlink(temp)
        return
    say(f"wrote {path}")


def stop_workers(environment: Any) -> None:
    """On a master: tell the workers still running to stop, so that their last windows come in now.

    A headless master's ``--run-time`` (or its last worker gone) quits the test without
    stopping the workers first: they would stop on the quit message, after the master
    stopped listening, and their last windows would be lost.
    """
    runner = environment.runner
    if not isinstance(runner, MasterRunner):
        return
    from locust.rpc import Message
    from locust.runners import STATE_RUNNING, STATE_SPAWNING

    for client in runner.clients.all:
        if client.state in (STATE_RUNNING, STATE_SPAWNING):
            runner.server.send_to_client(Message("stop", None, client.id))
            STOPPED.add(str(client.id))


STOPPED: set[str] = set()
"""Workers :func:`stop_workers` stopped: Locust forgets a stopped worker until it says it is ready
again, so its own quit message would miss them."""


def quit_stopped_workers(environment: Any) -> None:
    """On a headless master (one test, then it quits): send quit to the workers it stopped itself."""
    runner = environment.runner
    if not isinstance(runner, MasterRunner) or not getattr(environment.parsed_options, "headless", False):
        return
    from locust.rpc import Message

    for worker in sorted(STOPPED):
        runner.server.send_to_client(Message("quit", None, worker))
    STOPPED.clear()


def server_host(environment: Any) -> str:
    """The Triton server the load goes to (``--host``)."""
    return str(environment.host or getattr(environment.parsed_options, "host", "") or "127.0.0.1:8000")


@dataclass
class MasterReport:
    """On the master (or a lone local runner): the server's figures around each test, and its report.

    The statistics API is read when the test starts and once its last windows are in; the
    metrics endpoint is scraped every second in between. The report waits for every worker's
    last windows (their stop timeout and ``FINAL_WAIT_S`` at most).
    """

    before: dict[str, int] | None = None
    max_batch: int | None = None
    sampler: UtilisationSampler | None = None
    done: bool = False
    started: bool = False
    """Whether a test has started (a process that quits without one reports nothing)."""

    def on_test_start(self, environment: Any, **_: Any) -> None:
        """Forget the last test; read the model's statistics and start scraping the metrics endpoint."""
        if STATE.collector is None:
            return
        STATE.collector.reset()
        if self.sampler is not None:
            self.sampler.stop()
        self.done, self.before, self.max_batch, self.started = False, None, None, True
        options = TritonOptions.from_parsed(environment.parsed_options)
        host = server_host(environment)
        try:
            self.max_batch = model_max_batch(host, options.protocol, options.model)
            self.before = stats_counters(model_statistics(host, options.protocol, options.model))
        except Exception as e:  # the load goes on; the report has no server figures
            say(f"no server statistics for {options.model}: {failure_text(e)}")
        url = metrics_url(options.metrics_url, host)
        self.sampler = UtilisationSampler(url).start() if url else None

    def on_test_stopping(self, environment: Any, **_: Any) -> None:
        """Note when the test stopped."""
        if STATE.collector is not None and STATE.collector.stopped is None:
            STATE.collector.stopped = time.monotonic()

    def on_test_stop(self, environment: Any, **_: Any) -> None:
        """Report once the workers' last windows are in (workers still running are stopped first)."""
        if self.done:
            return
        self.on_test_stopping(environment)
        stop_workers(environment)
        deadline = time.monotonic() + FINAL_WAIT_S + float(getattr(environment, "stop_timeout", 0) or 0)
        while time.monotonic() < deadline and not self.all_final(environment):
            gevent.sleep(0.05)
        self.finish(environment)
        quit_stopped_workers(environment)

    def on_quitting(self, environment: Any, **_: Any) -> None:
        """Report a test still running when the process is told to quit (SIGTERM, Ctrl-C).

        A lone local runner stops its users first. A master reports what its workers have
        sent so far: they stop on its quit message, and a stop message first would hold a
        worker's quit back by its stop timeout (``tritongen loadtest --master`` stops each
        run's master this way and reads the windows itself).
        """
        from locust.runners import STATE_RUNNING, STATE_SPAWNING

        runner, collector = environment.runner, STATE.collector
        if collector is not None and runner is not None and runner.state in (STATE_RUNNING, STATE_SPAWNING):
            collector.interrupted = True
            if not isinstance(runner, MasterRunner):
                runner.stop()  # test_stop: this process's last windows, then the report
        self.finish(environment)

    @staticmethod
    def all_final(environment: Any) -> bool:
        """Whether every worker still loading has sent its last windows.

        A worker that has stopped (Locust drops it from the clients) sent them before saying so.
        """
        from locust.runners import STATE_RUNNING, STATE_SPAWNING, STATE_STOPPING

        collector, runner = STATE.collector, environment.runner
        if collector is None or not isinstance(runner, MasterRunner):
            return True  # a lone local runner hands its last windows over as its test stops
        loading = (STATE_RUNNING, STATE_SPAWNING, STATE_STOPPING)
        return all(str(c.id) in collector.finals for c in runner.clients.all if c.state in loading)

    def finish(self, environment: Any) -> None:
        """Print the report, write ``--triton-json`` and the ``summary`` line of ``--triton-results``."""
        collector = STATE.collector
        if collector is None or self.done or not self.started:
            return
        self.done = collector.printed = True
        if self.sampler is not None:
            self.sampler.stop()
        collector.keep_windows(everything=True)
        options = TritonOptions.from_parsed(environment.parsed_options)
        host = server_host(environment)
        url = "{}:{}".format(*host_port(host, 8001 if options.protocol == "grpc" else 8000))
        users = int(getattr(environment.runner, "target_user_count", 0) or 0)
        users = users or int(getattr(environment.parsed_options, "num_users", 0) or 0)
        run = run_result(collector, options, users, self.server_figures(host, options))
        print("\n".join([collector.summary(), *report_lines(run, options, url)]), flush=True)
        if options.json:
            write_document(options.json, report_document(options, url, run))
        if collector.path:
            with open(collector.path, "a") as out:
                out.write(json.dumps({SUMMARY_KEY: run, "at": time.time()}) + "\n")

    def server_figures(self, host: str, options: TritonOptions) -> ServerFigures:
        """The statistics API's figures since the test started, and the metrics endpoint's."""
        server_us: dict[str, float | None] | None = None
        avg_batch = None
        if self.before is not None:
            try:
                after = stats_counters(model_statistics(host, options.protocol, options.model))
                server_us, avg_batch = server_breakdown(self.before, after)
            except Exception as e:  # the report goes on without them
                say(f"no server statistics for {options.model} after the test: {failure_text(e)}")
        sampler = self.sampler
        return ServerFigures(
            server_us=server_us,
            avg_batch=avg_batch,
            cpu=sampler.summary("cpu") if sampler is not None else None,
            gpu=sampler.summary("gpu") if sampler is not None else None,
            rows=request_rows(options, self.max_batch),
        )

    def register(self, environment: Any) -> None:
        """Listen to the test's events (after this file's own listeners: last windows first)."""
        events_ = environment.events
        events_.test_start.add_listener(self.on_test_start)
        events_.test_stopping.add_listener(self.on_test_stopping)
        events_.test_stop.add_listener(self.on_test_stop)
        events_.quitting.add_listener(self.on_quitting)


REPORT = MasterReport()


# -- distributed load: remote workers, lost workers, the master's request data ----------------

INPUTS_REQUEST = "tritongen_inputs_request"
"""A worker without the master's ``--triton-inputs`` file at the same path asks the master for it."""
INPUTS_REPLY = "tritongen_inputs"
INPUTS_WAIT_S = 30.0
"""How long a worker waits for the master's request data."""
WATCH_WORKERS_S = 0.5
MASTER_SILENT_ENV = "TRITONGEN_MASTER_SILENT_S"
"""A worker whose master sent no heartbeat for this many seconds quits (the master is gone).

``tritongen loadtest --worker`` sets it short, since it joins a fresh master per run; unset (processes
forked by a local master, a worker in a cluster) the limit is Locust's own minute, so a busy machine
does not stop a worker early."""
MASTER_SILENT_DEFAULT_S = 60.0
WORKER_FAILURE = "tritongen worker: "
"""Prefix of the one line a worker prints when it cannot load (e.g. no request data)."""
WORKER_JOINED = "tritongen worker joined the master"
"""The line a worker prints once its master has answered (its first heartbeat)."""
WORKER_TOTAL = "tritongen worker total: "
"""Prefix of the line a worker prints when it quits: its id and the requests (ok and failed) it reported."""
MAX_INPUTS_BYTES = 64 * 2**20
"""A master sends its request data to workers up to this size (beyond it, copy the file to each)."""


class LostLine(TypedDict):
    """A line of ``--triton-results``: the master lost a worker (no heartbeat, or it quit), or it is back."""

    worker: str
    lost: bool
    """True: lost; False: its heartbeats resumed (a stall, e.g. on a busy machine)."""
    at: float
    """Epoch at which the master noticed."""


@dataclass
class WorkerWatch:
    """On a master: the workers seen during the test, and those written as lost (and not back)."""

    seen: set[str] = field(default_factory=set)
    lost: set[str] = field(default_factory=set)

    def changes(self, present: set[str], missing: set[str], running: bool) -> list[tuple[str, bool]]:
        """``(worker, lost)`` for each worker lost (True) or back (False) since the last look.

        A missing worker (no heartbeat for a few seconds) is lost whatever the test's state: when
        the last one goes missing, Locust stops the test in the same tick. A worker gone from the
        clients quit, which counts only while the test runs (at its end every worker quits). A
        lost worker whose heartbeats resume is back.
        """
        self.seen |= present | missing
        gone = self.seen - present - missing
        newly = (missing | (gone if running else set())) - self.lost
        back = present & self.lost
        self.lost = (self.lost | newly) - back
        return sorted([(worker, True) for worker in newly] + [(worker, False) for worker in back])


def watch_workers(environment: Any, path: str) -> None:
    """On a master: write a line for each worker Locust loses, and for each one that comes back."""
    from locust.runners import STATE_MISSING, STATE_RUNNING, STATE_SPAWNING

    watch = WorkerWatch()
    while True:
        gevent.sleep(WATCH_WORKERS_S)
        runner = environment.runner
        clients = list(runner.clients.all)
        present = {str(c.id) for c in clients if c.state != STATE_MISSING}
        missing = {str(c.id) for c in clients if c.state == STATE_MISSING}
        running = runner.state in (STATE_RUNNING, STATE_SPAWNING)
        for worker, lost in watch.changes(present, missing, running):
            if STATE.collector is not None:
                STATE.collector.note_lost(worker, lost)
            said = f"tritongen: lost worker {worker}" if lost else f"tritongen: worker {worker} is back"
            print(said, flush=True)
            if path:
                with open(path, "a") as out:
                    out.write(json.dumps(LostLine(worker=worker, lost=lost, at=time.time())) + "\n")


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


def read_inputs(path: str, limit: int = MAX_INPUTS_BYTES) -> dict[str, str]:
    """A master's reply to a worker without its request data: the file's bytes in base64, or why not."""
    try:
        size = os.path.getsize(path)
        if size > limit:
            mib, limit_mib = size / 2**20, limit / 2**20
            return {
                "data": "",
                "error": f"--triton-inputs {path} is {mib:.0f} MiB, more than the {limit_mib:.0f} MiB a "
                "master sends its workers: copy the file to the same path on each worker",
            }
        with open(path, "rb") as data:
            return {"data": base64.b64encode(data.read()).decode(), "error": ""}
    except OSError as e:
        return {"data": "", "error": f"the master cannot read --triton-inputs {path}: {e.strerror}"}
    except Exception as e:  # whatever it is, the worker says it in its one line
        return {"data": "", "error": f"the master cannot send --triton-inputs {path}: {e}"}


@dataclass
class InputsSender:
    """On a master: its ``--triton-inputs`` file read and encoded once, in a thread, for every worker."""

    reply: dict[str, str] | None = None
    lock: gevent.lock.Semaphore = field(default_factory=gevent.lock.Semaphore)

    def send(self, environment: Any, msg: Any, **_: Any) -> None:
        """Send a connected worker this master's ``--triton-inputs`` file (never another path)."""
        runner = environment.runner
        if msg.node_id not in runner.clients:
            return
        with self.lock:
            if self.reply is None:
                path = environment.parsed_options.triton_inputs
                self.reply = gevent.get_hub().threadpool.apply(read_inputs, (path,))
        runner.send_message(INPUTS_REPLY, self.reply, client_id=msg.node_id)


INPUTS_SENDER = InputsSender()


@dataclass
class InputsCopy:
    """On a worker: the master's request data, written to a file of this machine."""

    event: gevent.event.Event = field(default_factory=gevent.event.Event)
    path: str = ""
    error: str = ""
    requested: bool = False

    def receive(self, environment: Any, msg: Any, **_: Any) -> None:
        """Keep the master's reply: the file's bytes, or why it could not send them."""
        self.error = str(msg.data.get("error", ""))
        if not self.error:
            handle, self.path = tempfile.mkstemp(prefix="tritongen-inputs-", suffix=".npz")
            with os.fdopen(handle, "wb") as out:
                out.write(base64.b64decode(msg.data["data"]))
        self.event.set()

    def remove(self) -> None:
        """Delete the local copy."""
        if self.path:
            with contextlib.suppress(OSError):
                os.unlink(self.path)


INPUTS = InputsCopy()


def fail_worker(environment: Any, reason: str) -> None:
    """Say in one line why this worker cannot load, and quit (the master notes the worker as lost).

    Raises:
        RuntimeError: Always, to stop the user that found the problem.
    """
    print(WORKER_FAILURE + reason, flush=True)
    environment.process_exit_code = 3
    gevent.spawn(environment.runner.quit)
    raise RuntimeError(reason)


def worker_options(environment: Any, options: TritonOptions) -> TritonOptions:
    """The options of a user: on a remote worker, ``--triton-inputs`` becomes the master's data.

    A worker on the master's machine (``--processes``) reads the file in place; another one
    asks the master for it once, so data files need to exist only where the master runs.
    """
    runner = environment.runner
    if not isinstance(runner, WorkerRunner) or not options.inputs or os.path.exists(options.inputs):
        return options
    if not INPUTS.requested:
        INPUTS.requested = True
        runner.send_message(INPUTS_REQUEST, {})
    if not INPUTS.event.wait(timeout=INPUTS_WAIT_S):
        fail_worker(environment, f"the master sent no request data within {INPUTS_WAIT_S:.0f} s")
    if INPUTS.error:
        fail_worker(environment, INPUTS.error)
    return replace(options, inputs=INPUTS.path)


def watch_master(environment: Any) -> None:
    """On a worker: say once the master has answered; quit when it has been silent too long (it is gone).

    tritongen starts a fresh master per run; a worker still bound to the last one would wait
    a minute (Locust's own limit) before it could join the next (see ``MASTER_SILENT_ENV``).
    """
    silent_s = float(os.environ.get(MASTER_SILENT_ENV) or MASTER_SILENT_DEFAULT_S)
    started = time.time()
    joined = False
    while True:
        gevent.sleep(0.5)
        runner = environment.runner
        last = getattr(runner, "last_heartbeat_timestamp", None)
        if last and not joined:
            joined = True
            print(WORKER_JOINED, flush=True)
        if time.time() - (last or started) > silent_s:
            print(f"tritongen: no heartbeat from the master for {silent_s:.0f} s", flush=True)
            runner.quit()
            return


@dataclass
class WorkerTotal:
    """On a worker: the requests (ok and failed) it has reported to its master."""

    requests: int = 0

    def add(self, windows: list[WindowRecord]) -> None:
        """Count the requests of windows on their way to the master."""
        self.requests += sum(int(w["ok"]) + sum(w["errors"].values()) for w in windows)

    def say(self, environment: Any, **_: Any) -> None:
        """Print the total when the worker quits (its own count, to check the master's merge against)."""
        print(f"{WORKER_TOTAL}{worker_id(environment)} {self.requests}", flush=True)


REPORTED = WorkerTotal()


def init_distributed(environment: Any) -> None:
    """Register the messages and watchers of a master or a worker (nothing for a local runner)."""
    runner = environment.runner
    if isinstance(runner, MasterRunner):
        runner.register_message(INPUTS_REQUEST, INPUTS_SENDER.send, concurrent=True)
        gevent.spawn(watch_workers, environment, environment.parsed_options.triton_results)
    elif isinstance(runner, WorkerRunner):
        runner.register_message(INPUTS_REPLY, INPUTS.receive)
        environment.events.quitting.add_listener(REPORTED.say)
        gevent.spawn(watch_master, environment)


# -- transports -----------------------------------------------------------------------------


def error_kind(error: BaseException) -> str:
    """How a failed request is counted: a short name of what went wrong."""
    name = type(error).__name__
    if isinstance(error, ConnectionRefusedError):
        return "connection_refused"
    if isinstance(error, (ConnectionResetError, BrokenPipeError)):
        return "connection_reset"
    if "timeout" in name.lower():
        return "timeout"
    return name


def response_end(buffer: bytes) -> int:
    """Where the first HTTP response of ``buffer`` ends, once its head has arrived (0 before)."""
    end = buffer.find(b"\r\n\r\n")
    if end < 0:
        return 0
    head = buffer[:end]
    at = head.find(b"\r\nContent-Length: ")
    skip = 18
    if at < 0:
        head = head.lower()
        at = head.find(b"\r\ncontent-length:")
        skip = 17
        if at < 0:
            raise ValueError("response without Content-Length")
    line_end = head.find(b"\r\n", at + skip)
    length = int(head[at + skip : line_end if line_end > 0 else len(head)])
    return end + 4 + length


def frame_response(buffer: bytes) -> tuple[int, bytes] | None:
    """Split one complete HTTP response off ``buffer``: (status, what follows), or None if incomplete."""
    body_end = response_end(buffer)
    if not body_end or len(buffer) < body_end:
        return None
    return int(buffer[9:12]), buffer[body_end:]


class ResponseBuffer:
    """Bytes received on a connection and not yet framed into responses.

    Chunks are kept apart and joined only when the response they belong to can be complete,
    so a large response costs one copy, not one per chunk received.
    """

    def __init__(self) -> None:
        self.chunks: list[bytes] = []
        self.size = 0
        self.need = 0
        """Bytes the first response needs in all, once its head has arrived (0 before)."""
        self.last_size = 0
        """Bytes of the last response taken off (head and body)."""

    @property
    def empty(self) -> bool:
        """Whether nothing is left over."""
        return self.size == 0

    def add(self, chunk: bytes) -> None:
        """Keep bytes just received."""
        self.chunks.append(chunk)
        self.size += len(chunk)

    def next_status(self) -> int | None:
        """Take the first response off the buffer and return its HTTP status; None while it is incomplete."""
        if not self.size or self.size < self.need:
            return None
        buffer = self.chunks[0] if len(self.chunks) == 1 else b"".join(self.chunks)
        framed = frame_response(buffer)
        if framed is None:
            self.chunks, self.need = [buffer], response_end(buffer)
            return None
        status, rest = framed
        self.last_size = len(buffer) - len(rest)
        self.chunks, self.size, self.need = ([rest] if rest else []), len(rest), 0
        return status


class RawHttpConnection:
    """A keep-alive HTTP/1.1 connection that sends prepared bytes and reads just the status and body length.

    A general HTTP client spends most of its time on header objects; the request here
    never changes, so it is written once and the response is only framed, not parsed.
    """

    def __init__(self, host: str, port: int, timeout: float) -> None:
        import socket

        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.received = ResponseBuffer()

    def roundtrip(self, request: bytes) -> int:
        """Send one request and consume its response; return the HTTP status."""
        self.sock.sendall(request)
        status = self.received.next_status()
        while status is None:
            self.received.add(self._recv())
            status = self.received.next_status()
        return status

    def _recv(self) -> bytes:
        chunk: bytes = self.sock.recv(RECV_BYTES)
        if not chunk:
            raise ConnectionResetError("the server closed the connection")
        return chunk

    def close(self) -> None:
        """Close the socket."""
        self.sock.close()


class Transport(Protocol):
    """A prepared request and how to send it; ``send`` returns an error kind or None."""

    rows: int

    def new_connection(self) -> Any:
        """A fresh connection to the server."""

    def send(self, connection: Any) -> str | None:
        """Send the request once and wait for its response."""


def first_step(count: int) -> int:
    """Where a new user or connection starts in the steps (so that they do not cycle in lock-step)."""
    return (os.getpid() + next(STEP_STARTS)) % count


STEP_STARTS = itertools.count()


class HttpTransport:
    """The requests (one per step, sent in turn) as raw HTTP/1.1 bytes in Triton's binary tensor extension."""

    def __init__(self, host: str, options: TritonOptions) -> None:
        self.timeout = options.timeout
        self.host, self.port = host_port(host, 8000)
        meta, max_batch = interface_http(self.host, self.port, options.model)
        steps = build_steps(meta, max_batch, options)
        outputs = [t["name"] for t in meta["outputs"]]
        self.requests = [
            http_request(options.model, self.host, self.port, arrays, outputs) for arrays in steps
        ]
        self.step = first_step(len(self.requests))
        self.rows = batch_rows(steps[0], max_batch)

    def new_connection(self) -> RawHttpConnection:
        """A fresh keep-alive connection."""
        return RawHttpConnection(self.host, self.port, self.timeout)

    def send(self, connection: RawHttpConnection) -> str | None:
        """One round trip of the next step; a status other than 200 is the error kind ``http_<status>``."""
        step = self.step
        self.step = step + 1 if step + 1 < len(self.requests) else 0
        status = connection.roundtrip(self.requests[step])
        return None if status == 200 else f"http_{status}"

    def checkout(self) -> tuple[list[bytes], Any]:
        """What a new engine connection sends (the steps, in turn) and hands back when it closes (nothing)."""
        return self.requests, None

    def checkin(self, slot: Any) -> None:
        """Take back what ``checkout`` handed out (the request here is shared: nothing to do)."""


class GrpcTransport:
    """The request as a gRPC ``ModelInferRequest``, over gevent-friendly channels."""

    def __init__(self, host: str, options: TritonOptions) -> None:
        import grpc
        from grpc.experimental import gevent as grpc_gevent

        grpc_gevent.init_gevent()
        self.grpc = grpc
        self.timeout = options.timeout
        self.target = "{}:{}".format(*host_port(host, 8001))
        meta, max_batch = interface_grpc(self.new_connection(), options.model)
        steps = self.build_steps(meta, max_batch, options)
        outputs = [t["name"] for t in meta["outputs"]]
        self.requests = [grpc_request(options.model, arrays, outputs) for arrays in steps]
        self.step = first_step(len(self.requests))
        self.rows = batch_rows(steps[0], max_batch)

    def build_steps(self, meta: ModelMeta, max_batch: int, options: TritonOptions) -> list[dict[str, Array]]:
        """The arrays of each step's request."""
        return build_steps(meta, max_batch, options)

    def new_connection(self) -> Any:
        """A stub on a fresh channel."""
        from tritonclient.grpc import service_pb2_grpc

        channel = self.grpc.insecure_channel(
            self.target, options=[("grpc.max_receive_message_length", MAX_GRPC_MESSAGE)]
        )
        return service_pb2_grpc.GRPCInferenceServiceStub(channel)

    def send(self, stub: Any) -> str | None:
        """One ``ModelInfer`` call of the next step; a failed call is the error kind ``grpc_<code>``."""
        step = self.step
        self.step = step + 1 if step + 1 < len(self.requests) else 0
        try:
            stub.ModelInfer(self.requests[step], timeout=self.timeout)
        except self.grpc.RpcError as e:
            return f"grpc_{e.code().name.lower()}"
        return None


def make_transport(host: str, options: TritonOptions) -> HttpTransport | GrpcTransport | GrpcStreamTransport:
    """The transport of ``--triton-protocol`` (``--triton-streaming``: gRPC streams)."""
    if options.streaming:
        if options.protocol != "grpc":
            raise ValueError("--triton-streaming needs --triton-protocol grpc (HTTP cannot stream)")
        return GrpcStreamTransport(host, options)
    if options.shared_memory == "system":
        return make_shm_transport(host, options)
    if options.protocol == "grpc":
        return GrpcTransport(host, options)
    return HttpTransport(host, options)


@dataclass
class EngineConnection:
    """One closed-loop connection of the HTTP engine."""

    sock: Any
    start: float
    """When its request in flight was sent (perf_counter)."""
    received: ResponseBuffer = field(default_factory=ResponseBuffer)
    """Response bytes received and not yet framed."""
    out: bytes = b""
    """Request bytes still to send when the socket is writable."""
    requests: list[bytes] = field(default_factory=list)
    """What it sends, one step after the other: the transport's requests (with shared memory, that of
    its output region)."""
    step: int = 0
    """The step it sends next."""
    slot: Any = None
    """What it hands back to the transport when it closes."""


class HttpEngine:
    """Every closed-loop HTTP connection of this process, driven by one OS thread with epoll.

    Each connection sends the prepared request, waits for the whole response, records the
    latency and sends again: a closed loop per connection. Doing this in a plain epoll
    loop, rather than a greenlet per connection, roughly halves the generator's CPU per
    request, so the load generator is not what limits the measurement.
    """

    def __init__(self, transport: HttpTransport, recorder: Recorder) -> None:
        from gevent.monkey import get_original

        self.socket_module = __import__("socket")
        self.real_socket = get_original("socket", "socket")
        self.real_sleep = get_original("time", "sleep")
        self.epoll = get_original("select", "epoll")()
        self.address = (transport.host, transport.port)
        self.transport = transport
        self.timeout = transport.timeout
        self.recorder = recorder
        self.lock = real_lock()
        self.to_open = 0  # connections to open
        self.connections: dict[int, EngineConnection] = {}
        self.wanted = 0
        self.stopped = False
        self.finished = False
        get_original("_thread", "start_new_thread")(self._run, ())

    def add(self) -> None:
        """Open one more closed-loop connection."""
        with self.lock:
            self.wanted += 1
            self.to_open += 1

    def remove(self) -> None:
        """Close one connection (a user stopped)."""
        with self.lock:
            self.wanted = max(0, self.wanted - 1)

    def stop(self) -> None:
        """End the thread and wait (up to 1 s) until it has recorded its last response."""
        self.stopped = True
        deadline = time.monotonic() + 1.0
        while not self.finished and time.monotonic() < deadline:
            time.sleep(0.005)

    def _reopen_later(self) -> None:
        with self.lock:
            self.to_open += 1

    def _fail(self, fd: int, error: BaseException | str) -> None:
        """Count a failed request, drop its connection and open a new one."""
        self._close(fd, error if isinstance(error, str) else error_kind(error))
        self._reopen_later()

    def _expire(self, now: float) -> None:
        """Fail requests older than the timeout (a server that never answers must not stall a slot)."""
        for fd, conn in list(self.connections.items()):
            if now - conn.start > self.timeout:
                self._fail(fd, "timeout")

    def _open(self) -> None:
        sock_mod = self.socket_module
        sock = self.real_socket(sock_mod.AF_INET, sock_mod.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self.address)
        except OSError as e:
            sock.close()
            self.recorder.record(time.perf_counter(), time.perf_counter(), error_kind(e))
            self.real_sleep(0.01)  # do not spin on a dead server
            self._reopen_later()
            return
        sock.setsockopt(sock_mod.IPPROTO_TCP, sock_mod.TCP_NODELAY, 1)
        sock.setblocking(False)
        requests, slot = self.transport.checkout()
        conn = EngineConnection(
            sock=sock, start=time.perf_counter(), requests=requests, step=first_step(len(requests)), slot=slot
        )
        fd = sock.fileno()
        self.connections[fd] = conn
        try:
            self.epoll.register(fd, EPOLL_READ)
            self._send(conn)
        except Exception as e:  # e.g. reset right after accept under overload
            self._fail(fd, e)

    def _send(self, conn: EngineConnection) -> None:
        conn.start = time.perf_counter()
        step = conn.step
        conn.step = step + 1 if step + 1 < len(conn.requests) else 0
        data = conn.requests[step]
        sent = conn.sock.send(data)
        if sent < len(data):  # a large payload: finish when the socket is writable
            conn.out = data[sent:]
            self.epoll.modify(conn.sock.fileno(), EPOLL_READ_WRITE)

    def _close(self, fd: int, error: str | None) -> None:
        conn = self.connections.pop(fd)
        self.transport.checkin(conn.slot)
        if error is not None:
            self.recorder.record(conn.start, time.perf_counter(), error)
        with contextlib.suppress(OSError):
            self.epoll.unregister(fd)
        conn.sock.close()

    def _run(self) -> None:
        try:
            self._loop()
        finally:
            self.stopped = True
            for fd in list(self.connections):
                self._close(fd, None)
            self.epoll.close()
            self.finished = True

    def _loop(self) -> None:
        next_expiry = time.perf_counter() + 1.0
        while not self.stopped:
            self._rebalance()
            for fd, mask in self.epoll.poll(0.05):
                conn = self.connections.get(fd)
                if conn is not None:
                    self._serve(fd, conn, mask)
            now = time.perf_counter()
            if now >= next_expiry:
                self._expire(now)
                next_expiry = now + 1.0

    def _rebalance(self) -> None:
        """Open the connections asked for, close those beyond the number wanted."""
        with self.lock:
            opening, self.to_open = self.to_open, 0
            excess = len(self.connections) + opening - self.wanted
        for _ in range(opening):
            self._open()
        for fd in list(self.connections)[: max(0, excess)]:
            self._close(fd, None)

    def _serve(self, fd: int, conn: EngineConnection, mask: int) -> None:
        """Act on one epoll event: send the rest of the request, or read the response."""
        try:
            if mask & select.EPOLLOUT and conn.out:
                sent = conn.sock.send(conn.out)
                conn.out = conn.out[sent:]
                if not conn.out:
                    self.epoll.modify(fd, EPOLL_READ)
            if mask & EPOLL_READ:
                self._receive(conn)
        except Exception as e:
            self._fail(fd, e)

    def _receive(self, conn: EngineConnection) -> None:
        chunk = conn.sock.recv(RECV_BYTES)
        if not chunk:
            raise ConnectionResetError("the server closed the connection")
        received = conn.received
        received.add(chunk)
        status = received.next_status()
        while status is not None:
            now = time.perf_counter()
            error = None if status == 200 else f"http_{status}"
            self.recorder.record(conn.start, now, error, received.last_size)
            if received.empty:
                self._send(conn)
                return
            status = received.next_status()


# -- streaming (decoupled) models: gRPC ModelStreamInfer ------------------------------------
#
# A decoupled model answers one request with any number of responses, then a final flag.
# Each user keeps one bidirectional stream; its requests go out with an id, and the
# responses, which carry that id, are matched back to them by a reader greenlet. So the
# closed loop (one request in flight per user) and the open loop (several in flight on the
# user's stream) both work. A request counts as in flight until its final response: Triton
# sends the flag in the ``triton_final_response`` response parameter, and the request asks
# for an empty response carrying it when the model sends the flag on its own. A stream that
# ends cleanly also ends its requests.
#
# Recorded per finished request: ``first_response`` (send to first response with outputs),
# ``between_responses`` (each gap between two such responses), the counters ``responses``
# (responses with outputs, in the window each arrived) and ``request_responses`` (those of
# the successful requests, in the window each finished); the main histogram is the
# request's total time (send to final response; in the open loop, from its scheduled send,
# like every open-loop latency). A request without its final response after
# ``--triton-timeout`` is a ``timeout`` error; its stream is retired (new requests go to a
# new one, and the old one is cancelled once nothing waits on it any more).

STREAM_METHOD = "/inference.GRPCInferenceService/ModelStreamInfer"
FINAL_RESPONSE = "triton_final_response"
EMPTY_FINAL_RESPONSE = "triton_enable_empty_final_response"
REQUEST_ID_TAG = b"\x1a"
"""``ModelInferRequest.id`` (field 3, length-delimited): appended to the serialised request."""


def varint(value: int) -> bytes:
    """Protobuf's base-128 varint encoding of a non-negative integer."""
    out = bytearray()
    while True:
        low = value & 0x7F
        value >>= 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def with_request_id(serialised: bytes, request_id: str) -> bytes:
    """A serialised ``ModelInferRequest`` with its ``id`` set (protobuf fields may come in any order)."""
    raw = request_id.encode()
    return serialised + REQUEST_ID_TAG + varint(len(raw)) + raw


@dataclass
class PendingRequest:
    """One request in flight on a stream."""

    start: float
    done: Any
    """A gevent event, set at the request's final response (or its stream's end)."""
    times: list[float] = field(default_factory=list)
    """When each response with outputs arrived (perf_counter)."""
    end: float = 0.0
    error: str | None = None


class StreamCall:
    """One ``ModelStreamInfer`` call: requests go in through a queue, a greenlet reads the responses."""

    def __init__(self, channel: Any) -> None:
        from gevent.queue import Queue
        from tritonclient.grpc import service_pb2

        self.queue: Any = Queue()
        self.pending: dict[str, PendingRequest] = {}
        self.retired = False
        self.closed = False
        method = channel.stream_stream(
            STREAM_METHOD,
            request_serializer=None,  # the requests are serialised once, ahead
            response_deserializer=service_pb2.ModelStreamInferResponse.FromString,
        )
        self.call = method(self._requests())
        self.reader = gevent.spawn(self._read)

    def _requests(self) -> Any:
        while True:
            request = self.queue.get()
            if request is None:
                return
            yield request

    def send(self, request_id: str, request: bytes, pending: PendingRequest) -> None:
        """Put one request on the stream; ``pending`` hears of its responses."""
        self.pending[request_id] = pending
        self.queue.put(request)

    def forget(self, request_id: str) -> None:
        """Stop waiting for a request; a retired stream closes once nothing waits on it."""
        self.pending.pop(request_id, None)
        if self.retired and not self.pending:
            self.close()

    def retire(self) -> None:
        """Take no new requests; close once the requests in flight are over."""
        self.retired = True
        if not self.pending:
            self.close()

    def close(self) -> None:
        """End the call (the server cancels what is still running for it)."""
        if not self.closed:
            self.closed = True
            self.queue.put(None)
            self.call.cancel()

    def _read(self) -> None:
        import grpc

        error: str | None = None
        try:
            for response in self.call:
                self._on_response(response, time.perf_counter())
        except grpc.RpcError as e:
            error = f"grpc_{e.code().name.lower()}"
        finally:
            self.closed = True
            now = time.perf_counter()
            for pending in self.pending.values():  # the stream's end ends its requests
                pending.error, pending.end = error, now
                pending.done.set()
            self.pending.clear()

    def _on_response(self, response: Any, now: float) -> None:
        infer = response.infer_response
        pending = self.pending.get(infer.id)
        if pending is None:
            return  # a request given up (timed out)
        if response.error_message:
            pending.error = "inference_error"
        elif infer.outputs or infer.raw_output_contents:
            pending.times.append(now)
            if STATE.recorder is not None:
                STATE.recorder.count("responses", now)
        final = FINAL_RESPONSE in infer.parameters and infer.parameters[FINAL_RESPONSE].bool_param
        if final or pending.error:
            pending.end = now
            del self.pending[infer.id]
            pending.done.set()
            if self.retired and not self.pending:
                self.close()  # the last request a retired stream owed has ended


class StreamSession:
    """The stream one user's requests share; a new one replaces it once it is retired or broken."""

    def __init__(self, channel: Any) -> None:
        self.channel = channel
        self.call: StreamCall | None = None

    def current(self) -> StreamCall:
        """The stream new requests go to."""
        if self.call is None or self.call.closed or self.call.retired:
            self.call = StreamCall(self.channel)
        return self.call


class GrpcStreamTransport:
    """A decoupled model's request over gRPC streams: one stream per user, requests matched by id."""

    def __init__(self, host: str, options: TritonOptions) -> None:
        import grpc
        from gevent.event import Event
        from grpc.experimental import gevent as grpc_gevent
        from tritonclient.grpc import service_pb2_grpc

        grpc_gevent.init_gevent()
        self.timeout = options.timeout
        target = "{}:{}".format(*host_port(host, 8001))
        self.channel = grpc.insecure_channel(
            target, options=[("grpc.max_receive_message_length", MAX_GRPC_MESSAGE)]
        )
        stub = service_pb2_grpc.GRPCInferenceServiceStub(self.channel)
        meta, max_batch = interface_grpc(stub, options.model)
        steps = build_steps(meta, max_batch, options)
        outputs = [t["name"] for t in meta["outputs"]]
        self.requests = []  # serialised once; each send appends its request id
        for arrays in steps:
            request = grpc_request(options.model, arrays, outputs)
            request.parameters[EMPTY_FINAL_RESPONSE].bool_param = True
            self.requests.append(request.SerializeToString())
        self.step = first_step(len(self.requests))
        self.rows = batch_rows(steps[0], max_batch)
        self.session = StreamSession(self.channel)
        self.next_id = 0
        self.event = Event

    def new_connection(self) -> StreamSession:
        """This user's stream session (every request of the user shares it)."""
        return self.session

    def send(self, session: StreamSession) -> str | None:
        """Send the next step's request and wait for its final response; record its further figures."""
        step = self.step
        self.step = step + 1 if step + 1 < len(self.requests) else 0
        self.next_id += 1
        request_id = str(self.next_id)
        call = session.current()
        pending = PendingRequest(start=time.perf_counter(), done=self.event())
        call.send(request_id, with_request_id(self.requests[step], request_id), pending)
        if not pending.done.wait(self.timeout):
            call.forget(request_id)
            call.retire()  # new requests go to a new stream
            return "timeout"
        if pending.error is None:
            record_stream(pending)
        elif call.closed:
            gevent.sleep(0.01)  # the stream broke: do not spin on a dead server
        return pending.error


def record_stream(pending: PendingRequest) -> None:
    """A finished request's further figures.

    Its latencies go in the window of its final response, its responses in the window its
    request is counted in.
    """
    recorder = STATE.recorder
    if recorder is None:
        return
    times, end = pending.times, pending.end
    if times:
        recorder.record_extra("first_response", end, times[0] - pending.start)
    for before, after in itertools.pairwise(times):
        recorder.record_extra("between_responses", end, after - before)
    recorder.defer_count("request_responses", len(times))  # in the window its request is counted in


# -- sequences (stateful models) ------------------------------------------------------------

SEQUENCE_ID_MAX = 2**63 - 1
"""Largest correlation ID sent (gRPC carries it as an int64 parameter)."""


def parse_id_range(text: str) -> tuple[int, int]:
    """``START:END`` (END excluded) or ``START`` (up to SEQUENCE_ID_MAX) as (first, end); IDs are never 0.

    Raises:
        ValueError: not one or two whole numbers, a first ID below 1, or an empty range.
    """
    first_text, _, end_text = text.partition(":")
    first = int(first_text)
    end = int(end_text) if end_text.strip() else SEQUENCE_ID_MAX + 1
    if first < 1 or end <= first or end > SEQUENCE_ID_MAX + 1:
        raise ValueError(f"sequence ID range {text!r} is not START:END with 1 <= START < END <= 2**63")
    return first, end


class SequenceIds:
    """This process's correlation IDs: a fresh one per sequence, cycling through its share of the range.

    Without a range, IDs are ``pid << 32`` plus a counter: unique across the processes of a
    machine and across the users of a process, never 0. With a range, each of ``blocks``
    worker processes cycles through its own slice of it, skipping the IDs of sequences still
    in flight: a slice as large as the process's users never gives one ID to two of them.
    """

    def __init__(self, id_range: str, block: int = 0, blocks: int = 1) -> None:
        if id_range:
            first, end = parse_id_range(id_range)
            size = (end - first) // max(1, blocks)
            if size < 1:
                raise ValueError(f"sequence ID range {id_range!r} has fewer IDs than worker processes")
            self.first, self.size = first + block * size, size
        else:
            self.first, self.size = (os.getpid() << 32) + 1, 2**32 - 1
        self.taken = 0
        self.active: set[int] = set()

    def take(self) -> int:
        """The next correlation ID not in flight (the slice's next one if all are: too small a slice)."""
        for _ in range(min(self.size, len(self.active) + 1)):
            value = self.first + self.taken % self.size
            self.taken += 1
            if value not in self.active:
                break
        self.active.add(value)
        return value

    def release(self, value: int) -> None:
        """The sequence of ``value`` is over (finished or failed)."""
        self.active.discard(value)


SEQUENCE_IDS: dict[str, SequenceIds] = {}
"""The one allocator of this process (users of a process are greenlets of one thread)."""


def process_sequence_ids(environment: Any, options: TritonOptions) -> SequenceIds:
    """This process's allocator, its range slice chosen by its worker index among ``--processes``."""
    if "ids" not in SEQUENCE_IDS:
        runner = environment.runner
        blocks = int(getattr(environment.parsed_options, "processes", 1) or 1)
        if not isinstance(runner, WorkerRunner) or blocks < 1:
            blocks = 1
        block = max(0, int(getattr(runner, "worker_index", 0) or 0)) % blocks
        SEQUENCE_IDS["ids"] = SequenceIds(options.sequence_ids, block, blocks)
    return SEQUENCE_IDS["ids"]


def sequence_steps(meta: ModelMeta, max_batch: int, options: TritonOptions) -> list[dict[str, Array]]:
    """The arrays of each step of a sequence, sent in order (the steps repeat in longer sequences)."""
    return build_steps(meta, max_batch, options)


class SequenceTransport(Protocol):
    """Requests of a sequence model: one per data step, each sent with a correlation ID and flags."""

    rows: int
    steps: int

    def new_connection(self) -> Any:
        """A fresh connection to the server."""

    def send_step(self, connection: Any, step: int, flags: tuple[int, bool, bool]) -> str | None:
        """Send step ``step`` as (correlation ID, start, end) and wait for its response."""


class HttpSequenceTransport:
    """Sequence requests over HTTP: ``sequence_id``, ``sequence_start``, ``sequence_end`` in the JSON header.

    The tensors and the header's fixed part are encoded once per step; each send only formats
    the parameters and the lengths.
    """

    def __init__(self, host: str, options: TritonOptions) -> None:
        self.timeout = options.timeout
        self.host, self.port = host_port(host, 8000)
        meta, max_batch = interface_http(self.host, self.port, options.model)
        steps = sequence_steps(meta, max_batch, options)
        outputs = [t["name"] for t in meta["outputs"]]
        self.parts = [self._parts(arrays, outputs) for arrays in steps]
        self.request_line = (
            f"POST /v2/models/{options.model}/infer HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
            "Content-Type: application/octet-stream\r\nConnection: keep-alive\r\n"
        )
        self.rows = batch_rows(steps[0], max_batch)
        self.steps = len(steps)

    @staticmethod
    def _parts(arrays: dict[str, Array], outputs: list[str]) -> tuple[str, bytes]:
        """The JSON header without its closing brace, and the raw tensor bytes."""
        body, headers = http_body(arrays, outputs)
        head_length = int(headers["Inference-Header-Content-Length"])
        head = body[:head_length].decode()
        return head[:-1], body[head_length:]

    def new_connection(self) -> RawHttpConnection:
        """A fresh keep-alive connection."""
        return RawHttpConnection(self.host, self.port, self.timeout)

    def request(self, step: int, flags: tuple[int, bool, bool]) -> bytes:
        """The whole HTTP request of ``step`` in the sequence ``flags`` (ID, start, end)."""
        head, raw = self.parts[step]
        corrid, start, end = flags
        head += (
            f',"parameters":{{"sequence_id":{corrid},"sequence_start":{"true" if start else "false"},'
            f'"sequence_end":{"true" if end else "false"}}}}}'
        )
        encoded = head.encode()
        lines = (
            f"{self.request_line}Inference-Header-Content-Length: {len(encoded)}\r\n"
            f"Content-Length: {len(encoded) + len(raw)}\r\n\r\n"
        )
        return b"".join((lines.encode(), encoded, raw))

    def send_step(
        self, connection: RawHttpConnection, step: int, flags: tuple[int, bool, bool]
    ) -> str | None:
        """One round trip; an HTTP status other than 200 is the error kind ``http_<status>``."""
        status = connection.roundtrip(self.request(step, flags))
        return None if status == 200 else f"http_{status}"


class GrpcSequenceTransport(GrpcTransport):
    """Sequence requests over gRPC: int64 ``sequence_id``, bool ``sequence_start`` and ``sequence_end``.

    This user's own messages, one per step: only their parameters change from send to send.
    """

    def __init__(self, host: str, options: TritonOptions) -> None:
        super().__init__(host, options)
        self.steps = len(self.requests)

    def build_steps(self, meta: ModelMeta, max_batch: int, options: TritonOptions) -> list[dict[str, Array]]:
        """The arrays of each step, sent in order within a sequence."""
        return sequence_steps(meta, max_batch, options)

    def send_step(self, stub: Any, step: int, flags: tuple[int, bool, bool]) -> str | None:
        """One ``ModelInfer`` call; a failed call is the error kind ``grpc_<code>``."""
        request = self.requests[step]
        corrid, start, end = flags
        request.parameters["sequence_id"].int64_param = corrid
        request.parameters["sequence_start"].bool_param = start
        request.parameters["sequence_end"].bool_param = end
        try:
            stub.ModelInfer(request, timeout=self.timeout)
        except self.grpc.RpcError as e:
            return f"grpc_{e.code().name.lower()}"
        return None


def make_sequence_transport(
    host: str, options: TritonOptions
) -> HttpSequenceTransport | GrpcSequenceTransport:
    """The sequence transport of ``--triton-protocol``."""
    if options.protocol == "grpc":
        return GrpcSequenceTransport(host, options)
    return HttpSequenceTransport(host, options)


class SequenceLoop:
    """One user's closed loop of sequences: one sequence in flight, its requests one after the other.

    Each sequence takes a fresh correlation ID, sends ``length`` requests (the data steps in
    order, repeated when the sequence is longer), the first with the start flag and the last
    with the end flag. Every request's latency goes to the main histogram; a finished
    sequence adds its time from first send to last response (``sequence``) and counts
    ``sequences`` and ``sequence_requests``. A failed request ends its sequence early
    (``sequence_errors``); the next sequence starts on a new ID.
    """

    def __init__(
        self, recorder: Recorder, transport: SequenceTransport, ids: SequenceIds, length: int
    ) -> None:
        self.recorder = recorder
        self.transport = transport
        self.ids = ids
        self.length = length or transport.steps
        self.clock = time.perf_counter

    def run(self) -> None:
        """Send sequences until Locust stops the user."""
        connection = self.transport.new_connection()
        while True:
            if not self._sequence(connection):
                gevent.sleep(0.01)  # do not spin on a dead server
                connection = self.transport.new_connection()

    def _sequence(self, connection: Any) -> bool:
        """Run one sequence; False when a request failed (the sequence is dropped)."""
        corrid = self.ids.take()
        try:
            return self._send_all(connection, corrid)
        finally:
            self.ids.release(corrid)

    def _send_all(self, connection: Any, corrid: int) -> bool:
        recorder, clock, transport, last = self.recorder, self.clock, self.transport, self.length - 1
        first_sent = end = clock()
        for index in range(self.length):
            start = clock()
            try:
                flags = (corrid, index == 0, index == last)
                error = transport.send_step(connection, index % transport.steps, flags)
            except Exception as e:  # every failure is counted by kind, never raised
                error = error_kind(e)
            end = clock()
            recorder.record(start, end, error)
            if error is not None:
                recorder.count("sequence_errors", end)
                return False
        recorder.record_extra("sequence", end, end - first_sent)
        recorder.count("sequences", end)
        recorder.count("sequence_requests", end, self.length)
        return True


# -- system shared memory (--triton-shared-memory system) -------------------------------------
#
# Like perf_analyzer's ``--shared-memory system``: the request names regions of POSIX shared
# memory registered with the server instead of carrying tensor data, and the server writes
# the outputs into them. Each process writes every input (of every step) once into one
# region and gives each connection an output region of its own, so a connection's requests
# never change (the HTTP engine keeps sending prepared bytes). Regions are named
# ``<prefix><pid>_in`` and ``<prefix><pid>_out<k>``: whoever set the prefix
# (``--triton-shm-prefix``; tritongen puts its own pid and a random token in it) finds and
# removes what a killed process left behind. Only for a server on this host.

SHM_DIR = "/dev/shm"
SHM_ALIGN = 64
"""Every tensor starts on a 64-byte boundary of its region."""


def shm_aligned(size: int) -> int:
    """``size`` rounded up to the tensor alignment of a region."""
    return -(-size // SHM_ALIGN) * SHM_ALIGN


class ShmRegion:
    """A region of POSIX shared memory (a file of ``/dev/shm``), created and mapped by this process."""

    def __init__(self, name: str, size: int) -> None:
        import mmap

        self.name = name
        self.key = "/" + name
        self.size = size
        path = os.path.join(SHM_DIR, name)
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
        except FileExistsError:  # named after this live process: a leftover of a dead one
            os.unlink(path)
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
        try:
            # Claim the pages now: a full /dev/shm fails here (ENOSPC), not later with SIGBUS.
            os.posix_fallocate(fd, 0, size)
            self.map = mmap.mmap(fd, size)
        except BaseException:
            os.close(fd)
            os.unlink(path)
            raise
        os.close(fd)

    def unlink(self) -> None:
        """Remove the region's file and unmap it."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(SHM_DIR, self.name))
        with contextlib.suppress(BufferError):
            self.map.close()


@dataclass(frozen=True)
class ShmTensor:
    """Where one tensor of a request lies in shared memory."""

    name: str
    region: str
    offset: int
    size: int
    datatype: str = ""
    shape: tuple[int, ...] = ()

    def parameters(self) -> dict[str, str | int]:
        """The request parameters that point Triton at the tensor."""
        return {
            "shared_memory_region": self.region,
            "shared_memory_byte_size": self.size,
            "shared_memory_offset": self.offset,
        }


class ShmControl(Protocol):
    """The server's system shared-memory API."""

    def register(self, region: ShmRegion) -> None:
        """Register ``region`` under its name."""

    def unregister(self, name: str) -> None:
        """Unregister the region called ``name``."""


class HttpShmControl:
    """The shared-memory API over HTTP."""

    def __init__(self, host: str, port: int, timeout: float) -> None:
        self.base = f"http://{host}:{port}/v2/systemsharedmemory/region/"
        self.timeout = timeout

    def _post(self, url: str, body: bytes) -> None:
        request = urllib.request.Request(url, data=body, method="POST")
        with urllib.request.urlopen(request, timeout=self.timeout) as response:
            response.read()

    def register(self, region: ShmRegion) -> None:
        """Register ``region`` under its name."""
        body = {"key": region.key, "offset": 0, "byte_size": region.size}
        self._post(f"{self.base}{region.name}/register", json.dumps(body).encode())

    def unregister(self, name: str) -> None:
        """Unregister the region called ``name``."""
        self._post(f"{self.base}{name}/unregister", b"")


class GrpcShmControl:
    """The shared-memory API over gRPC."""

    def __init__(self, stub: Any, timeout: float) -> None:
        self.stub = stub
        self.timeout = timeout

    def register(self, region: ShmRegion) -> None:
        """Register ``region`` under its name."""
        from tritonclient.grpc import service_pb2

        request = service_pb2.SystemSharedMemoryRegisterRequest(
            name=region.name, key=region.key, offset=0, byte_size=region.size
        )
        self.stub.SystemSharedMemoryRegister(request, timeout=self.timeout)

    def unregister(self, name: str) -> None:
        """Unregister the region called ``name``."""
        from tritonclient.grpc import service_pb2

        request = service_pb2.SystemSharedMemoryUnregisterRequest(name=name)
        self.stub.SystemSharedMemoryUnregister(request, timeout=self.timeout)


def output_byte_sizes(meta: ModelMeta, max_batch: int, rows: int, fallback: int) -> dict[str, int]:
    """Each output's byte size from its metadata shape (batch dim = ``rows``), else ``fallback``.

    Raises:
        ValueError: an output of unknown size (a dynamic dim, or BYTES) and no ``fallback``.
    """
    sizes = {}
    for tensor in meta["outputs"]:
        dims = [int(d) for d in tensor["shape"]]
        if max_batch > 0 and dims:
            dims[0] = rows
        dtype = NUMPY_DTYPES.get(tensor["datatype"])
        if dtype is not None and all(d >= 0 for d in dims):
            sizes[tensor["name"]] = max(1, int(np.prod(dims)) * np.dtype(dtype).itemsize)
        elif fallback > 0:
            sizes[tensor["name"]] = fallback
        else:
            raise ValueError(
                f"output {tensor['name']!r} ({tensor['datatype']} {dims}) has no fixed size: "
                "pass --triton-output-shm-size BYTES"
            )
    return sizes


@dataclass
class ShmSlot:
    """One output region and the requests that name it, one per step (HTTP bytes or gRPC requests)."""

    region: ShmRegion
    requests: list[Any]


RequestBuilder = Callable[[list[ShmTensor], list[ShmTensor]], Any]
"""Builds a request from where its inputs and outputs lie."""


class ShmSession:
    """This process's regions: every step's inputs, written once, and an output region per connection.

    Slots are taken by connections and given back when they close; ``take(create=False)``
    never talks to the server (the HTTP engine's thread calls it), so each user reserves
    a slot when it starts.
    """

    def __init__(
        self,
        control: ShmControl,
        prefix: str,
        steps: list[dict[str, Array]],
        outputs: dict[str, int],
        build: RequestBuilder,
    ) -> None:
        self.control = control
        self.base = f"{prefix}{os.getpid()}_"
        self.build = build
        self.regions: list[ShmRegion] = []
        self.lock = real_lock()
        self.slots: list[ShmSlot] = []
        self.free: list[ShmSlot] = []
        self.numbered = 0
        """Output regions numbered so far."""
        raws = {
            (i, name): raw_bytes(array) for i, arrays in enumerate(steps) for name, array in arrays.items()
        }
        offsets = self._offsets({key: len(raw) for key, raw in raws.items()})
        region = self._region("in", max(1, sum(shm_aligned(len(raw)) for raw in raws.values())))
        self.inputs: list[list[ShmTensor]] = [[] for _ in steps]
        """Where each step's inputs lie."""
        for (i, name), raw in raws.items():
            at = offsets[(i, name)]
            region.map[at : at + len(raw)] = raw
            array = steps[i][name]
            self.inputs[i].append(
                ShmTensor(name, region.name, at, len(raw), wire_datatype(array), array.shape)
            )
        self.rows = 1
        """Rows per request (the batch dim of the inputs when the model batches)."""
        self.output_sizes = outputs
        self.output_offsets = self._offsets(outputs)
        self.output_total = max(1, sum(shm_aligned(size) for size in outputs.values()))

    @staticmethod
    def _offsets(sizes: dict[Any, int]) -> dict[Any, int]:
        offsets, at = {}, 0
        for name, size in sizes.items():
            offsets[name] = at
            at += shm_aligned(size)
        return offsets

    def _region(self, suffix: str, size: int) -> ShmRegion:
        """A new region, registered with the server (removed again if that fails)."""
        region = ShmRegion(self.base + suffix, size)
        try:
            self.control.register(region)
        except BaseException:
            region.unlink()
            raise
        self.regions.append(region)
        return region

    def reserve(self) -> None:
        """Add one free output slot (a new region, registered)."""
        with self.lock:  # numbered before registering: users start side by side
            number, self.numbered = self.numbered, self.numbered + 1
        region = self._region(f"out{number}", self.output_total)
        outputs = [
            ShmTensor(name, region.name, self.output_offsets[name], size)
            for name, size in self.output_sizes.items()
        ]
        slot = ShmSlot(region, [self.build(inputs, outputs) for inputs in self.inputs])
        with self.lock:
            self.slots.append(slot)
            self.free.append(slot)

    def take(self, create: bool = True) -> ShmSlot | None:
        """A free slot (a new one when none is free and ``create``); None: none free."""
        with self.lock:
            if self.free:
                return self.free.pop()
        if not create:
            return None
        self.reserve()
        return self.take(create=False)

    def give(self, slot: ShmSlot | None) -> None:
        """Take back a slot a connection no longer uses."""
        if slot is not None:
            with self.lock:
                self.free.append(slot)

    def close(self) -> None:
        """Unregister every region from the server and remove it (a failure is no reason to keep one)."""
        for region in self.regions:
            with contextlib.suppress(Exception):
                self.control.unregister(region.name)
            region.unlink()
        self.regions.clear()


SHM_SESSIONS: dict[int, ShmSession] = {}
"""The session of this process (by pid: a forked worker starts its own)."""
SHM_CREATING = gevent.lock.Semaphore()
"""Held while a user creates this process's session (registering yields to the other users)."""


def shm_session(
    control: ShmControl, options: TritonOptions, meta: ModelMeta, max_batch: int, build: RequestBuilder
) -> tuple[ShmSession, int]:
    """This process's session (created on first use) with one more slot reserved; and the batch rows.

    Raises:
        ValueError: an output of unknown size and no ``--triton-output-shm-size``.
    """
    with SHM_CREATING:  # the users of a process start side by side: one creates the session
        session = SHM_SESSIONS.get(os.getpid())
        if session is None:
            steps = build_steps(meta, max_batch, options)
            most_rows = max(batch_rows(arrays, max_batch) for arrays in steps)
            outputs = output_byte_sizes(meta, max_batch, most_rows, options.output_shm_size)
            prefix = options.shm_prefix or f"tritongen_{os.getpid()}_{os.urandom(4).hex()}_"
            session = ShmSession(control, prefix, steps, outputs, build)
            session.rows = batch_rows(steps[0], max_batch)
            SHM_SESSIONS[os.getpid()] = session
    session.reserve()
    return session, session.rows


def close_shm_sessions() -> None:
    """Unregister and remove this process's regions (the test stopped)."""
    session = SHM_SESSIONS.pop(os.getpid(), None)
    if session is not None:
        session.close()


def shm_http_request(
    model: str, host: str, port: int, inputs: list[ShmTensor], outputs: list[ShmTensor]
) -> bytes:
    """An HTTP inference request whose tensors lie in shared memory (a JSON body, no tensor data)."""
    body = json.dumps(
        {
            "inputs": [
                {"name": t.name, "shape": list(t.shape), "datatype": t.datatype, "parameters": t.parameters()}
                for t in inputs
            ],
            "outputs": [{"name": t.name, "parameters": t.parameters()} for t in outputs],
        },
        separators=(",", ":"),
    ).encode()
    head = (
        f"POST /v2/models/{model}/infer HTTP/1.1\r\nHost: {host}:{port}\r\n"
        "Content-Type: application/json\r\nConnection: keep-alive\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


def shm_grpc_request(model: str, inputs: list[ShmTensor], outputs: list[ShmTensor]) -> Any:
    """A ``ModelInferRequest`` whose tensors lie in shared memory (``parameters``, no contents)."""
    from tritonclient.grpc import service_pb2

    def point(parameters: Any, tensor: ShmTensor) -> None:
        parameters["shared_memory_region"].string_param = tensor.region
        parameters["shared_memory_byte_size"].int64_param = tensor.size
        parameters["shared_memory_offset"].int64_param = tensor.offset

    request = service_pb2.ModelInferRequest(model_name=model)
    for tensor in inputs:
        sent = request.inputs.add()
        sent.name = tensor.name
        sent.datatype = tensor.datatype
        sent.shape.extend(tensor.shape)
        point(sent.parameters, tensor)
    for tensor in outputs:
        wanted = request.outputs.add()
        wanted.name = tensor.name
        point(wanted.parameters, tensor)
    return request


class ShmHttpConnection(RawHttpConnection):
    """A keep-alive connection with an output region of its own, given back when the connection is dropped."""

    def __init__(self, host: str, port: int, timeout: float, session: ShmSession) -> None:
        super().__init__(host, port, timeout)
        slot = session.take()
        assert slot is not None
        self.requests: list[bytes] = slot.requests
        self.step = first_step(len(self.requests))
        weakref.finalize(self, session.give, slot)

    def next_request(self) -> bytes:
        """The request of the next step."""
        step = self.step
        self.step = step + 1 if step + 1 < len(self.requests) else 0
        return self.requests[step]


class ShmHttpTransport(HttpTransport):
    """HTTP requests whose tensors lie in shared memory: a prepared request per output region."""

    def __init__(self, host: str, options: TritonOptions) -> None:
        self.timeout = options.timeout
        self.host, self.port = host_port(host, 8000)
        meta, max_batch = interface_http(self.host, self.port, options.model)

        def build(inputs: list[ShmTensor], outputs: list[ShmTensor]) -> bytes:
            return shm_http_request(options.model, self.host, self.port, inputs, outputs)

        control = HttpShmControl(self.host, self.port, options.timeout)
        self.session, self.rows = shm_session(control, options, meta, max_batch, build)
        self.requests = []

    def checkout(self) -> tuple[list[bytes], Any]:
        """A free output region's requests for a new engine connection (a busy one's if none is free)."""
        slot = self.session.take(create=False)
        return (slot or self.session.slots[0]).requests, slot

    def checkin(self, slot: Any) -> None:
        """Take back the output region of a closed engine connection."""
        self.session.give(slot)

    def new_connection(self) -> ShmHttpConnection:
        """A fresh keep-alive connection with an output region of its own."""
        return ShmHttpConnection(self.host, self.port, self.timeout, self.session)

    def send(self, connection: RawHttpConnection) -> str | None:
        """One round trip of the next step; a status other than 200 is the error kind ``http_<status>``."""
        status = connection.roundtrip(cast(ShmHttpConnection, connection).next_request())
        return None if status == 200 else f"http_{status}"


@dataclass
class ShmGrpcConnection:
    """A stub with an output region of its own, given back when the connection is dropped."""

    stub: Any
    requests: list[Any]
    step: int = 0

    def next_request(self) -> Any:
        """The request of the next step."""
        step = self.step
        self.step = step + 1 if step + 1 < len(self.requests) else 0
        return self.requests[step]


class ShmGrpcTransport(GrpcTransport):
    """GRPC requests whose tensors lie in shared memory: a prepared request per output region."""

    def __init__(self, host: str, options: TritonOptions) -> None:
        import grpc
        from grpc.experimental import gevent as grpc_gevent

        grpc_gevent.init_gevent()
        self.grpc = grpc
        self.timeout = options.timeout
        self.target = "{}:{}".format(*host_port(host, 8001))
        stub = super().new_connection()
        meta, max_batch = interface_grpc(stub, options.model)

        def build(inputs: list[ShmTensor], outputs: list[ShmTensor]) -> Any:
            return shm_grpc_request(options.model, inputs, outputs)

        control = GrpcShmControl(stub, options.timeout)
        self.session, self.rows = shm_session(control, options, meta, max_batch, build)

    def new_connection(self) -> ShmGrpcConnection:
        """A stub on a fresh channel, with an output region of its own."""
        slot = self.session.take()
        assert slot is not None
        steps = len(slot.requests)
        connection = ShmGrpcConnection(super().new_connection(), slot.requests, first_step(steps))
        weakref.finalize(connection, self.session.give, slot)
        return connection

    def send(self, connection: ShmGrpcConnection) -> str | None:
        """One ``ModelInfer`` call; a failed call is the error kind ``grpc_<code>``."""
        try:
            connection.stub.ModelInfer(connection.next_request(), timeout=self.timeout)
        except self.grpc.RpcError as e:
            return f"grpc_{e.code().name.lower()}"
        return None


def make_shm_transport(host: str, options: TritonOptions) -> ShmHttpTransport | ShmGrpcTransport:
    """The shared-memory transport of ``--triton-protocol``."""
    if options.protocol == "grpc":
        return ShmGrpcTransport(host, options)
    return ShmHttpTransport(host, options)


# -- this process's state and Locust's events ------------------------------------------------


@dataclass
class ProcessState:
    """What this Locust process keeps between events.

    A worker (or a lone local runner) records latencies and reports them; the master (or
    the lone local runner) collects them.
    """

    recorder: Recorder | None = None
    reporter: Any = None
    """The greenlet that sends finished windows to the master."""
    engine: HttpEngine | None = None
    """The closed-loop HTTP engine, shared by every HTTP user of this process."""
    collector: Collector | None = None
    feeder: Any = None
    """The greenlet that moves counted requests into Locust's own statistics."""


STATE = ProcessState()


def worker_id(environment: Any) -> str:
    """This process's name in the windows it reports."""
    runner = environment.runner
    return str(getattr(runner, "client_id", None) or f"local-{os.getpid()}")


def send_windows(environment: Any, everything: bool) -> None:
    """Send the windows that are over (or all of them) to the master."""
    if STATE.recorder is None:
        return
    message = WindowMessage(
        worker=worker_id(environment),
        windows=STATE.recorder.drain(everything),
        t0=run_t0(environment),
        users=int(environment.runner.user_count),
    )
    if message["windows"]:
        REPORTED.add(message["windows"])
    if message["windows"] or everything:  # the last message even without windows: the master waits for it
        message["final"] = everything
        environment.runner.send_message(MESSAGE, message)


def report_forever(environment: Any) -> None:
    """Send finished windows a few times per window."""
    while True:
        gevent.sleep(min(0.25, STATE.recorder.window_s / 4) if STATE.recorder else 0.25)
        send_windows(environment, everything=False)


STATS_FEED_S = 0.5
"""How often counted requests move into Locust's statistics (the web UI's charts, its reports)."""
CSV_LAST_TURN_S = 1.1
"""A little more than Locust's CSV interval: its writer's last turn sees the final figures."""


def feed_stats(environment: Any) -> None:
    """Move what the Recorder counted into Locust's statistics (now and at the end of a test)."""
    recorder = STATE.recorder
    if recorder is not None and recorder.feed is not None:
        recorder.feed.flush(environment.stats, recorder.lock)


def feed_forever(environment: Any) -> None:
    """Feed Locust's statistics every ``STATS_FEED_S``."""
    while True:
        gevent.sleep(STATS_FEED_S)
        feed_stats(environment)


@events.quitting.add_listener
def _on_quitting_csv(environment: Any, **_: Any) -> None:
    # Locust rewrites its --csv files every second and only closes them at exit: one more
    # turn of its writer puts the final figures (the last flush, the workers' last reports) in.
    options = environment.parsed_options
    if (
        options is not None
        and getattr(options, "csv_prefix", None)
        and not isinstance(environment.runner, WorkerRunner)
    ):
        gevent.sleep(CSV_LAST_TURN_S)


@events.test_start.add_listener
def _on_test_start(environment: Any, **_: Any) -> None:
    if isinstance(environment.runner, MasterRunner):
        if STATE.collector is not None:
            STATE.collector.reset()
        return
    options = TritonOptions.from_parsed(environment.parsed_options)
    feed = StatsFeed(stats_method(options), options.model)
    STATE.recorder = Recorder(options.t0 or time.time(), options.window, feed)
    STATE.reporter = gevent.spawn(report_forever, environment)
    STATE.feeder = gevent.spawn(feed_forever, environment)


@events.test_stopping.add_listener
def _on_test_stopping(environment: Any, **_: Any) -> None:
    if isinstance(environment.runner, MasterRunner) and STATE.collector is not None:
        STATE.collector.stopped = time.monotonic()  # the run's end (the workers stop after it)


@events.test_stop.add_listener
def _on_test_stop(environment: Any, **_: Any) -> None:
    if isinstance(environment.runner, MasterRunner):
        return  # the run's report: MasterReport, once the workers' last windows are in
    if STATE.reporter is not None:
        STATE.reporter.kill(block=False)
        STATE.reporter = None
    if STATE.feeder is not None:
        STATE.feeder.kill(block=False)
        STATE.feeder = None
    if STATE.engine is not None:
        STATE.engine.stop()
    close_shm_sessions()
    # Locust's statistics get the last requests at the same moment as the last windows
    # (nothing yields in between), before a worker's final report to the master.
    feed_stats(environment)
    send_windows(environment, everything=True)
    if isinstance(environment.runner, WorkerRunner):
        # Locust sends a worker's last statistics only on "quit"; a worker stopped first (see
        # stop_workers) would never send them, so they go now, right behind the last windows.
        send_stats = getattr(environment.runner, "_send_stats", None)
        if send_stats is not None:
            send_stats()


@events.init.add_listener
def _on_init(environment: Any, **_: Any) -> None:
    runner = environment.runner
    if isinstance(runner, (MasterRunner, LocalRunner)) and not isinstance(runner, WorkerRunner):
        parsed = environment.parsed_options
        STATE.collector = Collector(parsed.triton_results, window_s=parsed.triton_window)
        runner.register_message(MESSAGE, STATE.collector.receive)
        REPORT.register(environment)
    init_distributed(environment)


@events.quitting.add_listener
def _on_quitting(environment: Any, **_: Any) -> None:
    INPUTS.remove()


# -- the users ----------------------------------------------------------------------------

USER_NUMBERS = itertools.count()
"""Numbers the users of this process, in the order they start."""


def worker_key(environment: Any) -> str:
    """What tells this worker's schedules from the others': its index, else host name and pid.

    A worker's index is its place among the master's workers (0, 1, … as they connected).
    Host name and process id alone would not do: in every worker pod Locust is process 1.
    """
    runner = environment.runner
    index = getattr(runner, "worker_index", -1)
    if isinstance(runner, WorkerRunner) and isinstance(index, int) and index >= 0:
        return f"worker-{index}"
    return f"{socket.gethostname()}-{os.getpid()}"


def schedule_seed(seed: int, worker: str, user: int) -> int:
    """The seed of one user's open-loop schedule: fixed by ``--triton-seed``, the worker and the user."""
    digest = hashlib.sha256(f"{seed}/{worker}/{user}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def wait_until(deadline: float, clock: Callable[[], float] = time.perf_counter) -> None:
    """Sleep until ``deadline`` (perf_counter time) with microsecond accuracy.

    gevent's timers wake up to ~1 ms late (epoll has millisecond timeouts), which would
    add up to a millisecond to every open-loop latency. So sleep until 1 ms before, then
    yield to the event loop (which keeps serving in-flight requests) until the deadline.
    """
    remaining = deadline - clock()
    if remaining > TIMER_SLACK_S:
        gevent.sleep(remaining - TIMER_SLACK_S)
    while clock() < deadline:
        gevent.sleep(0)


class OpenLoop:
    """One user's open-loop schedule: send on schedule; at the in-flight cap, hold sends back.

    A held-back send waits in a queue and goes out, oldest first, as soon as a request
    in flight finishes; its latency still counts from its scheduled time, so a server
    that pauses shows in the tail rather than as requests that were never sent.
    """

    def __init__(
        self, recorder: Recorder, transport: Transport, options: TritonOptions, rng_seed: int
    ) -> None:
        self.recorder = recorder
        self.transport = transport
        self.options = options
        self.rng = random.Random(rng_seed)
        self.idle: list[Any] = []
        self.held: deque[float] = deque()  # scheduled times of the sends held back, oldest first
        self.in_flight = 0
        self.clock = time.perf_counter

    def run(self) -> None:
        """Send until Locust stops the user."""
        rate = self.options.user_rate
        poisson = self.options.arrival == "poisson"
        recorder, clock = self.recorder, self.clock
        next_at = clock()
        while True:
            next_at += self.rng.expovariate(rate) if poisson else 1.0 / rate
            wait_until(next_at, clock)
            if self.in_flight >= self.options.max_inflight:
                self.held.append(next_at)
                recorder.hold(next_at)
                continue
            now = clock()
            recorder.sent(now, now - next_at)
            self.in_flight += 1
            gevent.spawn(self._fire, next_at)

    def _fire(self, scheduled: float) -> None:
        """One slot in flight: send, then take over held-back sends while there are any."""
        try:
            while True:
                error = self._send()
                self.recorder.record(scheduled, self.clock(), error)
                if not self.held:
                    return
                scheduled = self.held.popleft()
                now = self.clock()
                self.recorder.sent(now, now - scheduled, held=True)
        finally:
            self.in_flight -= 1

    def _send(self) -> str | None:
        """Send once on an idle connection (or a new one); a failure is counted by kind, never raised."""
        try:
            connection = self.idle.pop() if self.idle else self.transport.new_connection()
            error = self.transport.send(connection)
            self.idle.append(connection)
        except Exception as e:
            error = error_kind(e)
        return error


class TritonUser(User):
    """One closed-loop stream of requests, or (with ``--triton-user-rate``) one open-loop schedule."""

    def on_start(self) -> None:
        """Prepare the request and a connection."""
        options = worker_options(self.environment, TritonOptions.from_parsed(self.environment.parsed_options))
        if not options.model:
            raise ValueError("--triton-model (or TRITONGEN_MODEL) is required")
        if options.sequences:  # a sequence model: requests carry a correlation ID and flags
            self.sequences = make_sequence_transport(self.host or "127.0.0.1:8000", options)
            self.options = options
            return
        self.transport = make_transport(self.host or "127.0.0.1:8000", options)
        self.options = options

    @task
    def load(self) -> None:
        """Run until Locust stops this user."""
        recorder = STATE.recorder
        assert recorder is not None
        if self.options.sequences:  # a closed loop of sequences, whatever the rate
            ids = process_sequence_ids(self.environment, self.options)
            SequenceLoop(recorder, self.sequences, ids, self.options.sequence_length).run()
        elif self.options.user_rate > 0:
            rng_seed = schedule_seed(self.options.seed, worker_key(self.environment), next(USER_NUMBERS))
            OpenLoop(recorder, self.transport, self.options, rng_seed).run()
        elif isinstance(self.transport, HttpTransport):
            self._closed_loop_engine(self.transport, recorder)
        else:
            self._closed_loop(self.transport, recorder)

    def _closed_loop_engine(self, transport: HttpTransport, recorder: Recorder) -> None:
        """One more connection of this process's HTTP engine, while this user runs."""
        if STATE.engine is None or STATE.engine.stopped:
            STATE.engine = HttpEngine(transport, recorder)
        engine = STATE.engine
        engine.add()
        try:
            while True:
                gevent.sleep(3600)
        finally:
            engine.remove()

    def _closed_loop(self, transport: Transport, recorder: Recorder) -> None:
        """Send, wait for the response, send again, on a connection of this user's own."""
        connection = transport.new_connection()
        clock = time.perf_counter
        while True:
            start = clock()
            try:
                error = transport.send(connection)
            except Exception as e:  # every failure is counted by kind, never raised
                error = error_kind(e)
                gevent.sleep(0.01)  # do not spin on a dead server
                connection = transport.new_connection()
            recorder.record(start, clock(), error)
