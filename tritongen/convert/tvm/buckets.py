"""Shape buckets: the static shapes TVM compiles (and tunes) one library for, and how requests fit them.

A bucket fixes every dynamic dim of the model. A request is served by the smallest bucket
that holds it:

- the **batch** dim is always padded: extra rows repeat a real row and are sliced off;
- a dim declared with ``--tvm-pad ALIAS=INPUT:AXIS`` is padded with zeros, and ``INPUT``
  (an attention mask) is 0 at the padded positions, so they take no part; outputs that
  carry the dim are sliced back;
- any other dynamic dim must match a bucket's value exactly: it is never padded.

Requests no bucket holds go to the symbolic library (or are refused under
``--tvm-strict-buckets``). Everything here is plain Python; nothing imports TVM.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from math import prod

from tritongen.errors import ConversionError

BATCH = "batch"
"""The name buckets use for the batch dim, whatever the ONNX graph calls it."""
DEFAULT_DIM_VALUE = 128
"""Value of a dynamic non-batch dim (e.g. sequence length) in buckets, unless given."""
MAX_BUCKETS = 16
"""More libraries than this cost more disk and compile time than they save; refused."""

Dims = dict[str, tuple[int | str, ...]]
"""Each input's dims: an int for a static dim, the dim's name for a dynamic one."""


@dataclass(frozen=True)
class PaddedDim:
    """A dynamic dim that may be padded: ``axis`` of ``input`` is its mask (0 at padding)."""

    dim: str
    input: str
    axis: int
    alias: str | None = None

    def as_json(self) -> dict[str, object]:
        """The form ``tvm_metadata.json`` records."""
        return {"input": self.input, "axis": self.axis, "alias": self.alias}


@dataclass(frozen=True)
class BucketPlan:
    """The buckets to build: values per dynamic dim, which dims are padded, and strictness."""

    values: dict[str, tuple[int, ...]]
    """Sorted values of each dynamic dim, by its name in the graph."""
    batch_dim: str | None
    """The graph's name of the batch dim (``None`` for a model without one)."""
    padded: dict[str, PaddedDim]
    strict: bool = False
    ties: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Dims that are one dim under several graph names (the batch dim of each input, or
    dims declared with one ``--tvm-pad`` alias), by the name the plan uses for them."""

    def bind(self, bucket: dict[str, int]) -> dict[str, int]:
        """A bucket's value for every graph name of its dims (what TVM binds)."""
        return {name: value for dim, value in bucket.items() for name in self.ties.get(dim, (dim,))}

    def names(self, dims: list[str] | set[str]) -> list[str]:
        """Every graph name of ``dims``."""
        return sorted({name for dim in dims for name in self.ties.get(dim, (dim,))})

    def buckets(self) -> list[dict[str, int]]:
        """Every combination of values, smallest first (by the product of its dims)."""
        names = sorted(self.values)
        combos = [
            dict(zip(names, combo, strict=True))
            for combo in itertools.product(*(self.values[n] for n in names))
        ]
        return sorted(combos, key=lambda b: (prod(b.values()), [b[n] for n in names]))

    def exact_dims(self) -> list[str]:
        """Dynamic dims that are neither the batch dim nor padded: requests must match them."""
        return [d for d in sorted(self.values) if d != self.batch_dim and d not in self.padded]

    def label(self, bucket: dict[str, int]) -> str:
        """``8x128``: the bucket's values, batch first, then the other dims by name."""
        order = ([self.batch_dim] if self.batch_dim in bucket else []) + sorted(
            d for d in bucket if d != self.batch_dim
        )
        return "x".join(str(bucket[d]) for d in order) or "static"

    def describe(self) -> str:
        """``batch 1,8,32 × seq 128 (padded)``: the plan in one line."""
        parts = []
        for dim in ([self.batch_dim] if self.batch_dim in self.values else []) + sorted(
            d for d in self.values if d != self.batch_dim
        ):
            padded = self.padded.get(dim)
            name = "batch" if dim == self.batch_dim else (padded.alias if padded and padded.alias else dim)
            note = " (padded)" if padded else (" (exact)" if dim != self.batch_dim else "")
            parts.append(f"{name} {','.join(str(v) for v in self.values[dim])}{note}")
        return " × ".join(parts)

    def as_json(self) -> dict[str, object]:
        """What ``tvm_metadata.json`` records of the plan (libraries are added by the artifact)."""
        return {
            "dims": {d: list(v) for d, v in self.values.items()},
            "batch_dim": self.batch_dim,
            "batch_dims": self.names({self.batch_dim} if self.batch_dim else set()),
            "padded": {d: p.as_json() for d, p in self.padded.items()},
            "padded_dims": self.names(set(self.padded)),
            "exact": self.exact_dims(),
            "strict": self.strict,
        }


