"""Triton's request traces (``--trace-config triton,file=PATH``): each request's timeline and split.

The server writes a trace file as a JSON array of entries, several per request, joined by
``id``: one naming the model, its version and the client's ``request_id`` (and ``parent_id``
for a step of an ensemble or a BLS call, whose traces are their own), and one per timestamp
(``{"name": "QUEUE_START", "ns": …}``). With a log frequency N the server writes ``PATH.0``,
``PATH.1``, … every N traces, and what is left when tracing is turned off. Timestamps are the
server's steady clock, the clock a client on the same machine reads with ``time.perf_counter``.

A request's time inside the server splits into its parts:

- ``http_recv``: reading the request (``HTTP_RECV_START`` → ``HTTP_RECV_END``; gRPC: 0, from
  ``GRPC_WAITREAD_END``: its read is posted before the request comes, so its start is no send);
- ``handling``: from the request read to its queue (parsing, the model looked up);
- ``queue``: waiting for a model instance (``QUEUE_START`` → ``COMPUTE_START``);
- ``compute_input``, ``infer``, ``compute_output``: the backend's three steps;
- ``steps``: an ensemble's time in its steps (the request's own trace has no compute there);
- ``respond``: from the backend's end to the response written (``COMPUTE_END`` → ``HTTP_SEND_END``).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_TIMED = ("http_recv", "handling", "queue", "compute_input", "infer", "compute_output", "respond")
"""The parts between two of the trace's own timestamps (:data:`_EDGES`)."""
PARTS = (*_TIMED[:6], "steps", "respond")
"""The parts of a request's time in the server, in order; they add up to its whole time there.
``steps``: an ensemble's or a BLS model's time in its steps, where its own trace has no queue
and compute timestamps (the steps' own traces split it further); None for other models."""

_EDGES: tuple[tuple[str, ...], ...] = (
    ("HTTP_RECV_START", "GRPC_WAITREAD_END", "REQUEST_START"),
    ("HTTP_RECV_END", "GRPC_WAITREAD_END"),
    ("QUEUE_START",),
    ("COMPUTE_START",),
    ("COMPUTE_INPUT_END",),
    ("COMPUTE_OUTPUT_START",),
    ("INFER_RESPONSE_COMPLETE", "COMPUTE_END"),
    ("HTTP_SEND_END", "GRPC_SEND_END", "REQUEST_END"),
)
"""The edges between :data:`PARTS`, each the first of its names the trace has. The response is
ready when the backend hands it over (``INFER_RESPONSE_COMPLETE``), which may come before the
backend's own ``COMPUTE_END``: the server can be sending it by then."""
_FIRST = ("HTTP_RECV_START", "GRPC_WAITREAD_END", "REQUEST_START")
_LAST = ("HTTP_SEND_END", "GRPC_SEND_END", "REQUEST_END")


class TraceFileError(ValueError):
    """A trace file that is not Triton's JSON trace format."""


@dataclass
class RequestTrace:
    """One traced request: its model, the client's request id, its timestamps and its steps' traces."""

    id: int
    model: str | None = None
    version: int | None = None
    request_id: str | None = None
    parent_id: int | None = None
    """The trace this one is a step of (an ensemble's step, a BLS call), else None."""
    ns: dict[str, int] = field(default_factory=dict)
    """Timestamp name → the server's steady clock in ns (the first of a name that repeats)."""
    steps: list[RequestTrace] = field(default_factory=list)
    """The traces of the requests it made (an ensemble's steps, a BLS model's calls), in time order."""

    @property
    def start_ns(self) -> int | None:
        """When the server began reading it (or began the request, for a step)."""
        return next((self.ns[n] for n in _FIRST if n in self.ns), None)

    @property
    def end_ns(self) -> int | None:
        """When the server finished writing its response (or ended the request, for a step)."""
        return next((self.ns[n] for n in _LAST if n in self.ns), None)

    @property
    def total_us(self) -> float | None:
        """Its whole time in the server, in µs (None when a timestamp is missing)."""
        start, end = self.start_ns, self.end_ns
        return None if start is None or end is None else (end - start) / 1000.0

    def split_us(self) -> dict[str, float | None]:
        """Each of :data:`PARTS` in µs; None for a part whose edges it lacks (a step has no HTTP).

        An edge logged before the one ahead of it (threads stamp them) counts from that one, so
        no part is negative and the parts add up to :attr:`total_us`.
        """
        edges = [next((self.ns[n] for n in names if n in self.ns), None) for names in _EDGES]
        timed: dict[str, float | None] = {}
        last = edges[0]
        for part, (start, end) in zip(_TIMED, itertools.pairwise(edges), strict=True):
            if start is None or end is None or last is None:
                timed[part] = None
                last = end if end is not None else last
                continue
            begin = max(start, last)
            finish = max(end, begin)
            timed[part] = (finish - begin) / 1000.0
            last = finish
        split = {part: timed.get(part) for part in PARTS}
        total = self.total_us
        if self.steps and total is not None and all(timed[p] is None for p in _TIMED[3:6]):
            split["steps"] = max(0.0, total - sum(v for v in timed.values() if v is not None))
        return split


