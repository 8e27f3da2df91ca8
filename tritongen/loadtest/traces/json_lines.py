"""Reading a trace's JSON lines: each line one object, its line number kept for errors."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tritongen.loadtest.traces.entries import trace_error


def json_objects(path: Path, text: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """Each non-blank line's object, with its line number.

    Raises:
        ConfigError: a line that is not a JSON object.
    """
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as e:
            raise trace_error(path, number, f"not JSON ({e.msg})", "one JSON object per line") from None
        if not isinstance(item, dict):
            raise trace_error(path, number, "not a JSON object", "one JSON object per line")
        yield number, item


def number(item: dict[str, Any], key: str, path: Path, line: int) -> float:
    """``item[key]`` as a number.

    Raises:
        ConfigError: missing or not a number.
    """
    value = item.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise trace_error(path, line, f"{key} {value!r} is not a number", f'each line has "{key}"')
    return float(value)
