"""Sequence (stateful) models: correlation IDs, start and end flags, one sequence in flight per user.

Each user runs a closed loop of sequences (:class:`SequenceLoop`): a fresh correlation ID
from this process's :class:`SequenceIds` (``--triton-sequence-ids``), the data steps in order
(``--triton-sequence-length`` requests), the first flagged start and the last flagged end,
over HTTP (JSON header parameters) or gRPC (request parameters).
"""

from __future__ import annotations

import itertools
import os
import time
from typing import TYPE_CHECKING, Any, Protocol

import gevent
from locust.runners import WorkerRunner

from .http_wire import RawHttpConnection
from .options import TritonOptions
from .payloads import ModelMeta, batch_rows, build_steps, http_body, read_streams
from .recording import Recorder
from .request_data import Array
from .server_api import host_port, interface_http
from .transports import GrpcTransport, StepStarts, error_kind, grpc_failure, http_failure
from .validation import make_validator

if TYPE_CHECKING:
    from .state import ProcessState

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


def process_sequence_ids(environment: Any, options: TritonOptions) -> SequenceIds:
    """An allocator for this process, its range slice chosen by its worker index among ``--processes``."""
    runner = environment.runner
    blocks = int(getattr(environment.parsed_options, "processes", 1) or 1)
    if not isinstance(runner, WorkerRunner) or blocks < 1:
        blocks = 1
    block = max(0, int(getattr(runner, "worker_index", 0) or 0)) % blocks
    return SequenceIds(options.sequence_ids, block, blocks)


def sequence_steps(meta: ModelMeta, max_batch: int, options: TritonOptions) -> list[dict[str, Array]]:
    """The arrays of each step of a sequence, sent in order (the steps repeat in longer sequences)."""
    return build_steps(meta, max_batch, options)


Stream = tuple[int, int]
"""One stream of the data: its first step and its number of steps."""
STREAM_TURNS = itertools.count()
"""Which stream the next sequence of this process sends: its users take the streams in turn."""


def sequence_streams(options: TritonOptions) -> list[Stream] | None:
    """Each stream of ``--triton-inputs`` (a nested data file: one sequence each), or ``None`` without."""
    if not options.inputs:
        return None
    lengths = read_streams(options.inputs, f"--triton-inputs {options.inputs}")
    if lengths is None:
        return None
    firsts = itertools.accumulate([0, *lengths[:-1]])
    return list(zip(firsts, lengths, strict=True))


class SequenceTransport(Protocol):
    """Requests of a sequence model: one per data step, each sent with a correlation ID and flags."""

    rows: int
    steps: int
    streams: list[Stream] | None

    def new_connection(self) -> Any:
        """A fresh connection to the server."""

    def send_step(self, connection: Any, step: int, flags: tuple[int, bool, bool]) -> str | None:
        """Send step ``step`` as (correlation ID, start, end) and wait for its response."""


class HttpSequenceTransport:
    """Sequence requests over HTTP: ``sequence_id``, ``sequence_start``, ``sequence_end`` in the JSON header.

    The tensors and the header's fixed part are encoded once per step; each send only formats
    the parameters and the lengths.
    """

    def __init__(self, host: str, options: TritonOptions, recorder: Recorder | None = None) -> None:
        self.timeout = options.timeout
        self.validator = make_validator(options, recorder)
        self.recorder = recorder
        self.host, self.port = host_port(host, 8000)
        meta, max_batch = interface_http(self.host, self.port, options.model)
        steps = sequence_steps(meta, max_batch, options)
        outputs = [t["name"] for t in meta["outputs"]]
        self.parts = [self._parts(arrays, outputs) for arrays in steps]
        self.request_line = (
            f"POST /v2/models/{options.model_path}/infer HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
            "Content-Type: application/octet-stream\r\nConnection: keep-alive\r\n"
        )
        self.rows = batch_rows(steps[0], max_batch)
        self.steps = len(steps)
        self.streams = sequence_streams(options)

    @staticmethod
    def _parts(arrays: dict[str, Array], outputs: list[str]) -> tuple[str, bytes]:
        """The JSON header without its closing brace, and the raw tensor bytes."""
        body, headers = http_body(arrays, outputs)
        head_length = int(headers["Inference-Header-Content-Length"])
        head = body[:head_length].decode()
        return head[:-1], body[head_length:]

    def new_connection(self) -> RawHttpConnection:
        """A fresh keep-alive connection (keeping each response when they are checked)."""
        return RawHttpConnection(self.host, self.port, self.timeout, keep=self.validator is not None)

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
        if status != 200:
            return http_failure(status, connection.received.last)
        if self.recorder is not None:
            self.recorder.defer_split(*connection.split)
        return None if self.validator is None else self.validator.check_http(step, connection.received.last)