def dynamic_dims(inputs: Dims) -> list[str]:
    """The names of the dynamic dims over all inputs, sorted."""
    return sorted({d for dims in inputs.values() for d in dims if isinstance(d, str)})


def batch_dims(inputs: Dims, batched: bool) -> list[str]:
    """The graph's names of the batch dim: axis 0 of every input, when it is dynamic.

    Exporters may give each input's batch dim its own name (``unk__0``, ``unk__1``); they
    are one dim.
    """
    if not batched:
        return []
    return list(dict.fromkeys(d[0] for d in inputs.values() if d and isinstance(d[0], str)))


def parse_pads(
    texts: tuple[str, ...], inputs: Dims, batch: list[str]
) -> tuple[dict[str, PaddedDim], dict[str, tuple[str, ...]]]:
    """Read ``--tvm-pad [ALIAS=]INPUT:AXIS`` declarations into padded dims and their ties.

    Declarations with one alias name one dim, even where inputs name it differently
    (``seq=attention_mask:1 seq=input_ids:1``). Returns the padded dims by the plan's
    name for each (the first declaration's graph name) and every graph name of each.

    Raises:
        ConversionError: bad syntax, an unknown input, an axis the input lacks, a static
            axis, the batch dim (always padded), or an alias or dim declared twice over.
    """
    groups: dict[str, list[PaddedDim]] = {}
    for text in texts:
        pad = _parse_pad(text, inputs, batch)
        groups.setdefault(pad.alias or pad.dim, []).append(pad)
    padded: dict[str, PaddedDim] = {}
    ties: dict[str, tuple[str, ...]] = {}
    owner: dict[str, str] = {}
    everything = {d for dims in inputs.values() for d in dims if isinstance(d, str)}
    for key, pads in groups.items():
        names = tuple(dict.fromkeys(p.dim for p in pads))
        for name in names:
            if name in owner:
                raise ConversionError(
                    f"--tvm-pad declares dim {name!r} twice (as {owner[name]!r} and {key!r})",
                    "declare each dim once; give several inputs' dims one alias to tie them",
                )
            owner[name] = key
        alias = pads[0].alias
        if alias is not None and (alias == BATCH or (alias in everything and alias not in names)):
            raise ConversionError(
                f"--tvm-pad alias {alias!r} is already the name of another dim",
                "choose an alias no dim of the model has (and not 'batch')",
            )
        padded[names[0]] = pads[0]
        ties[names[0]] = names
    return padded, ties


def _parse_pad(text: str, inputs: Dims, batch: list[str]) -> PaddedDim:
    """One ``--tvm-pad`` declaration, checked against the model.

    Raises:
        ConversionError: see :func:`parse_pads`.
    """
    match = re.fullmatch(r"\s*(?:([A-Za-z_][\w.-]*)\s*=\s*)?([^:=\s]+)\s*:\s*(-?\d+)\s*", text)
    if match is None:
        raise ConversionError(
            f"--tvm-pad {text!r} is not ALIAS=INPUT:AXIS",
            "e.g. --tvm-pad seq=attention_mask:1 (axis 1 of attention_mask marks padding with 0)",
        )
    alias, name, axis_text = match.group(1), match.group(2), int(match.group(3))
    dims = inputs.get(name)
    if dims is None:
        raise ConversionError(
            f"--tvm-pad names input {name!r}, which the model does not have",
            f"its inputs are {', '.join(inputs)}",
        )
    axis = axis_text + len(dims) if axis_text < 0 else axis_text
    if not 0 <= axis < len(dims):
        raise ConversionError(
            f"--tvm-pad {text!r}: input {name!r} has no axis {axis_text} (it has {len(dims)} dims)",
            "count axes from 0, the batch dim included",
        )
    dim = dims[axis]
    if not isinstance(dim, str):
        raise ConversionError(
            f"--tvm-pad {text!r}: axis {axis} of {name!r} is fixed at {dim}, so there is nothing to pad",
            "declare a dynamic dim, such as the sequence length",
        )
    if dim in batch:
        raise ConversionError(
            f"--tvm-pad {text!r}: axis {axis} of {name!r} is the batch dim, which is always padded",
            "declare a dim other than the batch dim",
        )
    return PaddedDim(dim=dim, input=name, axis=axis, alias=alias)


