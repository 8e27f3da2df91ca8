"""The dims random inputs are drawn at: fixed by the model, by ``--shape``, by its own clues, or free.

A source with dynamic dims is verified (and calibrated, and TVM bucketed) on random inputs
of some concrete shape. Each dynamic dim of each input follows one rule: a value (given with
``--shape``, or read from the model's own clues), the batch size (the batch axis of a model
that cannot batch, such as an RNN state's axis 1), or free: free dims take one value per
verification batch, 8, 16 and 5 unless a search settled on another (see :mod:`.dim_search`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from tritongen.errors import ConfigError
from tritongen.sources.samples import Feed, numeric_strings, random_array
from tritongen.sources.signature import Signature, TensorSpec

FREE = -1
"""A dim that takes the verification batch's free value."""
BATCH = -2
"""A dim that takes the batch size: the batch axis of a model that cannot batch."""

DEFAULT_FREE_VALUES = (8, 16, 5)
BATCH_SIZES = (1, 3, 8)
"""The verification batches: (batch size, free value) pairs, the batch capped at the max batch size."""


@dataclass(frozen=True)
class ShapePlan:
    """Per input, how each dim of a random input is chosen; ``dims`` exclude the batch dim when batched."""

    dims: dict[str, tuple[int, ...]]
    """Each dim: a value (> 0), :data:`FREE` or :data:`BATCH`."""
    free_values: tuple[int, ...] = DEFAULT_FREE_VALUES
    numeric_strings: frozenset[str] = frozenset()
    """String inputs the graph casts to numbers: random ones are numeric strings."""
    chosen_by: str = "default"
    """How the dims were set: ``static`` (no dynamic dim), ``default``, ``shape``, ``clues``, ``ladder``."""
    reasons: tuple[str, ...] = field(default=())
    """Where the given or found values came from, in words."""
    floor: int = 1
    """The smallest value a free dim may take (a clue of the graph, e.g. a reflect pad's size + 1)."""

    @property
    def has_free(self) -> bool:
        """Whether any dim takes the free value."""
        return any(d == FREE for dims in self.dims.values() for d in dims)

    def shape(self, name: str, batched: bool, batch: int, free: int) -> tuple[int, ...]:
        """The full shape of input ``name`` in a batch of ``batch`` rows with free dims at ``free``."""
        values = tuple(free if d == FREE else batch if d == BATCH else d for d in self.dims[name])
        return (batch, *values) if batched else values

    def feed(self, signature: Signature, batch: int, free: int, rng: np.random.Generator) -> Feed:
        """One random batch for every input of ``signature``."""
        feed: Feed = {}
        for tensor in signature.inputs:
            shape = self.shape(tensor.name, signature.batched, batch, free)
            if tensor.name in self.numeric_strings:
                feed[tensor.name] = numeric_strings(shape, rng)
            else:
                feed[tensor.name] = random_array(tensor.data_type, shape, rng)
        return feed

    def batches(self, signature: Signature, max_batch_size: int, seed: int = 0) -> list[Feed]:
        """The random verification batches: batch sizes 1, 3 and 8 (capped), free dims at each free value."""
        rng = np.random.default_rng(seed)
        cap = max(1, max_batch_size) if signature.batched else max(BATCH_SIZES)
        uses_batch = signature.batched or any(BATCH in dims for dims in self.dims.values())
        seen: set[tuple[int, int]] = set()
        feeds: list[Feed] = []
        for index, size in enumerate(BATCH_SIZES):
            free = self.free_values[index % len(self.free_values)]
            key = (min(size, cap) if uses_batch else 1, free)
            if key not in seen:
                seen.add(key)
                feeds.append(self.feed(signature, key[0], free, rng))
        return feeds

    def first_shapes(self, signature: Signature) -> dict[str, list[int]]:
        """The full shape of every input in the first verification batch (batch 1)."""
        return {
            t.name: list(self.shape(t.name, signature.batched, 1, self.free_values[0]))
            for t in signature.inputs
        }

    def settled(self, value: int, reason: str) -> ShapePlan:
        """This plan with every free dim at ``value`` (found by trying)."""
        return replace(self, free_values=(value,), chosen_by="ladder", reasons=(*self.reasons, reason))

    def to_json(self, signature: Signature) -> dict[str, object]:
        """What verification ran at: the first batch's shapes and how the dims were chosen."""
        return {
            "inputs": self.first_shapes(signature),
            "chosen_by": self.chosen_by,
            "free_values": list(self.free_values) if self.has_free else [],
            "reasons": list(self.reasons),
        }


def default_plan(signature: Signature, symbols: Mapping[str, Sequence[str]] | None = None) -> ShapePlan:
    """Every dynamic dim free, except the batch axis of a model that cannot batch (:data:`BATCH`).

    ``symbols``: each input's dim names (full dims, ONNX ``dim_param`` or ``""``); a dim
    named like the first dim of some input is a batch axis when the signature has no batch dim.
    """
    batch_names = _batch_names(signature, symbols or {})
    dims: dict[str, tuple[int, ...]] = {}
    for tensor in signature.inputs:
        names = tuple((symbols or {}).get(tensor.name, ()))
        lead = 1 if signature.batched else 0
        dims[tensor.name] = tuple(
            d if d != -1 else BATCH if _name_at(names, i + lead) in batch_names else FREE
            for i, d in enumerate(tensor.dims)
        )
    chosen = "default" if any(FREE in d or BATCH in d for d in dims.values()) else "static"
    return ShapePlan(dims=dims, chosen_by=chosen)


