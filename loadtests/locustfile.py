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
import time
import urllib.request
from collections import deque
from collections.abc import Callable
from typing import Any

import gevent
import numpy as np
import numpy.typing as npt
from hdrh.histogram import HdrHistogram
from locust import User, events, task
from locust.runners import LocalRunner, MasterRunner, WorkerRunner

MESSAGE = "tritongen_window"
LOWEST_US, HIGHEST_US, DIGITS = 1, 120_000_000, 3
_NUMPY = {
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


@events.init_command_line_parser.add_listener
def _add_arguments(parser: Any) -> None:
    group = parser.add_argument_group("tritongen", "Triton load options")
    group.add_argument("--triton-model", env_var="TRITONGEN_MODEL", default="", help="Model to load.")
    group.add_argument(
        "--triton-protocol", env_var="TRITONGEN_PROTOCOL", default="http", choices=["http", "grpc"]
    )
    group.add_argument(
        "--triton-inputs",
        env_var="TRITONGEN_INPUTS",
        default="",
        help=".npz with one array per input (full shape).",
    )
    group.add_argument("--triton-batch-size", env_var="TRITONGEN_BATCH_SIZE", type=int, default=1)
    group.add_argument(
        "--triton-dynamic-dim", env_var="TRITONGEN_DYNAMIC_DIM", type=int, default=8, help="Value of -1 dims."
    )
    group.add_argument(
        "--triton-user-rate",
        env_var="TRITONGEN_USER_RATE",
        type=float,
        default=0.0,
        help="Open loop: requests/s each user schedules (0 = closed loop).",
    )
    group.add_argument(
        "--triton-arrival", env_var="TRITONGEN_ARRIVAL", default="constant", choices=["constant", "poisson"]
    )
    group.add_argument(
        "--triton-max-inflight",
        env_var="TRITONGEN_MAX_INFLIGHT",
        type=int,
        default=1024,
        help="Open loop: requests in flight per user; further sends are held back until one finishes.",
    )
    group.add_argument(
        "--triton-window", env_var="TRITONGEN_WINDOW", type=float, default=1.0, help="Window in s."
    )
    group.add_argument(
        "--triton-t0", env_var="TRITONGEN_T0", type=float, default=0.0, help="Epoch of window 0."
    )
    group.add_argument("--triton-results", env_var="TRITONGEN_RESULTS", default="", help="JSON-lines output.")
    group.add_argument("--triton-timeout", env_var="TRITONGEN_TIMEOUT", type=float, default=60.0)
    group.add_argument("--triton-seed", env_var="TRITONGEN_SEED", type=int, default=0)


# -- payloads ---------------------------------------------------------------------------


def _host_port(host: str, default_port: int) -> tuple[str, int]:
    for scheme in ("http://", "https://", "grpc://"):
        if host.startswith(scheme):
            host = host[len(scheme) :]
    host = host.rstrip("/")
    name, _, port = host.rpartition(":")
    return (name, int(port)) if name else (host, default_port)


def _interface_http(host: str, port: int, model: str) -> tuple[dict[str, Any], int]:
    def get(path: str) -> Any:
        with urllib.request.urlopen(f"http://{host}:{port}{path}", timeout=30) as response:
            return json.loads(response.read())

    return get(f"/v2/models/{model}"), int(get(f"/v2/models/{model}/config").get("max_batch_size", 0))


def _interface_grpc(stub: Any, model: str) -> tuple[dict[str, Any], int]:
    from google.protobuf import json_format
    from tritonclient.grpc import service_pb2

    meta = json_format.MessageToDict(
        stub.ModelMetadata(service_pb2.ModelMetadataRequest(name=model)), preserving_proto_field_name=True
    )
    config = stub.ModelConfig(service_pb2.ModelConfigRequest(name=model)).config
    for tensor in meta["inputs"]:
        tensor["shape"] = [int(d) for d in tensor.get("shape", [])]
    return meta, int(config.max_batch_size)


def _build_arrays(meta: dict[str, Any], max_batch: int, options: Any) -> dict[str, npt.NDArray[Any]]:
    if options.triton_inputs:
        with np.load(options.triton_inputs, allow_pickle=False) as data:
            return {name: data[name] for name in data.files}
    rng = np.random.default_rng(options.triton_seed)
    arrays = {}
    for tensor in meta["inputs"]:
        dims = [options.triton_dynamic_dim if int(d) == -1 else int(d) for d in tensor["shape"]]
        if max_batch > 0:
            dims[0] = options.triton_batch_size
        dtype = _NUMPY.get(tensor["datatype"])
        if dtype is None:
            arrays[tensor["name"]] = np.full(dims, b"tritongen", dtype=np.object_)
        elif np.issubdtype(dtype, np.floating):
            arrays[tensor["name"]] = rng.standard_normal(dims).astype(dtype)
        else:
            arrays[tensor["name"]] = rng.integers(0, 2, size=dims).astype(dtype)
    return arrays


def _datatype(array: npt.NDArray[Any]) -> str:
    if array.dtype == np.object_:
        return "BYTES"
    return next(name for name, dtype in _NUMPY.items() if np.dtype(dtype) == array.dtype)


def _raw(array: npt.NDArray[Any]) -> bytes:
    if array.dtype != np.object_:
        return np.ascontiguousarray(array).tobytes()
    chunks = []
    for item in array.reshape(-1):
        data = item if isinstance(item, bytes) else str(item).encode()
        chunks.append(len(data).to_bytes(4, "little") + data)
    return b"".join(chunks)


def _http_body(arrays: dict[str, npt.NDArray[Any]], outputs: list[str]) -> tuple[bytes, dict[str, str]]:
    """A request in Triton's binary tensor extension: JSON header, then raw tensor bytes."""
    raws = {name: _raw(array) for name, array in arrays.items()}
    header = {
        "inputs": [
            {
                "name": name,
                "shape": list(array.shape),
                "datatype": _datatype(array),
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


def _grpc_request(model: str, arrays: dict[str, npt.NDArray[Any]], outputs: list[str]) -> Any:
    from tritonclient.grpc import service_pb2

    request = service_pb2.ModelInferRequest(model_name=model)
    for name, array in arrays.items():
        tensor = request.inputs.add()
        tensor.name = name
        tensor.datatype = _datatype(array)
        tensor.shape.extend(array.shape)
        request.raw_input_contents.append(_raw(array))
    for name in outputs:
        request.outputs.add().name = name
    return request


# -- per-process recording ----------------------------------------------------------------


def _real_lock() -> Any:
    """A lock of the OS, not gevent's (Locust monkey-patches threading)."""
    from gevent.monkey import get_original

    return get_original("_thread", "allocate_lock")()


class Recorder:
    """Latencies of this process, one HDR histogram per wall-clock-aligned window."""

    def __init__(self, t0: float, window_s: float) -> None:
        self.t0 = t0
        self.window_s = window_s
        # perf_counter for durations, mapped to the wall clock once.
        self.wall_offset = time.time() - time.perf_counter()
        self.windows: dict[int, dict[str, Any]] = {}
        # The HTTP engine records from an OS thread; the reporter drains from the hub.
        self.lock = _real_lock()

    def _window(self, perf_time: float) -> dict[str, Any]:
        index = int((perf_time + self.wall_offset - self.t0) // self.window_s)
        window = self.windows.get(index)
        if window is None:
            window = {
                "index": index,
                "hist": HdrHistogram(LOWEST_US, HIGHEST_US, DIGITS),
                "errors": {},
                "sent": 0,
                "late": 0,
                "max_lag_us": 0.0,
                "held_back": 0,
                "max_hold_us": 0.0,
            }
            self.windows[index] = window
        return window

    def record(self, start: float, end: float, error: str | None) -> None:
        """Count one finished request; ``start`` is its scheduled (open loop) or actual send time."""
        with self.lock:
            window = self._window(end)
            if error is None:
                window["hist"].record_value(min(max(int((end - start) * 1e6), LOWEST_US), HIGHEST_US))
            else:
                window["errors"][error] = window["errors"].get(error, 0) + 1

    def sent(self, when: float, lag_s: float, held: bool = False) -> None:
        """Count one request leaving; ``lag_s`` is how late it left against its schedule.

        A send that was held back (``held``) left late because the in-flight cap was reached,
        not because the generator fell behind: its wait goes to ``max_hold_us``, not ``late``.
        """
        with self.lock:
            window = self._window(when)
            window["sent"] += 1
            if held:
                window["max_hold_us"] = max(window["max_hold_us"], lag_s * 1e6)
                return
            if lag_s > 0.001:
                window["late"] += 1
            window["max_lag_us"] = max(window["max_lag_us"], lag_s * 1e6)

    def hold(self, scheduled: float) -> None:
        """Count one send held back at its scheduled time (the in-flight cap was reached)."""
        with self.lock:
            self._window(scheduled)["held_back"] += 1

    def drain(self, everything: bool) -> list[dict[str, Any]]:
        """Windows that are over (or all of them), encoded for the master."""
        now_index = int((time.time() - self.t0) // self.window_s)
        with self.lock:
            ready = sorted(i for i in self.windows if everything or i < now_index)
            popped = [self.windows.pop(index) for index in ready]
        out = []
        for window in popped:
            index = window["index"]
            hist = window["hist"]
            out.append(
                {
                    "index": index,
                    "ok": hist.get_total_count(),
                    "errors": window["errors"],
                    "sent": window["sent"],
                    "hist": base64.b64encode(hist.encode()).decode() if hist.get_total_count() else "",
                    "late": window["late"],
                    "max_lag_us": window["max_lag_us"],
                    "held_back": window["held_back"],
                    "max_hold_us": window["max_hold_us"],
                    "final": everything,
                }
            )
        return out


_recorder: Recorder | None = None
_reporter: Any = None


def _send_windows(environment: Any, everything: bool) -> None:
    if _recorder is None:
        return
    payload = {"worker": _worker_id(environment), "windows": _recorder.drain(everything)}
    if payload["windows"]:
        environment.runner.send_message(MESSAGE, payload)


def _worker_id(environment: Any) -> str:
    runner = environment.runner
    return str(getattr(runner, "client_id", None) or f"local-{os.getpid()}")


def _report_forever(environment: Any) -> None:
    while True:
        gevent.sleep(min(0.25, _recorder.window_s / 4) if _recorder else 0.25)
        _send_windows(environment, everything=False)


@events.test_start.add_listener
def _on_test_start(environment: Any, **_: Any) -> None:
    global _recorder, _reporter
    if isinstance(environment.runner, MasterRunner):
        return
    options = environment.parsed_options
    t0 = options.triton_t0 or time.time()
    _recorder = Recorder(t0, options.triton_window)
    _reporter = gevent.spawn(_report_forever, environment)


@events.test_stop.add_listener
def _on_test_stop(environment: Any, **_: Any) -> None:
    global _reporter
    if isinstance(environment.runner, MasterRunner):
        return
    if _reporter is not None:
        _reporter.kill(block=False)
        _reporter = None
    if _engine is not None:
        _engine.stop()
    _send_windows(environment, everything=True)


# -- master side: merge and write ---------------------------------------------------------


class Collector:
    """On the master (or a lone local runner): write windows and keep the merged histogram."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.total = HdrHistogram(LOWEST_US, HIGHEST_US, DIGITS)
        self.errors: dict[str, int] = {}
        self.held_back = 0
        if path:
            open(path, "w").close()  # truncate once

    def receive(self, environment: Any, msg: Any, **_: Any) -> None:
        """Handle one worker message: append its windows, merge its histograms."""
        data = msg.data
        if self.path:
            with open(self.path, "a") as out:
                for window in data["windows"]:
                    out.write(json.dumps({"worker": data["worker"], **window}) + "\n")
        for window in data["windows"]:
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


_collector: Collector | None = None


@events.init.add_listener
def _on_init(environment: Any, **_: Any) -> None:
    global _collector
    runner = environment.runner
    if isinstance(runner, (MasterRunner, LocalRunner)) and not isinstance(runner, WorkerRunner):
        _collector = Collector(environment.parsed_options.triton_results)
        runner.register_message(MESSAGE, _collector.receive)


@events.quitting.add_listener
def _on_quitting(environment: Any, **_: Any) -> None:
    if _collector is not None and not environment.parsed_options.triton_results:
        print(_collector.summary())


# -- the users ----------------------------------------------------------------------------


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
        framed = _frame(buffer)
        while framed is None:
            buffer += self._recv()
            framed = _frame(buffer)
        status, self.buffer = framed
        return status

    def _recv(self) -> bytes:
        chunk: bytes = self.sock.recv(262144)
        if not chunk:
            raise ConnectionResetError("the server closed the connection")
        return chunk

    def close(self) -> None:
        """Close the socket."""
        self.sock.close()


class HttpEngine:
    """Every closed-loop HTTP connection of this process, driven by one OS thread with epoll.

    Each connection sends the prepared request, waits for the whole response, records the
    latency and sends again: a closed loop per connection. Doing this in a plain epoll
    loop, rather than a greenlet per connection, roughly halves the generator's CPU per
    request, so the load generator is not what limits the measurement.
    """

    def __init__(self, host: str, port: int, request: bytes, recorder: Recorder, timeout: float) -> None:
        from gevent.monkey import get_original

        self.socket_module = __import__("socket")
        self.real_socket = get_original("socket", "socket")
        self.real_sleep = get_original("time", "sleep")
        self.epoll = get_original("select", "epoll")()
        self.host, self.port, self.request, self.recorder, self.timeout = (
            host,
            port,
            request,
            recorder,
            timeout,
        )
        self.lock = _real_lock()
        self.pending: list[int] = []  # connections to open
        self.connections: dict[int, dict[str, Any]] = {}
        self.wanted = 0
        self.stopped = False
        self.finished = False
        get_original("_thread", "start_new_thread")(self._run, ())

    def add(self) -> None:
        """Open one more closed-loop connection."""
        with self.lock:
            self.wanted += 1
            self.pending.append(1)

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

    def _fail(self, fd: int, error: BaseException | str) -> None:
        """Count a failed request, drop its connection and open a new one."""
        self._close(fd, error if isinstance(error, str) else _error_kind(error))
        with self.lock:
            self.pending.append(1)

    def _expire(self, now: float) -> None:
        """Fail requests older than the timeout (a server that never answers must not stall a slot)."""
        for fd, conn in list(self.connections.items()):
            if now - conn["start"] > self.timeout:
                self._fail(fd, "timeout")

    def _open(self) -> None:
        sock_mod = self.socket_module
        sock = self.real_socket(sock_mod.AF_INET, sock_mod.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect((self.host, self.port))
        except OSError as e:
            sock.close()
            self.recorder.record(time.perf_counter(), time.perf_counter(), _error_kind(e))
            self.real_sleep(0.01)  # do not spin on a dead server
            with self.lock:
                self.pending.append(1)
            return
        sock.setsockopt(sock_mod.IPPROTO_TCP, sock_mod.TCP_NODELAY, 1)
        sock.setblocking(False)
        conn = {"sock": sock, "buffer": b"", "out": b"", "start": time.perf_counter()}
        fd = sock.fileno()
        self.connections[fd] = conn
        try:
            self.epoll.register(fd, 0x001 | 0x008 | 0x010)  # EPOLLIN | EPOLLERR | EPOLLHUP
            self._send(conn)
        except Exception as e:  # e.g. reset right after accept under overload
            self._fail(fd, e)

    def _send(self, conn: dict[str, Any]) -> None:
        conn["start"] = time.perf_counter()
        data = self.request
        sent = conn["sock"].send(data)
        if sent < len(data):  # a large payload: finish when the socket is writable
            conn["out"] = data[sent:]
            self.epoll.modify(conn["sock"].fileno(), 0x001 | 0x004 | 0x008 | 0x010)

    def _close(self, fd: int, error: str | None) -> None:
        conn = self.connections.pop(fd)
        if error is not None:
            self.recorder.record(conn["start"], time.perf_counter(), error)
        with contextlib.suppress(OSError):
            self.epoll.unregister(fd)
        conn["sock"].close()

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
            with self.lock:
                opening, self.pending = len(self.pending), []
                excess = len(self.connections) + opening - self.wanted
            for _ in range(opening):
                self._open()
            for fd in list(self.connections)[: max(0, excess)]:
                self._close(fd, None)
            for fd, mask in self.epoll.poll(0.05):
                conn = self.connections.get(fd)
                if conn is None:
                    continue
                try:
                    if mask & 0x004 and conn["out"]:
                        sent = conn["sock"].send(conn["out"])
                        conn["out"] = conn["out"][sent:]
                        if not conn["out"]:
                            self.epoll.modify(fd, 0x001 | 0x008 | 0x010)
                    if mask & (0x001 | 0x008 | 0x010):
                        self._receive(conn)
                except Exception as e:
                    self._fail(fd, e)
            now = time.perf_counter()
            if now >= next_expiry:
                self._expire(now)
                next_expiry = now + 1.0

    def _receive(self, conn: dict[str, Any]) -> None:
        chunk = conn["sock"].recv(262144)
        if not chunk:
            raise ConnectionResetError("the server closed the connection")
        buffer = conn["buffer"] + chunk
        while True:
            framed = _frame(buffer)
            if framed is None:
                conn["buffer"] = buffer
                return
            status, rest = framed
            now = time.perf_counter()
            self.recorder.record(conn["start"], now, None if status == 200 else f"http_{status}")
            buffer = rest
            if not rest:
                conn["buffer"] = b""
                self._send(conn)
                return


def _frame(buffer: bytes) -> tuple[int, bytes] | None:
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


_engine: HttpEngine | None = None


class _Transport:
    """One connection to the server and a prepared request; ``send`` returns an error kind or None."""

    send: Callable[[Any], str | None]
    new_connection: Callable[[], Any]

    def __init__(self, host: str, options: Any) -> None:
        self.model = options.triton_model
        self.timeout = options.triton_timeout
        if options.triton_protocol == "grpc":
            self._init_grpc(host, options)
        else:
            self._init_http(host, options)

    def _init_http(self, host: str, options: Any) -> None:
        self.host, self.port = _host_port(host, 8000)
        meta, max_batch = _interface_http(self.host, self.port, self.model)
        arrays = _build_arrays(meta, max_batch, options)
        body, headers = _http_body(arrays, [t["name"] for t in meta["outputs"]])
        head = f"POST /v2/models/{self.model}/infer HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
        head += "".join(f"{key}: {value}\r\n" for key, value in headers.items())
        head += f"Content-Length: {len(body)}\r\n\r\n"
        self.request_bytes = head.encode() + body
        self.rows = next(iter(arrays.values())).shape[0] if max_batch > 0 else 1
        self.new_connection = lambda: RawHttpConnection(self.host, self.port, self.timeout)
        self.send = self._send_http

    def _send_http(self, connection: RawHttpConnection) -> str | None:
        status = connection.roundtrip(self.request_bytes)
        return None if status == 200 else f"http_{status}"

    def _init_grpc(self, host: str, options: Any) -> None:
        import grpc
        from grpc.experimental import gevent as grpc_gevent
        from tritonclient.grpc import service_pb2_grpc

        grpc_gevent.init_gevent()
        self.grpc = grpc
        target = "{}:{}".format(*_host_port(host, 8001))
        channel = grpc.insecure_channel(target, options=[("grpc.max_receive_message_length", 2**31 - 1)])
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        meta, max_batch = _interface_grpc(stub, self.model)
        arrays = _build_arrays(meta, max_batch, options)
        self.request = _grpc_request(self.model, arrays, [t["name"] for t in meta["outputs"]])
        self.rows = next(iter(arrays.values())).shape[0] if max_batch > 0 else 1
        self.new_connection = lambda: service_pb2_grpc.GRPCInferenceServiceStub(
            grpc.insecure_channel(target, options=[("grpc.max_receive_message_length", 2**31 - 1)])
        )
        self.send = self._send_grpc

    def _send_grpc(self, stub: Any) -> str | None:
        try:
            stub.ModelInfer(self.request, timeout=self.timeout)
        except self.grpc.RpcError as e:
            return f"grpc_{e.code().name.lower()}"
        return None


TIMER_SLACK_S = 0.001


def _wait_until(deadline: float, clock: Callable[[], float] = time.perf_counter) -> None:
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


def _error_kind(error: BaseException) -> str:
    name = type(error).__name__
    if isinstance(error, ConnectionRefusedError):
        return "connection_refused"
    if isinstance(error, (ConnectionResetError, BrokenPipeError)):
        return "connection_reset"
    if "timeout" in name.lower():
        return "timeout"
    return name


class TritonUser(User):
    """One closed-loop stream of requests, or (with ``--triton-user-rate``) one open-loop schedule."""

    def on_start(self) -> None:
        """Prepare the request and a connection."""
        options = self.environment.parsed_options
        if not options.triton_model:
            raise ValueError("--triton-model (or TRITONGEN_MODEL) is required")
        self.transport = _Transport(self.host or "127.0.0.1:8000", options)
        self.options = options

    @task
    def load(self) -> None:
        """Run until Locust stops this user."""
        if self.options.triton_user_rate > 0:
            self._open_loop()
        else:
            self._closed_loop()

    def _closed_loop(self) -> None:
        global _engine
        recorder, transport = _recorder, self.transport
        assert recorder is not None
        if self.options.triton_protocol == "http":
            if _engine is None or _engine.stopped:
                _engine = HttpEngine(
                    transport.host, transport.port, transport.request_bytes, recorder, transport.timeout
                )
            _engine.add()
            try:
                while True:
                    gevent.sleep(3600)
            finally:
                _engine.remove()
        connection = transport.new_connection()
        clock = time.perf_counter
        while True:
            start = clock()
            try:
                error = transport.send(connection)
            except Exception as e:  # every failure is counted by kind, never raised
                error = _error_kind(e)
                gevent.sleep(0.01)  # do not spin on a dead server
                connection = transport.new_connection()
            recorder.record(start, clock(), error)

    def _open_loop(self) -> None:
        """Send on schedule; at the in-flight cap, hold sends back instead of dropping them.

        A held-back send waits in a queue and goes out, oldest first, as soon as a request
        in flight finishes; its latency still counts from its scheduled time, so a server
        that pauses shows in the tail rather than as requests that were never sent.
        """
        recorder, transport, options = _recorder, self.transport, self.options
        assert recorder is not None
        rate = options.triton_user_rate
        poisson = options.triton_arrival == "poisson"
        rng = random.Random(options.triton_seed + os.getpid())
        idle: list[Any] = []
        held: deque[float] = deque()  # scheduled times of the sends held back, oldest first
        in_flight = [0]
        clock = time.perf_counter

        def fire(scheduled: float) -> None:
            """One slot in flight: send, then take over held-back sends while there are any."""
            try:
                while True:
                    try:
                        connection = idle.pop() if idle else transport.new_connection()
                        error = transport.send(connection)
                        idle.append(connection)
                    except Exception as e:  # a failed connect or request is counted, never raised
                        error = _error_kind(e)
                    recorder.record(scheduled, clock(), error)
                    if not held:
                        return
                    scheduled = held.popleft()
                    now = clock()
                    recorder.sent(now, now - scheduled, held=True)
            finally:
                in_flight[0] -= 1

        next_at = clock()
        while True:
            next_at += rng.expovariate(rate) if poisson else 1.0 / rate
            _wait_until(next_at, clock)
            if in_flight[0] >= options.triton_max_inflight:
                held.append(next_at)
                recorder.hold(next_at)
                continue
            now = clock()
            recorder.sent(now, now - next_at)
            in_flight[0] += 1
            gevent.spawn(fire, next_at)
