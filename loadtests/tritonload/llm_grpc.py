"""An LLM load over Triton's gRPC streams (``--triton-llm-api triton-grpc``): a decoupled text model.

The prepared requests are those of Triton's generate endpoint (``text_input``, ``max_tokens``
…). Each payload key that names one of the model's inputs becomes that input, typed as the
model declares it (a string as BYTES, a number as its integer or float type, a flag as BOOL),
one element, with a batch dim of 1 where the model batches; the other keys go as request
parameters, as the generate endpoint passes them. Each user keeps one stream
(:mod:`.grpc_stream`); every response with an output is one output event (the first: the
first token; each gap between two: an inter-token gap), one token each, and the final flag
ends the answer. An answer that ends without its final flag (the stream cut, or broken) is a
``stream`` error, one without output ``empty``, one the model failed ``inference_error``.
"""

from __future__ import annotations

import time
from typing import Any

import gevent
import numpy as np
import numpy.typing as npt

from .grpc_stream import EMPTY_FINAL_RESPONSE, PendingRequest, StreamSession, open_channel, with_request_id
from .llm_http import Answer
from .llm_transport import parse_limits, read_requests, record_answer
from .options import TritonOptions
from .payloads import ModelMeta, grpc_request
from .recording import Recorder
from .request_data import NUMPY_DTYPES
from .transports import StepStarts

TEXT_OUTPUT = "text_output"


def input_array(value: Any, datatype: str, batched: bool) -> npt.NDArray[Any]:
    """One payload value as a one-element tensor of the model's ``datatype``."""
    shape = (1, 1) if batched else (1,)
    if datatype == "BYTES":
        text = value if isinstance(value, str | bytes) else str(value)
        return np.array([text.encode() if isinstance(text, str) else text], dtype=np.object_).reshape(shape)
    return np.array([value], dtype=NUMPY_DTYPES[datatype]).reshape(shape)


def set_parameter(request: Any, name: str, value: Any) -> None:
    """A payload key the model has no input for, as a request parameter of its type."""
    parameter = request.parameters[name]
    if isinstance(value, bool):
        parameter.bool_param = value
    elif isinstance(value, int):
        parameter.int64_param = value
    elif isinstance(value, float):
        parameter.double_param = value
    else:
        parameter.string_param = value if isinstance(value, str) else str(value)


def stream_request(model: str, payload: dict[str, Any], meta: ModelMeta, max_batch: int) -> bytes:
    """A serialised ``ModelInferRequest`` of one prepared payload (see the module)."""
    types = {tensor["name"]: tensor["datatype"] for tensor in meta["inputs"]}
    arrays = {
        name: input_array(value, types[name], max_batch > 0)
        for name, value in payload.items()
        if name in types
    }
    outputs = [t["name"] for t in meta["outputs"] if t["name"] == TEXT_OUTPUT] or [
        t["name"] for t in meta["outputs"]
    ]
    request = grpc_request(model, arrays, outputs)
    for name, value in payload.items():
        if name not in types:
            set_parameter(request, name, value)
    request.parameters[EMPTY_FINAL_RESPONSE].bool_param = True
    return bytes(request.SerializeToString())


def answer_of(pending: PendingRequest) -> Answer:
    """What a finished stream request came back with, its error kind set (see the module)."""
    answer = Answer(start=pending.start, events=list(pending.times), end=pending.end or time.perf_counter())
    answer.text_parts = len(pending.times)
    if pending.error == "inference_error":
        answer.error = "inference_error"
    elif pending.error is not None or not pending.final:
        answer.error = "stream"
    elif not pending.times:
        answer.error = "empty"
    return answer


class LlmGrpcTransport:
    """Prepared LLM requests over gRPC streams, one stream per user (see the module)."""

    rows = 1

    def __init__(
        self, host: str, options: TritonOptions, starts: StepStarts, recorder: Recorder | None
    ) -> None:
        from gevent.event import Event

        self.timeout = options.timeout
        self.channel, meta, max_batch = open_channel(host, options.model)
        prepared = read_requests(options.llm_requests)
        self.requests = [
            (stream_request(options.model, p, meta, max_batch), tokens) for p, tokens in prepared
        ]
        self.step = starts.first(len(self.requests))
        self.recorder = recorder
        self.limits = parse_limits(options.llm_slo)
        self.session = StreamSession(self.channel, recorder=None)  # its events are recorded per answer
        self.next_id = 0
        self.event = Event

    def new_connection(self) -> StreamSession:
        """This user's stream session (every request of the user shares it)."""
        return self.session

    def send(self, session: StreamSession) -> str | None:
        """Send the next request, wait for its final response, record its figures; its error or None."""
        request, input_tokens = self.requests[self.step]
        self.step = self.step + 1 if self.step + 1 < len(self.requests) else 0
        self.next_id += 1
        request_id = str(self.next_id)
        call = session.current()
        pending = PendingRequest(start=time.perf_counter(), done=self.event())
        call.send(request_id, with_request_id(request, request_id), pending)
        if not pending.done.wait(self.timeout):
            call.forget(request_id)
            call.retire()  # new requests go to a new stream
            return "timeout"
        answer = answer_of(pending)
        if answer.error is None and self.recorder is not None:
            record_answer(self.recorder, answer, input_tokens, self.limits)
        elif answer.error is not None and call.closed:
            gevent.sleep(0.01)  # the stream broke: do not spin on a dead server
        return answer.error
