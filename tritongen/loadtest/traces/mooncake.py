"""Mooncake's LLM traces: JSON lines of ``timestamp``, ``input_length``, ``output_length``, ``hash_ids``.

``timestamp`` is in milliseconds from the trace's start; ``hash_ids`` are the prompt's blocks
(512 tokens each in Mooncake's published traces): requests whose ids begin alike share that
prefix, which a server's prefix cache can serve from memory.
"""

from __future__ import annotations

from pathlib import Path

from tritongen.loadtest.traces.entries import TraceEntry, positive_int
from tritongen.loadtest.traces.json_lines import json_objects, number

BLOCK_TOKENS = 512
"""Tokens per hash block in Mooncake's traces."""


def read_mooncake(path: Path, text: str) -> list[TraceEntry]:
    """The entries of a Mooncake trace.

    Raises:
        ConfigError: a line without its timestamp or lengths (its line named).
    """
    entries = []
    for line, item in json_objects(path, text):
        entries.append(
            TraceEntry(
                line=line,
                time_s=number(item, "timestamp", path, line) / 1000.0,
                input_tokens=positive_int(item.get("input_length"), path, line, "input_length"),
                output_tokens=positive_int(item.get("output_length"), path, line, "output_length"),
                hash_ids=tuple(
                    positive_int(h, path, line, "hash_ids", zero=True) for h in item.get("hash_ids") or ()
                ),
                session=None if item.get("session_id") is None else str(item["session_id"]),
            )
        )
    return entries
