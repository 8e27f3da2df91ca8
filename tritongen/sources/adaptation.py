"""How the served model differs from the source: rank-0 tensors served as ``[1]``, arguments frozen.

Triton cannot take a rank-0 tensor (every dim list is non-empty, and a reshape to a scalar
is refused on a model that does not batch), nor a Python ``int`` argument. The served model
takes a scalar input as dims ``[1]`` (on a batching model ``[batch, 1]``, of which the first
row counts) and hands the source the scalar; ``--constant NAME=VALUE`` freezes an input or
argument into it. The reference the artifacts are verified against runs the source itself
behind :meth:`Adaptation.source_feed`, so verification proves the adapted model equal to it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tritongen.errors import ConfigError
from tritongen.sources.samples import Array
from tritongen.sources.signature import TRITON_TO_NUMPY, Signature

TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off")


@dataclass(frozen=True)
class Adaptation:
    """What the served model does around the source; empty when they are the same."""

    scalar_inputs: tuple[str, ...] = ()
    scalar_outputs: tuple[str, ...] = ()
    constants: Mapping[str, Any] = field(default_factory=dict)
    """Frozen inputs and arguments: numpy arrays (ONNX, tensors) or Python numbers (``int`` arguments)."""
    batched: bool = False

    @property
    def needed(self) -> bool:
        """Whether the served model differs from the source."""
        return bool(self.scalar_inputs or self.scalar_outputs or self.constants)

    def source_feed(self, feed: Mapping[str, Array]) -> dict[str, Any]:
        """The source's inputs for a served feed: scalars as rank 0 (the first row's), constants added."""
        out: dict[str, Any] = dict(feed)
        for name in self.scalar_inputs:
            out[name] = np.asarray(np.asarray(feed[name]).reshape(-1)[0])
        out.update(self.constants)
        return out

    def served_outputs(self, names: Sequence[str], outputs: Sequence[Array]) -> list[Array]:
        """The source's outputs as the served model answers them: rank-0 ones as ``[1]``."""
        return [
            np.asarray(value).reshape(1) if name in self.scalar_outputs else value
            for name, value in zip(names, outputs, strict=True)
        ]

    def describe(self) -> list[str]:
        """The adaptations, in words, for the convert output."""
        notes = []
        if self.scalar_inputs:
            per = "one value per request (its first row)" if self.batched else "its one value"
            notes.append(f"scalar input(s) {', '.join(self.scalar_inputs)} served as dims [1]: {per}")
        if self.scalar_outputs:
            notes.append(f"scalar output(s) {', '.join(self.scalar_outputs)} answered as dims [1]")
        for name, value in self.constants.items():
            shown = value if not isinstance(value, np.ndarray) else value.reshape(-1)[0]
            notes.append(f"'{name}' frozen at {shown} (--constant)")
        return notes


def parse_constants(items: Sequence[str]) -> dict[str, str]:
    """``--constant NAME=VALUE`` items by name, the values as given.

    Raises:
        ConfigError: an item is not ``NAME=VALUE``, or names an input twice.
    """
    constants: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip() or not value.strip():
            raise ConfigError(f"--constant {item!r} is not NAME=VALUE", "write e.g. --constant sr=16000")
        if name.strip() in constants:
            raise ConfigError(f"--constant names {name.strip()!r} twice", "give each input once")
        constants[name.strip()] = value.strip()
    return constants


def parse_value(text: str, kind: str, label: str) -> int | float | bool | str:
    """``text`` as a value of ``kind`` (``int``, ``float``, ``bool`` or ``str``).

    Raises:
        ConfigError: the text is not such a value.
    """
    try:
        if kind == "bool":
            if text.lower() not in TRUE_WORDS + FALSE_WORDS:
                raise ValueError(text)
            return text.lower() in TRUE_WORDS
        if kind == "int":
            return int(text)
        if kind == "float":
            return float(text)
    except ValueError as e:
        article = "an" if kind == "int" else "a"
        raise ConfigError(f"{label}: {text!r} is not {article} {kind}", f"give {article} {kind} value") from e
    return text


def tensor_constant(text: str, data_type: str, dims: Sequence[int], label: str) -> Array:
    """A ``--constant`` for a tensor input: ``text`` in every element of a tensor of fixed ``dims``.

    Raises:
        ConfigError: a dynamic dim (its size is unknown), or a value the type cannot hold.
    """
    if any(d < 0 for d in dims):
        raise ConfigError(
            f"{label}: the input has dynamic dims [{','.join(map(str, dims))}], so its size is unknown",
            "freeze scalars and fixed-shape inputs only",
        )
    dtype = np.dtype(TRITON_TO_NUMPY[data_type])
    kind = {"b": "bool", "i": "int", "u": "int", "f": "float"}.get(dtype.kind, "str")
    value = parse_value(text, kind, label)
    if kind == "str":
        return np.full(tuple(dims), str(value).encode(), dtype=np.object_)
    return np.full(tuple(dims), value, dtype=dtype)


def without_inputs(signature: Signature, names: Sequence[str]) -> Signature:
    """``signature`` less the inputs ``names`` (frozen by ``--constant``)."""
    from dataclasses import replace

    return replace(signature, inputs=tuple(t for t in signature.inputs if t.name not in names))


def unknown_constant(names: Sequence[str], known: Sequence[str], what: str) -> ConfigError | None:
    """The refusal of a ``--constant`` that names nothing the source takes, or ``None``."""
    unknown = [n for n in names if n not in known]
    if not unknown:
        return None
    return ConfigError(
        f"--constant names {unknown[0]!r}, which is not {what}", f"it takes: {', '.join(known) or 'nothing'}"
    )


def scalars_of(signature: Signature) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The scalar inputs and outputs of ``signature``."""
    return (
        tuple(t.name for t in signature.inputs if t.scalar),
        tuple(t.name for t in signature.outputs if t.scalar),
    )