def export_dim_names(signature: Signature) -> dict[str, tuple[str, ...]]:
    """Each input's dim names as PyTorch's ONNX export gives them: ``batch``, ``dim<axis>`` when dynamic."""
    lead = ("batch",) if signature.batched else ()
    return {
        t.name: (*lead, *(f"dim{i + len(lead)}" if d == -1 else "" for i, d in enumerate(t.dims)))
        for t in signature.inputs
    }


def _name_at(names: Sequence[str], index: int) -> str:
    return names[index] if index < len(names) else ""


def _batch_names(signature: Signature, symbols: Mapping[str, Sequence[str]]) -> set[str]:
    """Dim names that stand for the batch in a signature without a batch dim: the first dim's names."""
    if signature.batched:
        return set()
    names = {_name_at(symbols.get(t.name, ()), 0) for t in signature.inputs if t.dims and t.dims[0] == -1}
    return {n for n in names if n}


def resolve_shape(tensor: TensorSpec, given: tuple[int, ...], batched: bool) -> tuple[int, ...]:
    """The dims (batch excluded) that ``--shape`` gives for ``tensor``: with or without its batch dim.

    Raises:
        ConfigError: the rank differs, or a value contradicts a fixed dim.
    """
    dims = tensor.dims
    if batched and len(given) == len(dims) + 1:
        given = given[1:]
    item = f"--shape {tensor.name}={','.join(map(str, given))}"
    if not dims:
        raise ConfigError(f"{item}: '{tensor.name}' is a scalar, it has no dims to set", "drop it")
    if len(given) != len(dims):
        lead = "-1," if batched else ""
        raise ConfigError(
            f"{item} has {len(given)} dims; '{tensor.name}' has {len(dims)}"
            f" ([{lead}{','.join(map(str, dims))}]{', batch first' if batched else ''})",
            "give every dim, the batch dim included or not",
        )
    for value, declared in zip(given, dims, strict=True):
        if declared != -1 and value != declared:
            raise ConfigError(
                f"{item} contradicts the model, which fixes [{','.join(map(str, dims))}]",
                "change only the dims that are -1",
            )
    return given


def apply_shapes(
    plan: ShapePlan,
    signature: Signature,
    shapes: Mapping[str, tuple[int, ...]],
    symbols: Mapping[str, Sequence[str]] | None = None,
) -> ShapePlan:
    """``plan`` with the ``--shape`` dims set, and spread to the dims of other inputs that share their name.

    Raises:
        ConfigError: an unknown input, a wrong rank, or a value that contradicts a fixed dim.
    """
    if not shapes:
        return plan
    tensors = {t.name: t for t in signature.inputs}
    unknown = [n for n in shapes if n not in tensors]
    if unknown:
        raise ConfigError(
            f"--shape names {unknown[0]!r}, which is not an input of the model",
            f"its inputs are: {', '.join(tensors)}",
        )
    lead = 1 if signature.batched else 0
    named: dict[str, int] = {}
    dims = dict(plan.dims)
    for name, given in shapes.items():
        values = resolve_shape(tensors[name], given, signature.batched)
        dims[name] = tuple(v if d in (FREE, BATCH) else d for v, d in zip(values, dims[name], strict=True))
        for i, value in enumerate(values):
            if (symbol := _name_at((symbols or {}).get(name, ()), i + lead)) and tensors[name].dims[i] == -1:
                named[symbol] = value
    dims = spread_named(dims, named, symbols or {}, lead)
    reason = "--shape " + " ".join(f"{n}={','.join(map(str, v))}" for n, v in shapes.items())
    return replace(plan, dims=dims, chosen_by="shape", reasons=(*plan.reasons, reason))


def spread_named(
    dims: dict[str, tuple[int, ...]],
    named: Mapping[str, int],
    symbols: Mapping[str, Sequence[str]],
    lead: int,
) -> dict[str, tuple[int, ...]]:
    """Set every free (or batch) dim whose name has a value in ``named``."""
    out = {}
    for name, rules in dims.items():
        names = symbols.get(name, ())
        out[name] = tuple(
            named.get(_name_at(names, i + lead), rule) if rule in (FREE, BATCH) else rule
            for i, rule in enumerate(rules)
        )
    return out


def fixed_signature(signature: Signature, plan: ShapePlan) -> Signature:
    """``signature`` with the plan's set values written into the input dims (``--fixed-shape``)."""
    inputs = tuple(
        replace(
            t,
            dims=tuple(v if d == -1 and v > 0 else d for d, v in zip(t.dims, plan.dims[t.name], strict=True)),
        )
        for t in signature.inputs
    )
    return replace(signature, inputs=inputs)
