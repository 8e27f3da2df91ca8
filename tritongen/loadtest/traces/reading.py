"""``--trace FILE``: which of the formats a file is, read into one model's requests in time order."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace
from pathlib import Path

from tritongen.loadtest.traces.entries import Trace, file_error, in_time_order, trace_error
from tritongen.loadtest.traces.mooncake import read_mooncake
from tritongen.loadtest.traces.own_format import read_own
from tritongen.loadtest.traces.triton_trace import read_triton_trace

FORMATS = ("auto", "tritongen", "mooncake", "triton")


def read_trace(path: Path, model: str | None, format: str = "auto") -> Trace:
    """The requests of ``path`` for ``model`` (lines naming another model left out; None: all), in time order.

    Raises:
        ConfigError: an unreadable file, one that is none of the formats, a malformed or out-of-order
            line (its number named), or no request for ``model``.
    """
    if format not in FORMATS:
        raise file_error(path, f"--trace-format {format!r} is unknown", f"use {', '.join(FORMATS)}")
    try:
        text = path.read_text(encoding="utf-8") if path.is_file() else None
    except (OSError, UnicodeDecodeError) as e:
        raise file_error(path, f"cannot be read ({e})", "give a trace file") from None
    chosen = _format_of(path, text) if format == "auto" else format
    notes: list[str] = []
    if chosen == "triton":
        entries, notes = read_triton_trace(path)
    elif text is None:
        raise file_error(path, "no such file", "give a trace file")
    else:
        entries = read_mooncake(path, text) if chosen == "mooncake" else read_own(path, text)
    ordered = in_time_order(path, entries)
    models = Counter(entry.model for entry in ordered if entry.model is not None)
    kept = [entry for entry in ordered if model is None or entry.model in (None, model)]
    if not kept:
        named = ", ".join(f"{name} ({count})" for name, count in models.most_common(5))
        raise file_error(path, f"has no request for model '{model}' (it has: {named})", "load one of them")
    if len(kept) < len(ordered):
        notes.append(f"{len(ordered) - len(kept)} requests to other models left out")
    first = kept[0].time_s
    kept = [replace(entry, time_s=entry.time_s - first) for entry in kept]
    return Trace(path, chosen, tuple(kept), dict(models), tuple(notes))


def _format_of(path: Path, text: str | None) -> str:
    """The format of a file: ``triton``, ``mooncake`` or ``tritongen``.

    A JSON array (or numbered parts ``PATH.0``…) is Triton's; JSON lines with ``input_length`` and
    ``timestamp`` Mooncake's; with ``time_s`` tritongen's.

    Raises:
        ConfigError: a file that is none of them.
    """
    if text is None:
        if path.with_name(path.name + ".0").is_file():
            return "triton"
        raise file_error(path, "no such file", "give a trace file")
    if not text.strip():
        raise file_error(path, "holds no request", "a trace has one request per line")
    start = text.lstrip()[:1]
    if start == "[":
        return "triton"
    if start != "{":
        raise trace_error(
            path,
            1,
            "is not a trace (JSON lines, or Triton's JSON array)",
            "see docs/workloads.md for the formats",
        )
    first = text.lstrip().split("\n", 1)[0]
    try:
        item = json.loads(first)
    except json.JSONDecodeError as e:
        raise trace_error(path, 1, f"not JSON ({e.msg})", "one JSON object per line") from None
    if "input_length" in item and "timestamp" in item:
        return "mooncake"
    if "time_s" in item:
        return "tritongen"
    raise trace_error(
        path,
        1,
        "is none of the trace formats (no time_s, nor Mooncake's timestamp and input_length)",
        "see docs/workloads.md for the formats",
    )
