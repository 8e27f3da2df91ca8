"""A user's prepared requests and how to send them: the plain HTTP and gRPC transports.

A transport builds its requests once (one per data step, sent in turn) from the model's
metadata and sends one, returning an error kind or None. The HTTP one also feeds the
closed-loop engine (:mod:`.http_engine`); streaming, sequences and shared memory have
transports of their own (:mod:`.grpc_stream`, :mod:`.sequences`, :mod:`.shared_memory`).
"""

from __future__ import annotations

import itertools
import os
import time
from typing import TYPE_CHECKING, Any, Protocol

from .http_wire import RawHttpConnection, error_text
from .options import TritonOptions
from .payloads import ModelMeta, batch_rows, build_steps, grpc_request, http_request
from .recording import Recorder
from .request_data import Array
from .request_ids import PLACEHOLDER, RequestIds, id_offset
from .server_api import host_port, interface_grpc, interface_http
from .shared import one_line
from .validation import Validator, make_validator

if TYPE_CHECKING:
    from .loops import TransportLoad
    from .state import ProcessState

MAX_GRPC_MESSAGE = 2**31 - 1


class Failure(str):
    """An error kind (``http_500``, ``timeout`` …) that also carries what went wrong, in one line.

    It is the kind wherever a kind is counted; the recorder keeps the first message of each kind.
    """

    message: str

    def __new__(cls, kind: str, message: str) -> Failure:
        """The kind ``kind``, saying ``message``."""
        failure = super().__new__(cls, kind)
        failure.message = one_line(message)
        return failure


def timed_out(timeout_s: float) -> Failure:
    """The ``timeout`` kind of a request that had no (final) response within ``timeout_s``."""
    return Failure("timeout", f"no response within {timeout_s:g} s")


def error_kind(error: BaseException, timeout_s: float | None = None) -> str:
    """How a failed request is counted: a short name of what went wrong, carrying its message."""
    name = type(error).__name__
    text = f"{name}: {error}" if str(error) else name
    if isinstance(error, ConnectionRefusedError):
        return Failure("connection_refused", text)
    if isinstance(error, (ConnectionResetError, BrokenPipeError)):
        return Failure("connection_reset", text)
    if "timeout" in name.lower():
        return timed_out(timeout_s) if timeout_s is not None else Failure("timeout", text)
    return Failure(name, text)


def http_failure(status: int, response: bytes) -> Failure:
    """The kind ``http_<status>`` of a failed response, with what its body says."""
    return Failure(f"http_{status}", error_text(response))


def grpc_failure(error: Any, timeout_s: float | None = None) -> Failure:
    """The kind ``grpc_<code>`` of a failed call, with its status message (a deadline: the timeout)."""
    kind = f"grpc_{error.code().name.lower()}"
    if kind == "grpc_deadline_exceeded" and timeout_s is not None:
        return Failure(kind, f"no response within {timeout_s:g} s")
    details = error.details() if hasattr(error, "details") else ""
    return Failure(kind, details or kind)


class Transport(Protocol):
    """A prepared request and how to send it; ``send`` returns an error kind or None."""

    rows: int
    step: int
    """The request step the next ``send`` sends (a replayed schedule sets it before each send)."""

    def new_connection(self) -> Any:
        """A fresh connection to the server."""

    def send(self, connection: Any) -> str | None:
        """Send the request once and wait for its response."""


class StepStarts:
    """Where this process's users and connections start in the steps (so they do not cycle in lock-step)."""

    def __init__(self) -> None:
        self.started = itertools.count()

    def first(self, count: int) -> int:
        """The step a new user or connection starts at, of ``count``."""
        return (os.getpid() + next(self.started)) % count


