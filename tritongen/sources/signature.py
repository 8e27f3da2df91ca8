"""A model's I/O signature: tensor names, Triton data types, dims and the batch dim."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

# Triton data type -> numpy dtype (TYPE_STRING travels as numpy object arrays of bytes).
TRITON_TO_NUMPY: dict[str, type | str] = {
    "TYPE_BOOL": np.bool_,
    "TYPE_UINT8": np.uint8,
    "TYPE_UINT16": np.uint16,
    "TYPE_UINT32": np.uint32,
    "TYPE_UINT64": np.uint64,
    "TYPE_INT8": np.int8,
    "TYPE_INT16": np.int16,
    "TYPE_INT32": np.int32,
    "TYPE_INT64": np.int64,
    "TYPE_FP16": np.float16,
    "TYPE_FP32": np.float32,
    "TYPE_FP64": np.float64,
    "TYPE_STRING": np.object_,
}


@dataclass(frozen=True)
class TensorSpec:
    """One input or output tensor.

    ``dims`` excludes the batch dim when the signature is batched; ``-1`` marks a
    dynamic dim.
    """

    name: str
    data_type: str
    dims: tuple[int, ...]


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
