"""What a load shape asks of the rest of a load test: one process, an open loop, its length, its window."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from tritongen.errors import ConfigError

if TYPE_CHECKING:
    from tritongen.loadtest.shapes.base import LoadShape
    from tritongen.loadtest.spec import LoadSpec


def measured_cap(max_duration: str | None, shape: LoadShape | None) -> float | None:
    """``--max-duration`` in s; a shaped load's own length (where the option does not apply).

    Raises:
        ConfigError: a malformed duration, or one given to a shaped load.
    """
    from tritongen.loadtest.spec import parse_duration

    if shape is None:
        return parse_duration(max_duration, "--max-duration") if max_duration else None
    if max_duration:
        raise ConfigError(f"{shape.option} lasts its own length: --max-duration does not apply", "drop it")
    return shape.duration_s


def check_shape(spec: LoadSpec) -> None:
    """Refuse what a shaped load cannot take.

    A shape's schedule is one timeline: one load process replays it (several would each send all
    of it), from this machine; its length is the run's measured time; each stage is a whole number
    of windows.

    Raises:
        ConfigError: a concurrency, several levels, processes or workers, sequences, a stability wait,
            a search, or a window that does not divide the stages.
    """
    shape = spec.shape
    assert shape is not None
    option = shape.option
    clashes = [
        ("--concurrency", spec.mode != "rate"),
        ("several --rate levels", len(spec.levels) != 1),
        ("--processes", (spec.processes or 1) > 1),
        ("--master", spec.distributed is not None),
        ("--sequences", spec.sequences),
        ("--find-max", spec.search is not None),
        ("--stop-at-saturation", spec.stop_at is not None),
        ("--max-duration", spec.max_duration_s not in (None, spec.duration_s)),
    ]
    given = [name for name, clash in clashes if clash]
    if given:
        raise ConfigError(
            f"{option} lays out its own sends from one load process for its own length: "
            f"{', '.join(given)} does not apply",
            f"drop {', '.join(given)}",
        )
    if not math.isclose(spec.duration_s, shape.duration_s, rel_tol=1e-9):
        raise ConfigError(
            f"{option} lasts {shape.duration_s:g} s: the measured time is its length, not --duration "
            f"{spec.duration_s:g}s",
            "drop --duration",
        )
    window = spec.effective_window_s
    for stage in shape.stages():
        count = stage.duration_s / window
        if not math.isclose(count, round(count), rel_tol=1e-6) or round(count) < 1:
            raise ConfigError(
                f"{option}: stage {stage.label} ({stage.duration_s:g} s) is not a whole number of "
                f"--window {window:g}s",
                "give a --window that divides every stage, or leave it out",
            )
