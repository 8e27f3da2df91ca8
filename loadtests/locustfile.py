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
``--triton-results`` (JSON lines) and prints microsecond percentiles when the test ends.
In open-loop mode (``--triton-user-rate``) latency is counted from each request's
*scheduled* send time, so a slow server or a late generator cannot hide queueing delay.
When ``--triton-max-inflight`` requests are in flight, a send is *held back*: it waits,
oldest first, for a request to finish, goes out then, and still counts from its scheduled
time; the windows count such sends (``held_back``) and their longest wait (``max_hold_us``).

Payloads are built once per process: HTTP bodies use Triton's binary tensor extension,
gRPC requests carry raw tensor contents. The file imports nothing from tritongen so it
also runs in a plain Locust container.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import random
import select
import time
import urllib.request
import zipfile
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any, Protocol, TypedDict, cast

import gevent
import numpy as np
import numpy.typing as npt
from hdrh.histogram import HdrHistogram
from locust import User, events, task
from locust.runners import LocalRunner, MasterRunner, WorkerRunner

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


class WindowMessage(TypedDict):
    """The message a worker sends to the master: who it is and its windows that are over."""

    worker: str
    windows: list[WindowRecord]


class WindowLine(WindowRecord):
    """One line of ``--triton-results``: a window and the worker that measured it."""

    worker: str


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
    _Option("inputs", "", ".npz with one array per input (full shape)."),
    _Option("batch-size", 1),
    _Option("dynamic-dim", 8, "Value of -1 dims."),
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
    _Option("timeout", 60.0),
    _Option("seed", 0),
)


@dataclass(frozen=True)
class TritonOptions:
    """The ``--triton-*`` options, one field per option (dashes become underscores)."""

    model: str
    protocol: str
    inputs: str
    batch_size: int
    dynamic_dim: int
    user_rate: float
    arrival: str
    max_inflight: int
    window: float
    t0: float
    results: str
    timeout: float
    seed: int

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


def build_arrays(meta: ModelMeta, max_batch: int, options: TritonOptions) -> dict[str, Array]:
    """The request arrays: those of ``--triton-inputs``, else random ones shaped from the metadata."""
    if options.inputs:
        return read_npz(options.inputs, f"--triton-inputs {options.inputs}")
    rng = np.random.default_rng(options.seed)
    arrays = {}
    for tensor in meta["inputs"]:
        dims = [options.dynamic_dim if int(d) == -1 else int(d) for d in tensor["shape"]]
        if max_batch > 0:
            dims[0] = options.batch_size
        dtype = NUMPY_DTYPES.get(tensor["datatype"])
        if dtype is None:
            arrays[tensor["name"]] = np.full(dims, b"tritongen", dtype=np.object_)
        elif np.issubdtype(dtype, np.floating):
            arrays[tensor["name"]] = rng.standard_normal(dims).astype(dtype)
        else:
            arrays[tensor["name"]] = rng.integers(0, 2, size=dims).astype(dtype)
    return arrays


def wire_datatype(array: Array) -> str:
    """The Triton wire type of ``array``."""
    if array.dtype == np.object_:
        return "BYTES"
    return next(name for name, dtype in NUMPY_DTYPES.items() if np.dtype(dtype) == array.dtype)


def raw_bytes(array: Array) -> bytes:
    """The tensor contents as Triton takes them (BYTES: each item length-prefixed)."""
    if array.dtype != np.object_:
        return np.ascontiguousarray(array).tobytes()
    chunks = []
    for item in array.reshape(-1):
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
        )


