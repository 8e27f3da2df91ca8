"""System shared memory (``--triton-shared-memory system``): tensors in POSIX regions the server maps.

Like perf_analyzer's ``--shared-memory system``: a request names regions registered with the
server instead of carrying tensor data, and the server writes the outputs into them. Each
process writes every input (of every step) once into one region and gives each connection an
output region of its own, so a connection's requests never change. Only for a server on this host.
"""

from __future__ import annotations

import contextlib
import json
import os
import urllib.request
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, cast

import gevent.lock

from .http_wire import RawHttpConnection
from .options import TritonOptions
from .payloads import ModelMeta, batch_rows, build_steps, raw_bytes, wire_datatype
from .recording import real_lock
from .request_data import Array, tensor_byte_size
from .server_api import host_port, interface_grpc, interface_http
from .transports import GrpcTransport, HttpTransport, StepStarts, grpc_failure, http_failure

if TYPE_CHECKING:
    from .loops import TransportLoad
    from .state import ProcessState

# Regions are named ``<prefix><pid>_in`` and ``<prefix><pid>_out<k>``: whoever set the prefix
# (``--triton-shm-prefix``; tritongen puts its own pid and a random token in it) finds and
# removes what a killed process left behind.
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
        size = tensor_byte_size(tensor["datatype"], dims)
        if size is not None:
            sizes[tensor["name"]] = size
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


class ShmSessions:
    """This process's session, created by its first user that needs it (a forked worker starts its own)."""

    def __init__(self) -> None:
        self.by_pid: dict[int, ShmSession] = {}
        self.creating = gevent.lock.Semaphore()
        """Held while a user creates this process's session (registering yields to the other users)."""

    def session(
        self,
        control: ShmControl,
        options: TritonOptions,
        meta: ModelMeta,
        max_batch: int,
        build: RequestBuilder,
    ) -> tuple[ShmSession, int]:
        """This process's session (created on first use) with one more slot reserved; and the batch rows.

        Raises:
            ValueError: an output of unknown size and no ``--triton-output-shm-size``.
        """
        with self.creating:  # the users of a process start side by side: one creates the session
            session = self.by_pid.get(os.getpid())
            if session is None:
                steps = build_steps(meta, max_batch, options)
                most_rows = max(batch_rows(arrays, max_batch) for arrays in steps)
                outputs = output_byte_sizes(meta, max_batch, most_rows, options.output_shm_size)
                prefix = options.shm_prefix or f"tritongen_{os.getpid()}_{os.urandom(4).hex()}_"
                session = ShmSession(control, prefix, steps, outputs, build)
                session.rows = batch_rows(steps[0], max_batch)
                self.by_pid[os.getpid()] = session
        session.reserve()
        return session, session.rows

    def close(self) -> None:
        """Unregister and remove this process's regions (the test stopped)."""
        session = self.by_pid.pop(os.getpid(), None)
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


def shm_grpc_request(model: str, inputs: list[ShmTensor], outputs: list[ShmTensor], version: str = "") -> Any:
    """A ``ModelInferRequest`` whose tensors lie in shared memory (``parameters``, no contents)."""
    from tritonclient.grpc import service_pb2

    def point(parameters: Any, tensor: ShmTensor) -> None:
        parameters["shared_memory_region"].string_param = tensor.region
        parameters["shared_memory_byte_size"].int64_param = tensor.size
        parameters["shared_memory_offset"].int64_param = tensor.offset

    request = service_pb2.ModelInferRequest(model_name=model, model_version=version)
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

    def __init__(self, host: str, port: int, timeout: float, session: ShmSession, starts: StepStarts) -> None:
        super().__init__(host, port, timeout)
        slot = session.take()
        assert slot is not None
        self.requests: list[bytes] = slot.requests
        self.step = starts.first(len(self.requests))
        weakref.finalize(self, session.give, slot)

    def next_request(self) -> bytes:
        """The request of the next step."""
        step = self.step
        self.step = step + 1 if step + 1 < len(self.requests) else 0
        return self.requests[step]


class ShmHttpTransport(HttpTransport):
    """HTTP requests whose tensors lie in shared memory: a prepared request per output region."""

    def __init__(self, host: str, options: TritonOptions, starts: StepStarts, sessions: ShmSessions) -> None:
        self.starts = starts
        self.timeout = options.timeout
        self.host, self.port = host_port(host, 8000)
        meta, max_batch = interface_http(self.host, self.port, options.model)

        def build(inputs: list[ShmTensor], outputs: list[ShmTensor]) -> bytes:
            return shm_http_request(options.model_path, self.host, self.port, inputs, outputs)

        control = HttpShmControl(self.host, self.port, options.timeout)
        self.session, self.rows = sessions.session(control, options, meta, max_batch, build)
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
        return ShmHttpConnection(self.host, self.port, self.timeout, self.session, self.starts)

    def send(self, connection: RawHttpConnection) -> str | None:
        """One round trip of the next step; a status other than 200 is the error kind ``http_<status>``."""
        status = connection.roundtrip(cast(ShmHttpConnection, connection).next_request())
        return None if status == 200 else http_failure(status, connection.received.last)


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

    def __init__(self, host: str, options: TritonOptions, starts: StepStarts, sessions: ShmSessions) -> None:
        import grpc
        from grpc.experimental import gevent as grpc_gevent

        grpc_gevent.init_gevent()
        self.grpc = grpc
        self.starts = starts
        self.timeout = options.timeout
        self.target = "{}:{}".format(*host_port(host, 8001))
        stub = super().new_connection()
        meta, max_batch = interface_grpc(stub, options.model)

        def build(inputs: list[ShmTensor], outputs: list[ShmTensor]) -> Any:
            return shm_grpc_request(options.model, inputs, outputs, options.model_version)

        control = GrpcShmControl(stub, options.timeout)
        self.session, self.rows = sessions.session(control, options, meta, max_batch, build)

    def new_connection(self) -> ShmGrpcConnection:
        """A stub on a fresh channel, with an output region of its own."""
        slot = self.session.take()
        assert slot is not None
        steps = len(slot.requests)
        connection = ShmGrpcConnection(super().new_connection(), slot.requests, self.starts.first(steps))
        weakref.finalize(connection, self.session.give, slot)
        return connection

    def send(self, connection: ShmGrpcConnection) -> str | None:
        """One ``ModelInfer`` call; a failed call is the error kind ``grpc_<code>``."""
        try:
            connection.stub.ModelInfer(connection.next_request(), timeout=self.timeout)
        except self.grpc.RpcError as e:
            return grpc_failure(e, self.timeout)
        return None


def user_load(host: str, options: TritonOptions, process: ProcessState, environment: Any) -> TransportLoad:
    """The shared-memory kind's load of one user: tensors in regions registered with the server."""
    from .loops import TransportLoad

    kind = ShmGrpcTransport if options.protocol == "grpc" else ShmHttpTransport
    return TransportLoad(kind(host, options, process.step_starts, process.shm), options, process, environment)
