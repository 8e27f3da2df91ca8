"""One recorded request of a trace, whatever file it came from, and the checks every format shares."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace
from pathlib import Path

from tritongen.errors import WorkloadInputError


@dataclass(frozen=True)
class TraceEntry:
    """One request as recorded: when, to which model, with which shapes or token counts."""

    line: int
    """Where it is in its file (a line, or a Triton trace's request in time order), for errors."""
    time_s: float
    """When it arrived, in s from the trace's first request."""
    model: str | None = None
    batch_size: int | None = None
    shapes: dict[str, tuple[int, ...]] | None = None
    """Its inputs' shapes without the batch dimension (with ``batch_size``), or whole (without)."""
    data: int | None = None
    """The entry of ``--input-data`` it sends (its steps counted from 0)."""
    input_tokens: int | None = None
    output_tokens: int | None = None
    hash_ids: tuple[int, ...] = ()
    """Mooncake's blocks of the prompt: requests with the same leading ids share that prefix."""
    session: str | None = None

    @property
    def variant(self) -> tuple[object, ...] | None:
        """What tells its tensor request from others' (None: it names no shapes)."""
        if self.shapes is None:
            return None
        return (self.batch_size, tuple(sorted(self.shapes.items())))


@dataclass(frozen=True)
class Trace:
    """The entries of one file, in time order, and what they were read as."""

    path: Path
    format: str
    entries: tuple[TraceEntry, ...]
    models: dict[str, int] = field(default_factory=dict)
    """Requests per model named in the file (before one model's are kept)."""
    notes: tuple[str, ...] = ()

    @property
    def span_s(self) -> float:
        """From the first request to the last."""
        return self.entries[-1].time_s - self.entries[0].time_s if self.entries else 0.0

    @property
    def llm(self) -> bool:
        """Whether its requests are prompts (token counts) rather than tensors."""
        return any(entry.input_tokens is not None for entry in self.entries)


def trace_error(path: Path, line: int, what: str, hint: str | None) -> WorkloadInputError:
    """``--trace FILE, line N: what`` with its hint (the test exits 2 with it, nothing sent)."""
    return WorkloadInputError(f"--trace {path}, line {line}: {what}", hint)


def file_error(path: Path, what: str, hint: str) -> WorkloadInputError:
    """``--trace FILE: what`` with its hint: the file as a whole (the test exits 2 with it)."""
    return WorkloadInputError(f"--trace {path}: {what}", hint)


def in_time_order(path: Path, entries: list[TraceEntry]) -> tuple[TraceEntry, ...]:
    """The entries, their times counted from the first; refused where one goes back in time.

    Raises:
        ConfigError: an entry earlier than the one before it (its line named), or no entry.
    """
    if not entries:
        raise file_error(path, "holds no request", "a trace has one request per line")
    for before, after in itertools.pairwise(entries):
        if after.time_s < before.time_s:
            raise trace_error(
                path,
                after.line,
                f"time {after.time_s:g} s is before line {before.line}'s {before.time_s:g} s",
                "a trace's requests are in time order: sort it by its timestamps",
            )
    first = entries[0].time_s
    return tuple(replace(entry, time_s=entry.time_s - first) for entry in entries)


def positive_int(value: object, path: Path, line: int, name: str, zero: bool = False) -> int:
    """``value`` as a whole number above 0 (or at least 0 with ``zero``).

    Raises:
        ConfigError: anything else, its line and field named.
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < (0 if zero else 1):
        least = "0 or more" if zero else "above 0"
        raise trace_error(path, line, f"{name} {value!r} is not a whole number {least}", f"e.g. {name}: 4")
    return value
