"""Load on sequence (stateful) models: the checks, correlation ID ranges and per-sequence figures.

A model whose config has ``sequence_batching`` keeps state per correlation ID: each request
carries the ID of its sequence and start/end flags. Its load is ``--sequences N``: N
sequences in flight (a closed loop), each sending its requests one after the other; when
one ends, a new one starts on a fresh ID. The Locust workers count per sequence
``sequences`` (finished), ``sequence_requests`` (their requests), ``sequence_errors``
(sequences a failed request ended) and the ``sequence`` time (first send to last response).
"""

from __future__ import annotations

import math
from typing import Any, Protocol

from tritongen.errors import ConfigError

DEFAULT_SEQUENCE_LENGTH = 20
"""Requests per sequence without ``--sequence-length`` or data of several steps (perf_analyzer's)."""
ID_LIMIT = 2**63
"""Correlation IDs are below this (gRPC carries them as int64) and above 0."""
SEQUENCE_COLUMNS = (
    "sequences", "sequences_per_s", "requests_per_sequence", "sequence_errors",
    "sequence_p50_us", "sequence_p90_us", "sequence_p95_us", "sequence_p99_us", "sequence_p999_us",
)  # fmt: skip
"""CSV columns of the per-sequence figures (empty for runs that sent no sequences)."""


def is_sequence_model(config: dict[str, Any]) -> bool:
    """Whether a model config (as the server reports it, JSON) schedules with the sequence batcher."""
    return bool(config.get("sequence_batching"))


def parse_id_range(text: str) -> tuple[int, int]:
    """``--sequence-id-range START:END`` (END excluded) or ``START`` (up to 2**63) as (start, end).

    Raises:
        ConfigError: not whole numbers, a start below 1, or an empty range.
    """
    start_text, colon, end_text = text.partition(":")
    try:
        start = int(start_text)
        end = int(end_text) if colon else ID_LIMIT
    except ValueError:
        start = end = 0
    if not 1 <= start < end <= ID_LIMIT:
        raise ConfigError(
            f"--sequence-id-range {text!r} is not START:END with 1 <= START < END <= 2**63",
            "e.g. --sequence-id-range 1000:2000 (END excluded; IDs are never 0)",
        )
    return start, end


def id_range_text(id_range: tuple[int, int] | None) -> str:
    """The range as the locustfile's ``--triton-sequence-ids`` takes it (empty: from the process id)."""
    return "" if id_range is None else f"{id_range[0]}:{id_range[1]}"


def check_sequence_settings(
    sequences: bool, mode: str, length: int | None, id_range: tuple[int, int] | None
) -> None:
    """Reject sequence settings that cannot work, whatever the model.

    Raises:
        ConfigError: an open loop with sequences, a length below 1, or sequence options alone.
    """
    if not sequences:
        if length is not None or id_range is not None:
            raise ConfigError(
                "--sequence-length and --sequence-id-range need --sequences",
                "pass --sequences N for a sequence model, or drop them",
            )
        return
    if mode != "concurrency":
        raise ConfigError(
            "--sequences is a closed loop (N sequences in flight); --rate cannot drive sequences",
            "drop --rate and give the load as --sequences N",
        )
    if length is not None and length < 1:
        raise ConfigError(f"--sequence-length {length} is not positive", "e.g. --sequence-length 10")


def sequence_length(given: int | None, steps: int) -> int:
    """Requests per sequence: ``--sequence-length``, else the data's steps when it has several, else 20.

    Like perf_analyzer's: a sequence of data steps is sent whole; random or zero data (one
    step) would make one-request sequences, which never carry state, so they get the default.
    """
    if given is not None:
        return given
    return steps if steps > 1 else DEFAULT_SEQUENCE_LENGTH


def check_sequence_model(model: str, config: dict[str, Any], sequences: bool) -> None:
    """A sequence model needs ``--sequences``; ``--sequences`` needs a sequence model.

    Raises:
        ConfigError: the load does not fit the model's scheduler.
    """
    stateful = is_sequence_model(config)
    if stateful and not sequences:
        raise ConfigError(
            f"'{model}' is a sequence model (sequence_batching): its requests need a correlation ID "
            "and start/end flags",
            "load it with --sequences N (N sequences in flight, instead of --concurrency) and "
            "--sequence-length L",
        )
    if sequences and not stateful:
        raise ConfigError(
            f"--sequences needs a sequence model, and '{model}' has no sequence_batching in its config",
            "load it with --concurrency N",
        )


def ids_needed(level: int, processes: int) -> int:
    """IDs a range must hold for ``level`` sequences in flight over ``processes`` Locust processes.

    Each process cycles through its own equal slice of the range, and Locust spreads the
    users evenly, so every slice must hold ``ceil(level / processes)`` IDs.
    """
    return processes * math.ceil(level / processes)


def check_id_range(id_range: tuple[int, int] | None, level: int, processes: int) -> None:
    """The range holds an ID for every sequence in flight at ``level``.

    Raises:
        ConfigError: the range is smaller than the sequences in flight need.
    """
    if id_range is None:
        return
    need = ids_needed(level, processes)
    if id_range[1] - id_range[0] < need:
        raise ConfigError(
            f"--sequence-id-range {id_range_text(id_range)} holds {id_range[1] - id_range[0]} IDs; "
            f"{level} sequences over {processes} Locust process(es) need {need}",
            f"widen the range to at least {need} IDs (each process takes its own slice)",
        )


def sequence_figures(
    latencies_us: dict[str, dict[str, float]], counts: dict[str, int], duration_s: float
) -> dict[str, float | int | None] | None:
    """A run's per-sequence figures for tables and CSV, or None when it sent no sequences.

    ``sequences_per_s`` counts sequences that finished in the measured time;
    ``requests_per_sequence`` is over those sequences; ``sequence_*_us`` is the time from a
    sequence's first send to its last response.
    """
    finished = int(counts.get("sequences", 0))
    errors = int(counts.get("sequence_errors", 0))
    latency = latencies_us.get("sequence") or {}
    if not finished and not errors and not latency:
        return None
    figures: dict[str, float | int | None] = {
        "sequences": finished,
        "sequences_per_s": finished / duration_s if duration_s else None,
        "requests_per_sequence": counts.get("sequence_requests", 0) / finished if finished else None,
        "sequence_errors": errors,
    }
    for key in ("p50", "p90", "p95", "p99", "p999"):
        figures[f"sequence_{key}_us"] = latency.get(key)
    return figures


class SequenceRun(Protocol):
    """What :func:`add_sequence_figures` reads and sets of a run result."""

    counts: dict[str, int]
    duration_s: float
    sequences_per_s: float | None
    requests_per_sequence: float | None


def add_sequence_figures(result: SequenceRun, sequences: bool) -> None:
    """Derive sequences/s and requests per sequence from the counters of a run that sent ``sequences``."""
    if not sequences:
        return
    finished = result.counts.get("sequences", 0)
    result.sequences_per_s = finished / result.duration_s if result.duration_s else 0.0
    if finished:
        result.requests_per_sequence = result.counts.get("sequence_requests", 0) / finished
