"""A model's I/O signature: tensor names, Triton data types, dims and the batch dim."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tritongen.io.loadgen_shared import NUMPY_DTYPES

TRITON_TO_NUMPY: dict[str, type | str] = {
    **{f"TYPE_{name}": numpy_type for name, numpy_type in NUMPY_DTYPES.items()},
    "TYPE_STRING": np.object_,
}
"""Triton data type -> numpy dtype: the load generator's wire types, and TYPE_STRING as numpy object
arrays of bytes."""


@dataclass(frozen=True)
class TensorSpec:
    """One input or output tensor.

    ``dims`` excludes the batch dim when the signature is batched; ``-1`` marks a
    dynamic dim.
    """

    name: str
    data_type: str
    dims: tuple[int, ...]
    scalar: bool = False
    """Rank 0 in the source, served as dims ``[1]`` (the served model reshapes it); on a batching
    model an input's one value per request (its first row)."""


@dataclass(frozen=True)
class Signature:
    """Inputs and outputs of a model; ``batched`` when a leading dynamic dim is the batch."""

    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    batched: bool
    notes: tuple[str, ...] = field(default=())

    def describe(self) -> str:
        """Return a compact human description, e.g. ``x:FP32[-1,16] -> y:FP32[-1,4]``."""

        def fmt(tensors: tuple[TensorSpec, ...]) -> str:
            lead = ["-1"] if self.batched else []
            return ", ".join(
                f"{t.name}:{t.data_type.removeprefix('TYPE_')}[{','.join(lead + [str(d) for d in t.dims])}]"
                for t in tensors
            )

        return f"{fmt(self.inputs)} -> {fmt(self.outputs)}"
