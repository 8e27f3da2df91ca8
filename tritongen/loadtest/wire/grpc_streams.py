"""Requests on Triton's gRPC streams (``ModelStreamInfer``) read off a capture: a decoupled model's answers.

A load user keeps one HTTP/2 stream and sends its requests on it one after the other, each
answered by any number of responses and then the final flag (``triton_final_response``). The
stream's DATA frames are put back together per side and cut into gRPC messages (a flag byte and
a 4-byte length before each); each client message begins a request, at the time its first byte
crossed the wire. Each server message is read as a ``ModelStreamInferResponse`` and goes to the
request of its id (requests in flight together answer in any order): one with output contents is
an event, at the time its last byte crossed (when the client could read it whole), the one with
the final flag ends the request, one with an error drops it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from google.protobuf.message import DecodeError

from tritongen.loadtest.wire.http2 import DATA, Frame, frames
from tritongen.loadtest.wire.packets import Connection, Joined
from tritongen.loadtest.wire.requests import WireRequest

MESSAGE_HEAD = 5
FINAL_RESPONSE = "triton_final_response"


def _messages(stream_frames: list[Frame]) -> Iterator[tuple[int, int, bytes]]:
    """One side's gRPC messages on one stream: when its first and last bytes crossed, and its bytes."""
    joined = Joined(stream_frames, lambda frame: frame.payload)
    data, holding = joined.data, joined.holding

    position = 0
    while position + MESSAGE_HEAD <= len(data):
        length = int.from_bytes(data[position + 1 : position + MESSAGE_HEAD], "big")
        end = position + MESSAGE_HEAD + length
        if end > len(data):
            return
        yield holding(position).first_ns, holding(end - 1).last_ns, data[position + MESSAGE_HEAD : end]
        position = end


def grpc_stream_requests(connection: Connection) -> list[WireRequest]:
    """The connection's streamed requests that got their final response, in the order they were sent."""
    sides: dict[tuple[int, bool], list[Frame]] = {}
    for to_server in (True, False):
        for frame in frames(connection, to_server):
            if frame.kind == DATA and frame.stream:
                sides.setdefault((frame.stream, to_server), []).append(frame)
    done: list[WireRequest] = []
    for (stream, to_server), sent in sides.items():
        if not to_server:
            continue
        with contextlib.suppress(DecodeError):  # another method's stream (metadata, health): not a stream's
            requests = {
                _request_id(message): WireRequest(first_ns=first) for first, _, message in _messages(sent)
            }
            done += _answered(requests, _messages(sides.get((stream, False), [])))
    return sorted(done, key=lambda request: request.first_ns)


def _request_id(message: bytes) -> str:
    """A ``ModelInferRequest``'s id (the load generator gives each request of a stream its own)."""
    from tritonclient.grpc import service_pb2

    return str(service_pb2.ModelInferRequest.FromString(message).id)


def _answered(
    requests: dict[str, WireRequest], responses: Iterator[tuple[int, int, bytes]]
) -> list[WireRequest]:
    """The requests of one stream whose final response came, each with its events, by the responses' ids.

    Requests in flight together (an open loop) answer in any order; a response with an error ends
    its request untimed, as the client counts it failed.
    """
    from tritonclient.grpc import service_pb2

    done: list[WireRequest] = []
    for _, last, message in responses:
        response = service_pb2.ModelStreamInferResponse.FromString(message)
        infer = response.infer_response
        request = requests.get(infer.id)
        if request is None or request.complete:
            continue
        if response.error_message:
            del requests[infer.id]
            continue
        if infer.raw_output_contents or infer.outputs:
            request.events_ns.append(last)
        if FINAL_RESPONSE in infer.parameters and infer.parameters[FINAL_RESPONSE].bool_param:
            request.last_ns, request.complete = last, True
            done.append(request)
    return done
