"""Triton's own trace files as a workload: each traced request's arrival, model and input shapes.

A server started with ``--trace-config triton,file=PATH --trace-config rate=1 --trace-config
level=TIMESTAMPS`` (or set so through its trace API) writes every request's timestamps; with
``level=TENSORS`` as well it writes each input's shape and type (``TENSOR_QUEUE_INPUT``). A
request arrives at its first timestamp (the server read its first bytes); its shapes are its
inputs' whole shapes (the batch dimension first for a model that batches). Without the tensors
level the trace has no shapes: each request then sends the load's own (``--shape``,
``--batch-size``), and the replay says so. Only top-level requests count: an ensemble's steps and a
BLS model's calls are the server's own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tritongen.loadtest.traces.entries import TraceEntry, file_error
from tritongen.triton.trace import TraceFileError, collect, read_trace_files

TENSOR_INPUT = "TENSOR_QUEUE_INPUT"


def read_triton_trace(path: Path) -> tuple[list[TraceEntry], list[str]]:
    """The requests of a Triton trace file (and its numbered parts), in time order; notes on it.

    Raises:
        ConfigError: not a Triton trace, or one with no request.
    """
    try:
        raw = read_trace_files(path)
    except TraceFileError as e:
        raise file_error(path, str(e).split(": ", 1)[-1], "give the file the server wrote") from None
    shapes = _input_shapes(raw)
    entries = []
    for number, trace in enumerate(collect(raw), 1):
        if trace.start_ns is None:
            continue
        entries.append(
            TraceEntry(
                line=number,
                time_s=trace.start_ns / 1e9,
                model=trace.model,
                shapes=shapes.get(trace.id),
            )
        )
    notes = []
    if entries and all(entry.shapes is None for entry in entries):
        notes.append(
            "the trace has no tensors (recorded at level TIMESTAMPS): each request sends the load's own "
            "shapes (--shape, --batch-size); record with level=TENSORS too for the recorded ones"
        )
    return entries, notes


def _input_shapes(raw: list[dict[str, Any]]) -> dict[int, dict[str, tuple[int, ...]]]:
    """Each traced request's input shapes (whole, as sent), from its ``TENSOR_QUEUE_INPUT`` entries."""
    shapes: dict[int, dict[str, tuple[int, ...]]] = {}
    for entry in raw:
        tensor = entry.get("tensor")
        if entry.get("activity") != TENSOR_INPUT or not isinstance(tensor, dict) or "id" not in entry:
            continue
        shape = tensor.get("shape")
        if isinstance(shape, str):
            dims = tuple(int(d) for d in shape.replace(" ", "").split(",") if d)
        elif isinstance(shape, list):
            dims = tuple(int(d) for d in shape)
        else:
            continue
        shapes.setdefault(int(entry["id"]), {})[str(tensor.get("name"))] = dims
    return shapes
