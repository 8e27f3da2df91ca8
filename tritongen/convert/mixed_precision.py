"""Find which nodes to keep in FP32 so that a reduced-precision model stays within an error budget.

1. Reduce every candidate node; if the error is within ``max_error``, done.
2. Sensitivity, leave-one-out: for each candidate, the model with only that node back in
   FP32; the error it removes is its sensitivity (measured on a subset of the rows, to
   keep the search affordable on large models).
3. Keep the most sensitive nodes in FP32 one at a time, re-measuring error and latency at
   each step, until the budget holds.

The search only calls ``build`` (a model with some nodes kept) and ``evaluate`` (its error
and latency), so the same search serves ONNX Runtime and TensorRT variants.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tritongen.convert.jsonable import json_fields
from tritongen.errors import ConversionError

Build = Callable[[tuple[str, ...]], Path]
Evaluate = Callable[[Path, bool], tuple[float, float]]
"""A model's (error, latency in ms); the flag asks for a quick estimate (fewer rows, no latency)."""
Say = Callable[[str], None]


@dataclass(frozen=True)
class MixedStep:
    """One model tried: the nodes kept in FP32 and how it did."""

    kept: tuple[str, ...]
    error: float
    latency_ms: float
    added: str | None = None
    """The node added to the kept list at this step (``None`` for the first)."""

    def to_json(self) -> dict[str, Any]:
        """The JSON form."""
        return json_fields(self, "kept", "added", "error", "latency_ms")


@dataclass
class MixedResult:
    """The outcome of the search."""

    max_error: float
    metric: str
    kept: tuple[str, ...]
    steps: list[MixedStep] = field(default_factory=list)
    sensitivity: list[tuple[str, float]] = field(default_factory=list)
    """Each candidate's error reduction when kept alone in FP32, most sensitive first."""
    candidates: int = 0
    met: bool = True

    def to_json(self) -> dict[str, Any]:
        """The JSON form."""
        fields = json_fields(self, "max_error", "metric", "met", "candidates", "kept", "steps")
        return {**fields, "sensitivity": [{"node": n, "error_removed": e} for n, e in self.sensitivity]}


def search(
    build: Build,
    evaluate: Evaluate,
    base: tuple[str, ...],
    candidates: Sequence[str],
    max_error: float,
    metric: str,
    say: Say | None = None,
) -> MixedResult:
    """Keep the fewest, most sensitive nodes in FP32 that bring the error within ``max_error``.

    ``base`` is kept in FP32 throughout (the user's ``--keep-fp32``).

    Raises:
        ConversionError: even with every candidate kept in FP32 the error exceeds the budget.
    """
    tell = say or (lambda _m: None)
    result = MixedResult(max_error=max_error, metric=metric, kept=base, candidates=len(candidates))
    error, latency = evaluate(build(base), False)
    result.steps.append(MixedStep(base, error, latency))
    if error <= max_error:
        return result
    quick, _ = evaluate(build(base), True)
    sensitivity: list[tuple[str, float]] = []
    for i, node in enumerate(candidates, 1):
        tell(f"sensitivity {i}/{len(candidates)}: {node}")
        alone, _ = evaluate(build((*base, node)), True)
        sensitivity.append((node, quick - alone))
    sensitivity.sort(key=lambda item: -item[1])
    result.sensitivity = sensitivity
    kept = base
    for node, _ in sensitivity:
        kept = (*kept, node)
        tell(f"keeping {len(kept) - len(base)} node(s) in FP32 (error {error:.3g} > {max_error:g})")
        error, latency = evaluate(build(kept), False)
        result.steps.append(MixedStep(kept, error, latency, added=node))
        result.kept = kept
        if error <= max_error:
            return result
    result.met = False
    raise ConversionError(
        f"the error budget {max_error:g} ({metric}) cannot be met: with all {len(candidates)} "
        f"candidate nodes in FP32 the error is still {error:.3g}",
        "raise --max-error, give more representative --calibration-data, or keep the model in FP32",
    )