def default_batch_values(max_batch_size: int, preferred: tuple[int, ...]) -> tuple[int, ...]:
    """Batch buckets when none are given: 1, the preferred batch sizes and the max batch size.

    Without preferred sizes, powers of 8 fill the gap, so no request is padded more
    than 8-fold below the max (max 32: 1, 8, 32).
    """
    top = max(1, max_batch_size)
    values = {1, top, *(p for p in preferred if 1 <= p <= top)}
    if not preferred:
        values |= {8**k for k in range(1, 8) if 8**k < top}
    return tuple(sorted(values))


@dataclass(frozen=True)
class BucketRequest:
    """What the buckets are made from: the options' text and the model's facts."""

    text: str | None
    """``--tvm-buckets``: ``batch=1,8,32;seq=32,64,128`` (``None``: the defaults)."""
    pads: tuple[str, ...]
    """``--tvm-pad`` declarations."""
    strict: bool
    max_batch_size: int
    preferred_batch_sizes: tuple[int, ...]
    dim_values: dict[str, int]
    """Default values of non-batch dims, by name (``DEFAULT_DIM_VALUE`` otherwise)."""


def plan_buckets(request: BucketRequest, inputs: Dims, batched: bool) -> BucketPlan:
    """The bucket plan for a model with ``inputs``: given values, defaults for the rest.

    Raises:
        ConversionError: bad syntax, an unknown dim, a value below 1 or above the max batch
            size, or more than :data:`MAX_BUCKETS` buckets.
    """
    batch = batch_dims(inputs, batched)
    batch_dim = batch[0] if batch else None
    padded, ties = parse_pads(request.pads, inputs, batch)
    if batch_dim is not None:
        ties[batch_dim] = tuple(batch)
    tied = {name for dim, names in ties.items() for name in names if name != dim}
    names = [d for d in dynamic_dims(inputs) if d not in tied]
    aliases = {p.alias: dim for dim, p in padded.items() if p.alias}
    aliases.update({name: dim for dim, group in ties.items() for name in group if name != dim})
    given = _parse_values(request.text or "", names, aliases, batch_dim)
    values: dict[str, tuple[int, ...]] = {}
    for dim in names:
        if dim in given:
            values[dim] = given[dim]
        elif dim == batch_dim:
            values[dim] = default_batch_values(request.max_batch_size, request.preferred_batch_sizes)
        else:
            values[dim] = (request.dim_values.get(dim, DEFAULT_DIM_VALUE),)
    if batch_dim is not None and request.max_batch_size > 0:
        too_big = [v for v in values[batch_dim] if v > request.max_batch_size]
        if too_big:
            raise ConversionError(
                f"--tvm-buckets: batch {too_big[0]} is above the max batch size {request.max_batch_size}",
                "use batch buckets up to --max-batch-size (no request is larger)",
            )
    plan = BucketPlan(values=values, batch_dim=batch_dim, padded=padded, strict=request.strict, ties=ties)
    count = len(plan.buckets())
    if count > MAX_BUCKETS:
        raise ConversionError(
            f"--tvm-buckets asks for {count} libraries ({plan.describe()}); at most {MAX_BUCKETS}",
            "use fewer values per dim: each bucket is one compiled library",
        )
    return plan


def _parse_values(
    text: str, names: list[str], aliases: dict[str, str], batch_dim: str | None
) -> dict[str, tuple[int, ...]]:
    """``batch=1,8;seq=128`` as sorted values by graph dim name.

    Raises:
        ConversionError: bad syntax, an unknown or repeated dim, or a value below 1.
    """
    out: dict[str, tuple[int, ...]] = {}
    for part in (p.strip() for p in text.split(";")):
        if not part:
            continue
        key, sep, rest = part.partition("=")
        key = key.strip()
        try:
            numbers = tuple(sorted({int(v) for v in rest.split(",") if v.strip()}))
        except ValueError:
            numbers = ()
        if not sep or not numbers:
            raise ConversionError(
                f"--tvm-buckets part {part!r} is not DIM=V1,V2,...",
                "e.g. --tvm-buckets 'batch=1,8,32;seq=64,128'",
            )
        dim = batch_dim if key == BATCH and batch_dim is not None else aliases.get(key, key)
        if dim not in names:
            known = ([BATCH] if batch_dim else []) + [d for d in names if d != batch_dim] + sorted(aliases)
            raise ConversionError(
                f"--tvm-buckets names dim {key!r}, which the model does not have",
                f"its dynamic dims are {', '.join(dict.fromkeys(known)) or 'none'}",
            )
        if dim in out:
            raise ConversionError(f"--tvm-buckets gives dim {key!r} twice", "give each dim once")
        if numbers[0] < 1:
            raise ConversionError(
                f"--tvm-buckets: {key} values must be >= 1, not {numbers[0]}", "use positive sizes"
            )
        out[dim] = numbers
    return out