class HttpTransport:
    """The requests (one per step, sent in turn) as raw HTTP/1.1 bytes in Triton's binary tensor extension.

    With expected outputs in the steps (and a ``recorder`` to count into), each response is checked.
    """

    validator: Validator | None = None
    recorder: Recorder | None = None
    ids: RequestIds | None = None

    def __init__(
        self,
        host: str,
        options: TritonOptions,
        starts: StepStarts,
        recorder: Recorder | None = None,
        ids: RequestIds | None = None,
    ) -> None:
        self.starts = starts
        self.timeout = options.timeout
        self.host, self.port = host_port(host, 8000)
        meta, max_batch = interface_http(self.host, self.port, options.model)
        steps = build_steps(meta, max_batch, options)
        outputs = [t["name"] for t in meta["outputs"]]
        request_id = PLACEHOLDER if ids is not None else None
        self.requests = [
            http_request(options.model_path, self.host, self.port, arrays, outputs, request_id)
            for arrays in steps
        ]
        self.ids = ids
        """Each request's id, written as it is sent (None: the requests carry none)."""
        self.id_offsets = [id_offset(r) for r in self.requests] if ids is not None else []
        self.step = starts.first(len(self.requests))
        self.rows = batch_rows(steps[0], max_batch)
        self.validator = make_validator(options, recorder)
        self.recorder = recorder

    def new_connection(self) -> RawHttpConnection:
        """A fresh keep-alive connection (keeping each response when they are checked)."""
        return RawHttpConnection(self.host, self.port, self.timeout, keep=self.validator is not None)

    def send(self, connection: RawHttpConnection) -> str | None:
        """One round trip of the next step; a status other than 200 is the error kind ``http_<status>``."""
        step = self.step
        self.step = step + 1 if step + 1 < len(self.requests) else 0
        request, ids, count = self.requests[step], self.ids, 0
        if ids is not None:  # a copy: an open loop's sends overlap
            count, request = ids.stamped(request, self.id_offsets[step])
        status = connection.roundtrip(request)
        if status != 200:
            return http_failure(status, connection.received.last)
        if ids is not None:
            ids.mark(count, connection.started, connection.ended)
        if self.recorder is not None:
            self.recorder.defer_split(*connection.split)
        return None if self.validator is None else self.validator.check_http(step, connection.received.last)

    def checkout(self) -> tuple[list[bytes], Any]:
        """What a new engine connection sends (the steps, in turn) and hands back when it closes (nothing).

        Requests that carry ids are the connection's own copies, each id written in place as it is sent.
        """
        if self.ids is not None:
            return [bytearray(request) for request in self.requests], None  # type: ignore[misc]
        return self.requests, None

    def checkin(self, slot: Any) -> None:
        """Take back what ``checkout`` handed out (the request here is shared: nothing to do)."""


class GrpcTransport:
    """The request as a gRPC ``ModelInferRequest``, over gevent-friendly channels.

    With expected outputs in the steps (and a ``recorder`` to count into), each response is checked.
    """

    validator: Validator | None = None

    def __init__(
        self,
        host: str,
        options: TritonOptions,
        starts: StepStarts,
        recorder: Recorder | None = None,
        ids: RequestIds | None = None,
    ) -> None:
        import grpc
        from grpc.experimental import gevent as grpc_gevent

        grpc_gevent.init_gevent()
        self.grpc = grpc
        self.starts = starts
        self.timeout = options.timeout
        self.target = "{}:{}".format(*host_port(host, 8001))
        meta, max_batch = interface_grpc(self.new_connection(), options.model)
        steps = self.build_steps(meta, max_batch, options)
        outputs = [t["name"] for t in meta["outputs"]]
        self.requests = [
            grpc_request(options.model, arrays, outputs, options.model_version) for arrays in steps
        ]
        self.step = starts.first(len(self.requests))
        self.rows = batch_rows(steps[0], max_batch)
        self.validator = make_validator(options, recorder)
        self.ids = ids

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
        request, ids, count = self.requests[step], self.ids, 0
        if ids is not None:  # the message is written out as the call starts, before any other send
            count = ids.proto_id(request)
        start = time.perf_counter()
        try:
            response = stub.ModelInfer(request, timeout=self.timeout)
        except self.grpc.RpcError as e:
            return grpc_failure(e, self.timeout)
        if ids is not None:
            ids.mark(count, start, time.perf_counter())
        return None if self.validator is None else self.validator.check_grpc(step, response)


def user_load(host: str, options: TritonOptions, process: ProcessState, environment: Any) -> TransportLoad:
    """The tensor kind's load of one user: the requests over raw HTTP or gRPC ``ModelInfer`` calls."""
    from .loops import TransportLoad

    kind = GrpcTransport if options.protocol == "grpc" else HttpTransport
    transport = kind(host, options, process.step_starts, process.recorder, process.request_ids)
    return TransportLoad(transport, options, process, environment)