class Recorder:
    """Latencies of this process, one HDR histogram per wall-clock-aligned window."""

    def __init__(self, t0: float, window_s: float) -> None:
        self.t0 = t0
        self.window_s = window_s
        # perf_counter for durations, mapped to the wall clock once.
        self.wall_offset = time.time() - time.perf_counter()
        self.windows: dict[int, OpenWindow] = {}
        # The HTTP engine records from an OS thread; the reporter drains from the hub.
        self.lock = real_lock()

    def _window(self, perf_time: float) -> OpenWindow:
        index = int((perf_time + self.wall_offset - self.t0) // self.window_s)
        window = self.windows.get(index)
        if window is None:
            window = self.windows[index] = OpenWindow(index)
        return window

    def record(self, start: float, end: float, error: str | None) -> None:
        """Count one finished request; ``start`` is its scheduled (open loop) or actual send time."""
        with self.lock:
            window = self._window(end)
            if error is None:
                window.hist.record_value(min(max(int((end - start) * 1e6), LOWEST_US), HIGHEST_US))
            else:
                window.errors[error] = window.errors.get(error, 0) + 1

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


# -- master side: merge and write ---------------------------------------------------------


class Collector:
    """On the master (or a lone local runner): write windows and keep the merged histogram."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.total = new_histogram()
        self.errors: dict[str, int] = {}
        self.held_back = 0
        if path:
            open(path, "w").close()  # truncate once

    def receive(self, environment: Any, msg: Any, **_: Any) -> None:
        """Handle one worker message: append its windows, merge its histograms."""
        message: WindowMessage = msg.data
        if self.path:
            with open(self.path, "a") as out:
                for window in message["windows"]:
                    line: WindowLine = {"worker": message["worker"], **window}
                    out.write(json.dumps(line) + "\n")
        for window in message["windows"]:
            if window["hist"]:
                self.total.add(HdrHistogram.decode(base64.b64decode(window["hist"])))
            for kind, count in window["errors"].items():
                self.errors[kind] = self.errors.get(kind, 0) + count
            self.held_back += int(window.get("held_back", 0))

    def summary(self) -> str:
        """Microsecond percentiles over everything received."""
        h = self.total
        if not h.get_total_count():
            return "tritongen: no successful requests"
        pcts = ", ".join(f"p{p:g} {h.get_value_at_percentile(p)} µs" for p in (50, 90, 95, 99, 99.9))
        counts = f"{h.get_total_count()} ok, errors {self.errors or 0}"
        if self.held_back:
            counts += f", {self.held_back} sends held back at the in-flight cap"
        return f"tritongen: {counts}; {pcts}; max {h.get_max_value()} µs"


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


def frame_response(buffer: bytes) -> tuple[int, bytes] | None:
    """Split one complete HTTP response off ``buffer``: (status, what follows), or None if incomplete."""
    end = buffer.find(b"\r\n\r\n")
    if end < 0:
        return None
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
    body_end = end + 4 + length
    if len(buffer) < body_end:
        return None
    return int(buffer[9:12]), buffer[body_end:]


class RawHttpConnection:
    """A keep-alive HTTP/1.1 connection that sends prepared bytes and reads just the status and body length.

    A general HTTP client spends most of its time on header objects; the request here
    never changes, so it is written once and the response is only framed, not parsed.
    """

    def __init__(self, host: str, port: int, timeout: float) -> None:
        import socket

        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buffer = b""

    def roundtrip(self, request: bytes) -> int:
        """Send one request and consume its response; return the HTTP status."""
        self.sock.sendall(request)
        buffer = self.buffer
        framed = frame_response(buffer)
        while framed is None:
            buffer += self._recv()
            framed = frame_response(buffer)
        status, self.buffer = framed
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


class HttpTransport:
    """The request as raw HTTP/1.1 bytes in Triton's binary tensor extension."""

    def __init__(self, host: str, options: TritonOptions) -> None:
        self.timeout = options.timeout
        self.host, self.port = host_port(host, 8000)
        meta, max_batch = interface_http(self.host, self.port, options.model)
        arrays = build_arrays(meta, max_batch, options)
        outputs = [t["name"] for t in meta["outputs"]]
        self.request_bytes = http_request(options.model, self.host, self.port, arrays, outputs)
        self.rows = batch_rows(arrays, max_batch)

    def new_connection(self) -> RawHttpConnection:
        """A fresh keep-alive connection."""
        return RawHttpConnection(self.host, self.port, self.timeout)

    def send(self, connection: RawHttpConnection) -> str | None:
        """One round trip; an HTTP status other than 200 is the error kind ``http_<status>``."""
        status = connection.roundtrip(self.request_bytes)
        return None if status == 200 else f"http_{status}"


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
        arrays = build_arrays(meta, max_batch, options)
        self.request = grpc_request(options.model, arrays, [t["name"] for t in meta["outputs"]])
        self.rows = batch_rows(arrays, max_batch)

    def new_connection(self) -> Any:
        """A stub on a fresh channel."""
        from tritonclient.grpc import service_pb2_grpc

        channel = self.grpc.insecure_channel(
            self.target, options=[("grpc.max_receive_message_length", MAX_GRPC_MESSAGE)]
        )
        return service_pb2_grpc.GRPCInferenceServiceStub(channel)

    def send(self, stub: Any) -> str | None:
        """One ``ModelInfer`` call; a failed call is the error kind ``grpc_<code>``."""
        try:
            stub.ModelInfer(self.request, timeout=self.timeout)
        except self.grpc.RpcError as e:
            return f"grpc_{e.code().name.lower()}"
        return None


def make_transport(host: str, options: TritonOptions) -> HttpTransport | GrpcTransport:
    """The transport of ``--triton-protocol``."""
    if options.protocol == "grpc":
        return GrpcTransport(host, options)
    return HttpTransport(host, options)


@dataclass
class EngineConnection:
    """One closed-loop connection of the HTTP engine."""

    sock: Any
    start: float
    """When its request in flight was sent (perf_counter)."""
    buffer: bytes = b""
    """Response bytes received and not yet framed."""
    out: bytes = b""
    """Request bytes still to send when the socket is writable."""


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
        self.request = transport.request_bytes
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
        conn = EngineConnection(sock=sock, start=time.perf_counter())
        fd = sock.fileno()
        self.connections[fd] = conn
        try:
            self.epoll.register(fd, EPOLL_READ)
            self._send(conn)
        except Exception as e:  # e.g. reset right after accept under overload
            self._fail(fd, e)

    def _send(self, conn: EngineConnection) -> None:
        conn.start = time.perf_counter()
        data = self.request
        sent = conn.sock.send(data)
        if sent < len(data):  # a large payload: finish when the socket is writable
            conn.out = data[sent:]
            self.epoll.modify(conn.sock.fileno(), EPOLL_READ_WRITE)

    def _close(self, fd: int, error: str | None) -> None:
        conn = self.connections.pop(fd)
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
        buffer = conn.buffer + chunk
        while True:
            framed = frame_response(buffer)
            if framed is None:
                conn.buffer = buffer
                return
            status, rest = framed
            now = time.perf_counter()
            self.recorder.record(conn.start, now, None if status == 200 else f"http_{status}")
            buffer = rest
            if not rest:
                conn.buffer = b""
                self._send(conn)
                return


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


STATE = ProcessState()


def worker_id(environment: Any) -> str:
    """This process's name in the windows it reports."""
    runner = environment.runner
    return str(getattr(runner, "client_id", None) or f"local-{os.getpid()}")


def send_windows(environment: Any, everything: bool) -> None:
    """Send the windows that are over (or all of them) to the master."""
    if STATE.recorder is None:
        return
    message = WindowMessage(worker=worker_id(environment), windows=STATE.recorder.drain(everything))
    if message["windows"]:
        environment.runner.send_message(MESSAGE, message)


def report_forever(environment: Any) -> None:
    """Send finished windows a few times per window."""
    while True:
        gevent.sleep(min(0.25, STATE.recorder.window_s / 4) if STATE.recorder else 0.25)
        send_windows(environment, everything=False)


@events.test_start.add_listener
def _on_test_start(environment: Any, **_: Any) -> None:
    if isinstance(environment.runner, MasterRunner):
        return
    options = TritonOptions.from_parsed(environment.parsed_options)
    STATE.recorder = Recorder(options.t0 or time.time(), options.window)
    STATE.reporter = gevent.spawn(report_forever, environment)


@events.test_stop.add_listener
def _on_test_stop(environment: Any, **_: Any) -> None:
    if isinstance(environment.runner, MasterRunner):
        return
    if STATE.reporter is not None:
        STATE.reporter.kill(block=False)
        STATE.reporter = None
    if STATE.engine is not None:
        STATE.engine.stop()
    send_windows(environment, everything=True)


@events.init.add_listener
def _on_init(environment: Any, **_: Any) -> None:
    runner = environment.runner
    if isinstance(runner, (MasterRunner, LocalRunner)) and not isinstance(runner, WorkerRunner):
        STATE.collector = Collector(environment.parsed_options.triton_results)
        runner.register_message(MESSAGE, STATE.collector.receive)


@events.quitting.add_listener
def _on_quitting(environment: Any, **_: Any) -> None:
    if STATE.collector is not None and not environment.parsed_options.triton_results:
        print(STATE.collector.summary())


# -- the users ----------------------------------------------------------------------------


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

    def __init__(self, recorder: Recorder, transport: Transport, options: TritonOptions) -> None:
        self.recorder = recorder
        self.transport = transport
        self.options = options
        self.rng = random.Random(options.seed + os.getpid())
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
        options = TritonOptions.from_parsed(self.environment.parsed_options)
        if not options.model:
            raise ValueError("--triton-model (or TRITONGEN_MODEL) is required")
        self.transport = make_transport(self.host or "127.0.0.1:8000", options)
        self.options = options

    @task
    def load(self) -> None:
        """Run until Locust stops this user."""
        recorder = STATE.recorder
        assert recorder is not None
        if self.options.user_rate > 0:
            OpenLoop(recorder, self.transport, self.options).run()
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
