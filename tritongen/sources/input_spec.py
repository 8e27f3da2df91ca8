"""``--input-spec NAME:DTYPE:DIMS``: the input signature of sources that do not carry one."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from tritongen.errors import SourceError
from tritongen.sources.signature import TRITON_TO_NUMPY, Signature, TensorSpec

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]*$")

# Spellings users reach for -> Triton data type.
_ALIASES = {
    "FLOAT": "FP32",
    "FLOAT32": "FP32",
    "FLOAT16": "FP16",
    "HALF": "FP16",
    "FLOAT64": "FP64",
    "DOUBLE": "FP64",
    "LONG": "INT64",
    "INT": "INT32",
    "BYTES": "STRING",
}


@dataclass(frozen=True)
class InputSpec:
    """One input as the user described it; ``shape`` includes the batch dim (first) when batched."""

    name: str
    data_type: str
    shape: tuple[int, ...]

    def describe(self) -> str:
        """Return the spec in the form it was given, e.g. ``x:FP32:-1,16`` (``sr:INT64:scalar``)."""
        dims = ",".join(str(d) for d in self.shape) or "scalar"
        return f"{self.name}:{self.data_type.removeprefix('TYPE_')}:{dims}"


def parse_data_type(text: str) -> str:
    """Turn ``FP32``, ``float32``, ``TYPE_INT64`` ... into a Triton data type name.

    Raises:
        SourceError: the type is unknown.
    """
    key = text.strip().upper().removeprefix("TYPE_")
    key = _ALIASES.get(key, key)
    data_type = f"TYPE_{key}"
    if data_type not in TRITON_TO_NUMPY:
        known = ", ".join(t.removeprefix("TYPE_") for t in TRITON_TO_NUMPY)
        raise SourceError(f"unknown data type {text!r}", f"use one of: {known}")
    return data_type


def parse_input_spec(text: str) -> InputSpec:
    """Parse ``NAME:DTYPE:DIMS`` (``DIMS`` comma-separated, ``-1`` dynamic, first dim the batch).

    Raises:
        SourceError: the text is malformed.
    """
    parts = text.split(":")
    if len(parts) != 3:
        raise SourceError(
            f"--input-spec {text!r} is not NAME:DTYPE:DIMS",
            "write e.g. --input-spec input_ids:INT64:-1,128 (first dim the batch, -1 dynamic)",
        )
    name, dtype, dims_text = (p.strip() for p in parts)
    if not _NAME.match(name):
        raise SourceError(
            f"--input-spec {text!r}: {name!r} is not a legal tensor name",
            "use letters, digits, '_', '.' and '-', starting with a letter or '_'",
        )
    data_type = parse_data_type(dtype)
    shape: list[int] = []
    if dims_text.lower() in ("", "scalar", "[]"):  # a rank-0 tensor, served as dims [1]
        return InputSpec(name=name, data_type=data_type, shape=())
    for item in dims_text.split(","):
        item = item.strip()
        try:
            dim = int(item)
        except ValueError:
            dim = 0
        if dim == 0 or dim < -1 or not re.fullmatch(r"-?\d+", item):
            raise SourceError(
                f"--input-spec {text!r}: dim {item!r} is not a positive integer or -1",
                "write the dims comma-separated, e.g. -1,3,224,224",
            )
        shape.append(dim)
    return InputSpec(name=name, data_type=data_type, shape=tuple(shape))


def parse_input_specs(texts: Sequence[str]) -> tuple[InputSpec, ...]:
    """Parse every ``--input-spec``; names must be unique.

    Raises:
        SourceError: a spec is malformed or a name repeats.
    """
    specs = tuple(parse_input_spec(t) for t in texts)
    seen: set[str] = set()
    for spec in specs:
        if spec.name in seen:
            raise SourceError(f"--input-spec names {spec.name!r} twice", "give each input once")
        seen.add(spec.name)
    return specs


def specs_batched(specs: Sequence[InputSpec]) -> bool:
    """Whether the first dim is a batch dim: ``-1`` on every input but the scalars (rank 0)."""
    tensors = [s for s in specs if s.shape]
    return bool(tensors) and all(s.shape[0] == -1 for s in tensors)


def input_tensors(specs: Sequence[InputSpec], batched: bool) -> tuple[TensorSpec, ...]:
    """The signature's inputs: the batch dim dropped when ``batched``; a scalar served as dims ``[1]``."""
    return tuple(
        TensorSpec(name=s.name, data_type=s.data_type, dims=(1,), scalar=True)
        if not s.shape
        else TensorSpec(name=s.name, data_type=s.data_type, dims=s.shape[1:] if batched else s.shape)
        for s in specs
    )


def check_specs_match(specs: Sequence[InputSpec], signature: Signature, where: str) -> None:
    """Check user specs against a signature the source carries itself (e.g. an ONNX graph).

    Raises:
        SourceError: an input is unknown, missing, or declared with another type or shape.
    """
    model = {t.name: t for t in signature.inputs}
    lead = (-1,) if signature.batched else ()
    for spec in specs:
        tensor = model.get(spec.name)
        if tensor is None:
            raise SourceError(
                f"--input-spec {spec.describe()} names an input {where} does not have",
                f"its inputs are: {', '.join(model)}",
            )
        declared = () if tensor.scalar else (*lead, *tensor.dims)
        compatible = len(declared) == len(spec.shape) and all(
            d == s or d == -1 for d, s in zip(declared, spec.shape, strict=True)
        )
        if compatible and lead and declared and spec.shape[0] != -1:
            raise SourceError(
                f"--input-spec {spec.describe()}: the first dim is {where}'s batch dim, which Triton sizes "
                "per request",
                "write -1 there; the largest batch is --max-batch-size",
            )
        if spec.data_type != tensor.data_type or not compatible:
            shown = InputSpec(tensor.name, tensor.data_type, declared).describe()
            raise SourceError(
                f"--input-spec {spec.describe()} contradicts {where}, which declares {shown}",
                "fix the spec or drop it (the model carries its own signature)",
            )


def narrow_to_specs(signature: Signature, specs: Sequence[InputSpec]) -> Signature:
    """``signature`` with the dims the specs fix where the model leaves them dynamic (checked before)."""
    given = {s.name: s.shape[1:] if signature.batched else s.shape for s in specs if s.shape}
    inputs = tuple(
        replace(t, dims=tuple(d if d != -1 else g for d, g in zip(t.dims, given[t.name], strict=True)))
        if t.name in given
        else t
        for t in signature.inputs
    )
    return replace(signature, inputs=inputs)
