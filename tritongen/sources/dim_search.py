"""Settle the dims of random inputs by running the source: its clues first, then a small ladder.

Random inputs with every dynamic dim at 8 break real models: a detector's Concat needs
sizes that survive five halvings, an audio model's reflect pad needs more samples than it
pads. With no ``--shape``, the source is run at the plan's own values (its clues, else 8,
16 and 5), then at each rung of :data:`LADDER`; the first that runs is kept. When none
does, the error names the inputs and the ``--shape`` to pass.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np

from tritongen.errors import SourceError, first_line
from tritongen.sources.dim_clues import DimClues
from tritongen.sources.samples import Feed
from tritongen.sources.shape_plan import BATCH, FREE, ShapePlan, spread_named
from tritongen.sources.signature import Signature

LADDER = (8, 32, 64, 224, 320, 640)
"""Values tried, in order, for every free dim at once when the plan's own values fail."""

Run = Callable[[Feed], object]
"""Runs the source on one feed; raises when it cannot."""


def apply_clues(plan: ShapePlan, clues: DimClues, signature: Signature) -> ShapePlan:
    """``plan`` with the values the graph's clues give (dims still free only) and their minimum."""
    lead = 1 if signature.batched else 0
    dims = dict(plan.dims)
    reasons = list(plan.reasons)
    for (name, axis), (value, why) in sorted(clues.values.items()):
        if name not in dims or axis < lead:
            continue
        rules = list(dims[name])
        if rules[axis - lead] == FREE:
            rules[axis - lead] = value
            dims[name] = tuple(rules)
            reasons.append(f"{name} axis {axis} = {value} ({why})")
    dims = spread_named(dims, clues.named_values(), clues.names, lead)
    free_values, floor = plan.free_values, plan.floor
    if clues.minimum is not None and plan.has_free:
        floor, why = clues.minimum
        kept = tuple(v for v in free_values if v >= floor)
        free_values = kept or (floor,)
        if kept != plan.free_values:
            reasons.append(f"free dims at least {floor} ({why})")
    strings = clues.numeric_strings - plan.numeric_strings
    if strings:
        reasons.append(f"{', '.join(sorted(strings))} as numeric strings (the graph casts them to numbers)")
    changed = dims != plan.dims or free_values != plan.free_values or bool(strings)
    return replace(
        plan,
        dims=dims,
        free_values=free_values,
        floor=floor,
        numeric_strings=plan.numeric_strings | clues.numeric_strings,
        chosen_by="clues" if changed and plan.chosen_by in ("default", "static") else plan.chosen_by,
        reasons=tuple(reasons),
    )


def search_dims(plan: ShapePlan, signature: Signature, run: Run) -> ShapePlan:
    """The plan the source runs on: its own free values if they all run, else the first ladder rung that does.

    Raises:
        SourceError: the source fails at every value tried (the message names the inputs and
            the ``--shape`` to pass), or, without free dims, at the one shape there is.
    """
    rng = np.random.default_rng(0)
    error = _failure(run, plan.feed(signature, 1, plan.free_values[0], rng))
    if not plan.has_free:
        if error is not None:
            raise _fixed_failure(plan, signature, error)
        return plan
    tried = [plan.free_values[0]]
    for value in plan.free_values[1:]:
        if error is not None:
            break
        tried.append(value)
        error = _failure(run, plan.feed(signature, 1, value, rng))
    if error is None:
        return plan
    for rung in (r for r in LADDER if r >= plan.floor and r not in tried):
        tried.append(rung)
        error_here = _failure(run, plan.feed(signature, 1, rung, rng))
        if error_here is None:
            failed = ", ".join(map(str, tried[:-1]))
            return plan.settled(rung, f"free dims at {rung}: the source fails at {failed}")
        error = error_here
    raise SourceError(
        f"the source fails on random inputs at every size tried for its dynamic dims "
        f"({describe_free(plan, signature)} at {', '.join(map(str, tried))}): {error}",
        f"give the dims it takes: {shape_hint(plan, signature, tried[-1])} "
        "(or real inputs with --verify-data FILE)",
    )


def _failure(run: Run, feed: Feed) -> str | None:
    """The source's error on ``feed`` in one line, or ``None`` when it runs."""
    try:
        run(feed)
    except Exception as e:  # the source's runtime may raise anything
        return first_line(e, 200)
    return None


def _fixed_failure(plan: ShapePlan, signature: Signature, error: str) -> SourceError:
    shapes = ", ".join(f"{n}{s}" for n, s in plan.first_shapes(signature).items())
    if plan.chosen_by == "shape":
        return SourceError(
            f"the source fails at the shapes given ({shapes}): {error}",
            "pass the dims the model takes with --shape NAME=DIMS",
        )
    return SourceError(
        f"the source fails on tritongen's random inputs ({shapes}): {error}",
        "give real inputs with --verify-data FILE (.npz or perf_analyzer's JSON), "
        "or skip the check with --no-verify",
    )


def describe_free(plan: ShapePlan, signature: Signature) -> str:
    """The inputs with free dims, those dims shown as ``?``: ``x[1,3,?,?]``."""
    parts = []
    for tensor in signature.inputs:
        rules = plan.dims[tensor.name]
        if FREE not in rules:
            continue
        shown = ["?" if r == FREE else "1" if r == BATCH else str(r) for r in rules]
        parts.append(f"{tensor.name}[{','.join((['1'] if signature.batched else []) + shown)}]")
    return ", ".join(parts)


def shape_hint(plan: ShapePlan, signature: Signature, value: int) -> str:
    """``--shape x=1,3,640,640`` for every input with free dims, at ``value``."""
    items = [
        f"--shape {t.name}={','.join(map(str, plan.shape(t.name, signature.batched, 1, value)))}"
        for t in signature.inputs
        if FREE in plan.dims[t.name]
    ]
    return " ".join(items)