def read_trace_files(path: Path) -> list[dict[str, Any]]:
    """Every entry the server wrote for trace file ``path``: ``path`` itself, then ``path.0``, ``path.1``.

    Raises:
        TraceFileError: a file that is not a JSON array of trace entries.
    """
    files = [path] if path.is_file() else []
    numbered = sorted(
        (p for p in path.parent.glob(path.name + ".*") if p.suffix[1:].isdigit()),
        key=lambda p: int(p.suffix[1:]),
    )
    entries: list[dict[str, Any]] = []
    for file in [*files, *numbered]:
        try:
            loaded = json.loads(file.read_text(encoding="utf-8") or "[]")
        except (OSError, json.JSONDecodeError) as e:
            raise TraceFileError(f"{file}: not a Triton trace file ({e})") from e
        if not isinstance(loaded, list) or not all(isinstance(entry, dict) for entry in loaded):
            raise TraceFileError(f"{file}: not a Triton trace file (a JSON array of objects expected)")
        entries.extend(loaded)
    return entries


def collect(entries: Iterable[dict[str, Any]]) -> list[RequestTrace]:
    """The top-level requests of ``entries``, each with its steps nested under it, in time order.

    Trace ids restart when a server restarts; entries of one file set come from one server.
    """
    traces: dict[int, RequestTrace] = {}
    for entry in entries:
        if "id" not in entry:
            continue
        trace = traces.setdefault(int(entry["id"]), RequestTrace(int(entry["id"])))
        if "model_name" in entry:
            trace.model = str(entry["model_name"])
            trace.version = _int_or_none(entry.get("model_version"))
            trace.request_id = str(entry["request_id"]) if entry.get("request_id") else None
            trace.parent_id = _int_or_none(entry.get("parent_id"))
        for stamp in entry.get("timestamps", ()):
            trace.ns.setdefault(str(stamp["name"]), int(stamp["ns"]))
    roots = []
    for trace in traces.values():
        parent = traces.get(trace.parent_id) if trace.parent_id else None
        if parent is not None:
            parent.steps.append(trace)
        else:
            roots.append(trace)
    for trace in traces.values():
        trace.steps.sort(key=lambda t: t.start_ns or 0)
    return sorted(roots, key=lambda t: t.start_ns or 0)


def _int_or_none(value: Any) -> int | None:
    try:
        return int(value) if value not in (None, "", 0, "0") else None
    except (TypeError, ValueError):
        return None


@dataclass(frozen=True)
class SplitAt:
    """The split of the requests around one rank of the whole time in the server."""

    label: str
    """``median`` or ``slowest 1%``."""
    requests: int
    """How many traced requests it averages."""
    total_us: float
    parts_us: dict[str, float | None]
    """Each of :data:`PARTS`, the mean over those requests (None where none had it)."""

    def to_json(self) -> dict[str, Any]:
        """``{"label", "requests", "total_us", "parts_us": {part: µs}}``."""
        return {
            "label": self.label,
            "requests": self.requests,
            "total_us": self.total_us,
            "parts_us": self.parts_us,
        }


def split_at_ranks(traces: Sequence[RequestTrace]) -> list[SplitAt]:
    """The median request's split, and the mean split of the slowest 1% (at least one request).

    Requests lacking a timestamp at either end are left out; none left: an empty list.
    """
    timed = sorted((t for t in traces if t.total_us is not None), key=lambda t: t.total_us or 0.0)
    if not timed:
        return []
    slowest = timed[-max(1, len(timed) // 100) :]
    return [_mean_split("median", [timed[(len(timed) - 1) // 2]]), _mean_split("slowest 1%", slowest)]


def _mean_split(label: str, traces: Sequence[RequestTrace]) -> SplitAt:
    splits = [t.split_us() for t in traces]
    parts: dict[str, float | None] = {}
    for part in PARTS:
        values = [s[part] for s in splits if s[part] is not None]
        parts[part] = sum(v for v in values if v is not None) / len(values) if values else None
    total = sum(t.total_us or 0.0 for t in traces) / len(traces)
    return SplitAt(label, len(traces), total, parts)
