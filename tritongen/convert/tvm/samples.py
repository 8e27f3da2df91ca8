"""Verification feeds for bucket libraries: each bucket at its shape, and a request it pads."""

from __future__ import annotations

from typing import Any

import numpy as np

from tritongen.convert.verify import shaped_batches
from tritongen.sources.samples import Feed
from tritongen.sources.signature import Signature

Shapes = dict[str, tuple[int, ...]]


def bucket_shapes(facts: dict[str, Any]) -> list[Shapes]:
    """Input shapes to verify a TVM artifact's buckets on (``facts``: its ``tvm_metadata.json``).

    Each bucket at its exact shape, then a request the bucket pads: in every paddable dim
    (batch rows, declared dims), one more than the next smaller bucket's value, else one
    less than its own, so that the request lands in this bucket and is padded there.
    """
    plan = facts.get("buckets")
    if not isinstance(plan, dict):
        return []
    paddable = set(plan.get("padded_dims") or plan.get("padded") or {}) | set(
        plan.get("batch_dims") or ([plan["batch_dim"]] if plan.get("batch_dim") else [])
    )
    libraries = plan.get("libraries") or []
    seen: dict[str, set[int]] = {}
    for library in libraries:
        for dim, value in (library.get("bind") or library["dims"]).items():
            seen.setdefault(dim, set()).add(int(value))
    dims_of = {spec["name"]: spec.get("shape", []) for spec in facts.get("inputs") or []}
    out: list[Shapes] = []
    for library in libraries:
        exact = {str(k): tuple(int(d) for d in v) for k, v in library["shapes"].items()}
        padded = {
            name: tuple(
                _padded_value(value, sorted(seen.get(dim, ())))
                if isinstance(dim, str) and dim in paddable
                else value
                for dim, value in zip(dims_of.get(name, []), shape, strict=False)
            )
            for name, shape in exact.items()
        }
        out += [exact] + ([padded] if padded != exact else [])
    return out


def _padded_value(value: int, values: list[int]) -> int:
    smaller = [v for v in values if v < value]
    return smaller[-1] + 1 if smaller else max(1, value - 1)


def bucket_feeds(facts: dict[str, Any], signature: Signature) -> list[Feed]:
    """Random feeds at :func:`bucket_shapes`, each mask marking its first position as real.

    A row whose mask is all padding has no meaning (its attention spreads over padding),
    so random masks keep position 0.
    """
    plan = facts.get("buckets") if isinstance(facts.get("buckets"), dict) else {}
    masks = [(p["input"], int(p["axis"])) for p in (plan or {}).get("padded", {}).values()]
    feeds: list[Feed] = []
    for index, shapes in enumerate(bucket_shapes(facts)):
        for feed in shaped_batches(signature, shapes, seed=index + 1):
            for name, axis in masks:
                if name in feed and feed[name].ndim > axis:
                    np.moveaxis(feed[name], axis, 0)[0] = 1
            feeds.append(feed)
    return feeds


def strict_buckets(facts: dict[str, Any]) -> bool:
    """Whether the artifact refuses requests no bucket holds (then only bucket feeds verify it)."""
    plan = facts.get("buckets")
    return isinstance(plan, dict) and bool(plan.get("strict"))
