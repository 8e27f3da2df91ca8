"""Where a sweep of load levels ended and why: a rule's stop, or the bracket a search for the most load found.

Both are written in a load test's document (``sweep_stop``, ``find_max``); they hold figures
only, so the result module and the rules can both use them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class SweepStop:
    """Why and where a sweep stopped, and which levels it left out."""

    rule: str
    """``slo`` (a level missed ``--slo-p99-ms``) or ``saturation``."""
    level: float
    text: str
    skipped: tuple[float, ...] = ()

    def summary(self) -> str:
        """The line the console and reports show."""
        left = f"; not measured: {', '.join(f'{level:g}' for level in self.skipped)}" if self.skipped else ""
        return f"Sweep stopped ({'P99 limit' if self.rule == 'slo' else 'saturation'}): {self.text}{left}"

    def to_json(self) -> dict[str, Any]:
        """``{"rule", "level", "text", "skipped"}``."""
        return {"rule": self.rule, "level": self.level, "text": self.text, "skipped": list(self.skipped)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SweepStop:
        """Read what :meth:`to_json` wrote (levels as written: a level written as 16 stays 16)."""
        return cls(
            rule=data["rule"],
            level=data["level"],
            text=str(data.get("text", "")),
            skipped=tuple(data.get("skipped") or ()),
        )


@dataclass(frozen=True)
class FoundMax:
    """``--find-max``: the highest level that met the SLO and the lowest that missed it, as measured.

    The answer is the bracket, not a point between: the most load the SLO allows lies in
    [``meets``, ``misses``). ``capped``: the search reached its cap still meeting the SLO
    (``misses`` None); ``meets`` None: the first level already missed.
    """

    objective: str
    """The SLO, as text (``P99 ≤ 20 ms``; ``TTFT P99 ≤ 500 ms, ITL P99 ≤ 50 ms``)."""
    meets: float | None
    misses: float | None
    precision: float
    """The search stopped once ``misses / meets`` was within 1 + this."""
    capped: bool = False
    levels: list[tuple[float, bool]] = field(default_factory=list)
    """Each level the search measured, in order, and whether it met the SLO."""
    throughput_at_meets: float | None = None
    """Requests per second at ``meets`` (goodput for an LLM load: the requests within every limit)."""

    def summary(self) -> str:
        """The line the console and reports show."""
        if self.meets is None:
            return (
                f"Most load within {self.objective}: none; the first level, {self.levels[0][0]:g}, missed it"
            )
        rate = "" if self.throughput_at_meets is None else f" ({self.throughput_at_meets:,.1f}/s)"
        if self.misses is None:
            return (
                f"Most load within {self.objective}: at least {self.meets:g}{rate}; the search's cap, "
                "still within it (raise --max-level)"
            )
        return (
            f"Most load within {self.objective}: between {self.meets:g}{rate} (met) and {self.misses:g} "
            f"(missed), within {self.precision:.0%} or one level"
        )

    def to_json(self) -> dict[str, Any]:
        """``{"objective", "meets", "misses", "precision", "capped", "levels", "throughput_at_meets"}``."""
        return {
            "objective": self.objective,
            "meets": self.meets,
            "misses": self.misses,
            "precision": self.precision,
            "capped": self.capped,
            "levels": [[level, passed] for level, passed in self.levels],
            "throughput_at_meets": self.throughput_at_meets,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FoundMax:
        """Read what :meth:`to_json` wrote."""
        return cls(
            objective=str(data.get("objective", "")),
            meets=data.get("meets"),
            misses=data.get("misses"),
            precision=float(data.get("precision", 0.1)),
            capped=bool(data.get("capped", False)),
            levels=[(float(level), bool(passed)) for level, passed in data.get("levels") or []],
            throughput_at_meets=data.get("throughput_at_meets"),
        )
