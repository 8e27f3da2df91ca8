"""Requests on Triton's gRPC streams (``ModelStreamInfer``) read off a capture: a decoupled model's answers.

A load user keeps one HTTP/2 stream and sends its requests on it one after the other, each
answered by any number of responses and then the final flag (``triton_final_response``). The
stream's DATA frames are put back together per side and cut into gRPC messages (a flag byte and
a 4-byte length before each); each client message begins a request, at the time its first byte
crossed the wire. Each server message is read as a ``ModelStreamInferResponse``: one with
output contents is an event, at the time its last byte crossed (when the client could read it
whole), and the one with the final flag ends the request.
"""

from __future__ import annotations

import bisect
import contextlib
from collections.abc import Iterator

from google.protobuf.message import DecodeError

from tritongen.loadtest.wire.http2 import DATA, Frame, frames
from tritongen.loadtest.wire.packets import Connection
from tritongen.loadtest.wire.requests import WireRequest

MESSAGE_HEAD = 5
FINAL_RESPONSE = "triton_final_response"


def _messages(stream_frames: list[Frame]) -> Iterator[tuple[int, int, bytes]]:
    """One side's gRPC messages on one stream: when its first and last bytes crossed, and its bytes."""
    data = b"".join(frame.payload for frame in stream_frames)
    ends, total = [], 0
    for frame in stream_frames:
        total += len(frame.payload)
        ends.append(total)

    def holding(offset: int) -> Frame:  # the frame whose payload holds the byte at ``offset``
        return stream_frames[bisect.bisect_right(ends, offset)]

    position = 0
    while position + MESSAGE_HEAD <= len(data):
        length = int.from_bytes(data[position + 1 : position + MESSAGE_HEAD], "big")
        end = position + MESSAGE_HEAD + length
        if end > len(data):
            return
        yield holding(position).first_ns, holding(end - 1).last_ns, data[position + MESSAGE_HEAD : end]
        position = end


def _response_kind(message: bytes) -> tuple[bool, bool]:
    """Whether a ``ModelStreamInferResponse`` carries outputs, and whether it is its request's last."""
    from tritonclient.grpc import service_pb2

    response = service_pb2.ModelStreamInferResponse.FromString(message).infer_response
    final = FINAL_RESPONSE in response.parameters and response.parameters[FINAL_RESPONSE].bool_param
    return bool(response.raw_output_contents or response.outputs), final


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
        requests = [WireRequest(first_ns=first) for first, _, _ in _messages(sent)]
        with contextlib.suppress(DecodeError):  # another method's stream (metadata, health): not a stream's
            done += _answered(requests, _messages(sides.get((stream, False), [])))
    return sorted(done, key=lambda request: request.first_ns)


def _answered(requests: list[WireRequest], responses: Iterator[tuple[int, int, bytes]]) -> list[WireRequest]:
    """The requests of one stream, in order, given their responses' events and final flags."""
    done: list[WireRequest] = []
    answers = iter(requests)
    current = next(answers, None)
    for _, last, message in responses:
        if current is None:
            break
        has_output, final = _response_kind(message)
        if has_output:
            current.events_ns.append(last)
        if final:
            current.last_ns, current.complete = last, True
            done.append(current)
            current = next(answers, None)
    return done
