"""The client's own floor at each level of a load test (``--calibrate``), and what it says of a run.

Before the measured runs, each level of the load is run briefly with the null kind
(:mod:`tritongen.loadtest.kinds.null`: the model's readiness asked over the same keep-alive HTTP
path, answered from the server's model table without running the model). What those runs
measure is what the load processes and the loopback add to every request: the floor under the
run's own latency. A level whose P50 is within :data:`NEAR_FLOOR` times its floor says so: most
of what it measured is the client's, not the server's.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

CALIBRATION_S = 3.0
"""Measured seconds of each level's floor run."""
NEAR_FLOOR = 3.0
"""A level whose P50 is within this many times its floor is said to be mostly the client's."""


class _Run(Protocol):
    """What a floor is read from: one run's level and figures (a :class:`~.result.RunResult`)."""

    mode: str
    concurrency: int | None
    target_rate: float | None
    qps: float
    latency_us: dict[str, float] | None


def run_level(run: _Run) -> float:
    """The run's level: its concurrency (closed loop) or its rate (open loop)."""
    if run.mode == "concurrency":
        return float(run.concurrency or 0)
    return float(run.target_rate or 0.0)


@dataclass(frozen=True)
class FloorLevel:
    """The floor at one level: the null kind's latency and requests/s there."""

    level: float
    p50_us: float | None
    p99_us: float | None
    qps: float

    def to_json(self) -> dict[str, Any]:
        """``level``, ``p50_us``, ``p99_us``, ``qps``."""
        return {"level": self.level, "p50_us": self.p50_us, "p99_us": self.p99_us, "qps": self.qps}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FloorLevel:
        """Read one level of a ``client_floor`` object."""
        p50, p99 = data.get("p50_us"), data.get("p99_us")
        return cls(
            level=float(data["level"]),
            p50_us=None if p50 is None else float(p50),
            p99_us=None if p99 is None else float(p99),
            qps=float(data.get("qps", 0.0)),
        )


@dataclass(frozen=True)
class ClientFloor:
    """The client's floor at each level of a load test, and how it was measured."""

    mode: str
    levels: tuple[FloorLevel, ...]
    duration_s: float = CALIBRATION_S
    kind: str = "null"

    def at(self, level: float) -> FloorLevel | None:
        """The floor at ``level``, if it was measured there."""
        return next((f for f in self.levels if f.level == level), None)

    def to_json(self) -> dict[str, Any]:
        """The report's ``client_floor`` object."""
        return {
            "kind": self.kind,
            "mode": self.mode,
            "duration_s": self.duration_s,
            "levels": [f.to_json() for f in self.levels],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ClientFloor:
        """Read a report's ``client_floor`` object."""
        return cls(
            mode=str(data.get("mode", "concurrency")),
            levels=tuple(FloorLevel.from_json(f) for f in data.get("levels", [])),
            duration_s=float(data.get("duration_s", CALIBRATION_S)),
            kind=str(data.get("kind", "null")),
        )


def client_floor(runs: Sequence[_Run]) -> ClientFloor:
    """The floor at each level, from the null kind's runs."""
    levels = tuple(
        FloorLevel(
            level=run_level(run),
            p50_us=(run.latency_us or {}).get("p50"),
            p99_us=(run.latency_us or {}).get("p99"),
            qps=run.qps,
        )
        for run in runs
    )
    return ClientFloor(mode=runs[0].mode if runs else "concurrency", levels=levels)


def floor_lines(floor: ClientFloor, runs: Sequence[_Run], label: Any) -> list[str]:
    """Each level's floor; where the level's P50 (median over rounds) is near it, that it is the client's.

    Near: within :data:`NEAR_FLOOR` times the floor. ``label`` names a run's level (``c=8``, ``500/s``).
    """
    by_level: dict[float, list[_Run]] = {}
    for run in runs:
        by_level.setdefault(run_level(run), []).append(run)
    lines = []
    for level, measured in by_level.items():
        own = floor.at(level)
        if own is None or own.p50_us is None:
            continue
        p50s = [p for r in measured if (p := (r.latency_us or {}).get("p50")) is not None]
        p99 = f"{own.p99_us:,.0f}" if own.p99_us is not None else "–"
        line = (
            f"{label(measured[0])} client floor (the {floor.kind} kind, {floor.duration_s:g} s): "
            f"P50 {own.p50_us:,.0f} µs, P99 {p99} µs"
        )
        if p50s and own.p50_us > 0:
            times = statistics.median(p50s) / own.p50_us
            line += f"; the run's P50 is {times:.1f}× it"
            if times < NEAR_FLOOR:
                line += ": most of its latency is the load generator's and the loopback's, not the server's"
        lines.append(line)
    return lines