class GrpcSequenceTransport(GrpcTransport):
    """Sequence requests over gRPC: int64 ``sequence_id``, bool ``sequence_start`` and ``sequence_end``.

    This user's own messages, one per step: only their parameters change from send to send.
    """

    def __init__(
        self, host: str, options: TritonOptions, starts: StepStarts, recorder: Recorder | None = None
    ) -> None:
        super().__init__(host, options, starts, recorder)
        self.steps = len(self.requests)
        self.streams = sequence_streams(options)

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
            response = stub.ModelInfer(request, timeout=self.timeout)
        except self.grpc.RpcError as e:
            return grpc_failure(e, self.timeout)
        return None if self.validator is None else self.validator.check_grpc(step, response)


def make_sequence_transport(
    host: str, options: TritonOptions, starts: StepStarts, recorder: Recorder | None = None
) -> HttpSequenceTransport | GrpcSequenceTransport:
    """The sequence transport of ``--triton-protocol``.

    Responses are checked (counted into ``recorder``) when the steps carry expected outputs.
    """
    if options.protocol == "grpc":
        return GrpcSequenceTransport(host, options, starts, recorder)
    return HttpSequenceTransport(host, options, recorder)


class SequenceLoop:
    """One user's closed loop of sequences: one sequence in flight, its requests one after the other.

    Each sequence takes a fresh correlation ID, sends ``length`` requests (the data steps in
    order, repeated when the sequence is longer), the first with the start flag and the last
    with the end flag. When the data holds streams, each sequence is the next stream instead
    (the process's users take them in turn): its steps in order, whatever ``length``. Every
    request's latency goes to the main histogram; a finished sequence adds its time from
    first send to last response (``sequence``) and counts ``sequences`` and
    ``sequence_requests``. A failed request ends its sequence early (``sequence_errors``);
    the next sequence starts on a new ID.
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
        recorder, clock, transport = self.recorder, self.clock, self.transport
        streams = transport.streams
        first, length = streams[next(STREAM_TURNS) % len(streams)] if streams else (0, self.length)
        first_sent = end = clock()
        for index in range(length):
            start = clock()
            try:
                flags = (corrid, index == 0, index == length - 1)
                error = transport.send_step(connection, (first + index) % transport.steps, flags)
            except Exception as e:  # every failure is counted by kind, never raised
                error = error_kind(e)
            end = clock()
            recorder.record(start, end, error)
            if error is not None:
                recorder.count("sequence_errors", end)
                return False
        recorder.record_extra("sequence", end, end - first_sent)
        recorder.count("sequences", end)
        recorder.count("sequence_requests", end, length)
        return True


def user_load(host: str, options: TritonOptions, process: ProcessState, environment: Any) -> SequenceLoop:
    """The sequence kind's load of one user: a closed loop of sequences, one in flight."""
    recorder = process.recorder
    assert recorder is not None
    transport = make_sequence_transport(host, options, process.step_starts, recorder)
    ids = process.process_sequence_ids(environment, options)
    return SequenceLoop(recorder, transport, ids, options.sequence_length)
