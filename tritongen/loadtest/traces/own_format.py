"""tritongen's own trace format: JSON lines, one request each.

``{"time_s": 0.25, "model": "mlp_onnx", "batch_size": 4, "shapes": {"INPUT0": [16]}}`` for a
tensor request (``shapes`` without the batch dimension, as ``--shape``; or ``"data": N``, the Nth
entry of ``--input-data``), ``{"time_s": 1.5, "input_tokens": 512, "output_tokens": 64,
"session": "u7"}`` for a prompt (``hash_ids`` as Mooncake's: prompts with the same leading ids
share that prefix). Only ``time_s`` is required; ``model`` keeps a line for that model only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tritongen.loadtest.traces.entries import TraceEntry, positive_int, trace_error
from tritongen.loadtest.traces.json_lines import json_objects, number

KEYS = frozenset(
    [
        "time_s",
        "model",
        "batch_size",
        "shapes",
        "data",
        "input_tokens",
        "output_tokens",
        "hash_ids",
        "session",
    ]
)


def read_own(path: Path, text: str) -> list[TraceEntry]:
    """The entries of a tritongen trace.

    Raises:
        ConfigError: a line that is not one of its objects (its line and what is wrong named).
    """
    return [_entry(path, line, item) for line, item in json_objects(path, text)]


def _entry(path: Path, line: int, item: dict[str, Any]) -> TraceEntry:
    unknown = sorted(set(item) - KEYS)
    if unknown:
        raise trace_error(path, line, f"unknown field {unknown[0]!r}", f"fields: {', '.join(sorted(KEYS))}")
    if "shapes" in item and "data" in item:
        raise trace_error(path, line, "has both shapes and data", "give one: the shapes, or a data entry")
    if ("input_tokens" in item) != ("output_tokens" in item):
        raise trace_error(path, line, "a prompt has input_tokens and output_tokens", "give both")
    model = item.get("model")
    session = item.get("session")
    return TraceEntry(
        line=line,
        time_s=number(item, "time_s", path, line),
        model=None if model is None else str(model),
        batch_size=None
        if "batch_size" not in item
        else positive_int(item["batch_size"], path, line, "batch_size"),
        shapes=None if "shapes" not in item else _shapes(item["shapes"], path, line),
        data=None if "data" not in item else positive_int(item["data"], path, line, "data", zero=True),
        input_tokens=None
        if "input_tokens" not in item
        else positive_int(item["input_tokens"], path, line, "input_tokens"),
        output_tokens=None
        if "output_tokens" not in item
        else positive_int(item["output_tokens"], path, line, "output_tokens"),
        hash_ids=tuple(
            positive_int(h, path, line, "hash_ids", zero=True) for h in item.get("hash_ids") or ()
        ),
        session=None if session is None else str(session),
    )


def _shapes(value: object, path: Path, line: int) -> dict[str, tuple[int, ...]]:
    if not isinstance(value, dict) or not value:
        raise trace_error(path, line, "shapes is not {INPUT: [dims]}", 'e.g. "shapes": {"INPUT0": [16]}')
    shapes = {}
    for name, dims in value.items():
        if not isinstance(dims, list):
            raise trace_error(path, line, f"shape of {name} is not a list", 'e.g. "shapes": {"INPUT0": [16]}')
        shapes[str(name)] = tuple(positive_int(d, path, line, f"a dim of {name}", zero=True) for d in dims)
    return shapes
