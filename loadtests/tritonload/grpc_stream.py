"""Streaming (decoupled) models over gRPC ``ModelStreamInfer``: one stream per user, requests matched by id.

A decoupled model answers one request with any number of responses, then a final flag.
Each user keeps one bidirectional stream; its requests go out with an id, and a reader
greenlet matches the responses, which carry that id, back to them, so both the closed loop
and the open loop (several requests in flight on the user's stream) work.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import gevent

from .options import TritonOptions
from .payloads import ModelMeta, batch_rows, build_steps, grpc_request
from .recording import Recorder
from .server_api import host_port, interface_grpc
from .transports import MAX_GRPC_MESSAGE, StepStarts, grpc_failure, timed_out

if TYPE_CHECKING:
    from .loops import TransportLoad
    from .state import ProcessState

# A request counts as in flight until its final response: Triton sends the flag in the
# ``triton_final_response`` response parameter, and the request asks for an empty response
# carrying it when the model sends the flag on its own. A stream that ends cleanly also ends
# its requests.
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
    final: bool = False
    """Whether its final response came (not the stream's end)."""


class StreamCall:
    """One ``ModelStreamInfer`` call: requests go in through a queue, a greenlet reads the responses."""

    def __init__(self, channel: Any, recorder: Recorder | None) -> None:
        from gevent.queue import Queue
        from tritonclient.grpc import service_pb2

        self.recorder = recorder
        """Where the responses are counted."""
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
            error = grpc_failure(e)
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
            if self.recorder is not None:
                self.recorder.count("responses", now)
        final = FINAL_RESPONSE in infer.parameters and infer.parameters[FINAL_RESPONSE].bool_param
        pending.final = pending.final or final
        if final or pending.error:
            pending.end = now
            del self.pending[infer.id]
            pending.done.set()
            if self.retired and not self.pending:
                self.close()  # the last request a retired stream owed has ended


class StreamSession:
    """The stream one user's requests share; a new one replaces it once it is retired or broken."""

    def __init__(self, channel: Any, recorder: Recorder | None) -> None:
        self.channel = channel
        self.recorder = recorder
        self.call: StreamCall | None = None

    def current(self) -> StreamCall:
        """The stream new requests go to."""
        if self.call is None or self.call.closed or self.call.retired:
            self.call = StreamCall(self.channel, self.recorder)
        return self.call


def open_channel(host: str, model: str) -> tuple[Any, ModelMeta, int]:
    """A gRPC channel to ``host`` that cooperates with gevent, and ``model``'s interface and max batch."""
    import grpc
    from grpc.experimental import gevent as grpc_gevent
    from tritonclient.grpc import service_pb2_grpc

    grpc_gevent.init_gevent()
    target = "{}:{}".format(*host_port(host, 8001))
    channel = grpc.insecure_channel(target, options=[("grpc.max_receive_message_length", MAX_GRPC_MESSAGE)])
    meta, max_batch = interface_grpc(service_pb2_grpc.GRPCInferenceServiceStub(channel), model)
    return channel, meta, max_batch


class GrpcStreamTransport:
    """A decoupled model's request over gRPC streams: one stream per user, requests matched by id."""

    def __init__(
        self, host: str, options: TritonOptions, starts: StepStarts, recorder: Recorder | None
    ) -> None:
        from gevent.event import Event

        self.timeout = options.timeout
        self.channel, meta, max_batch = open_channel(host, options.model)
        steps = build_steps(meta, max_batch, options)
        outputs = [t["name"] for t in meta["outputs"]]
        self.requests = []  # serialised once; each send appends its request id
        for arrays in steps:
            request = grpc_request(options.model, arrays, outputs, options.model_version)
            request.parameters[EMPTY_FINAL_RESPONSE].bool_param = True
            self.requests.append(request.SerializeToString())
        self.step = starts.first(len(self.requests))
        self.rows = batch_rows(steps[0], max_batch)
        self.recorder = recorder
        self.session = StreamSession(self.channel, recorder)
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
            return timed_out(self.timeout)
        if pending.error is None:
            record_stream(pending, self.recorder)
        elif call.closed:
            gevent.sleep(0.01)  # the stream broke: do not spin on a dead server
        return pending.error


def record_stream(pending: PendingRequest, recorder: Recorder | None) -> None:
    """A finished request's further figures.

    Its latencies go in the window of its final response, its responses in the window its
    request is counted in.
    """
    if recorder is None:
        return
    times, end = pending.times, pending.end
    if times:
        recorder.record_extra("first_response", end, times[0] - pending.start)
    for before, after in itertools.pairwise(times):
        recorder.record_extra("between_responses", end, after - before)
    recorder.defer_count("request_responses", len(times))  # in the window its request is counted in


def user_load(host: str, options: TritonOptions, process: ProcessState, environment: Any) -> TransportLoad:
    """The stream kind's load of one user: requests over gRPC streams, each until its final response.

    Raises:
        ValueError: streaming over HTTP.
    """
    from .loops import TransportLoad

    if options.protocol != "grpc":
        raise ValueError("--triton-streaming needs --triton-protocol grpc (HTTP cannot stream)")
    transport = GrpcStreamTransport(host, options, process.step_starts, process.recorder)
    return TransportLoad(transport, options, process, environment)
