"""Random input batches shaped by a signature: for probing sources and verifying artifacts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from tritongen.sources.signature import TRITON_TO_NUMPY, Signature, TensorSpec

Array = npt.NDArray[Any]
Feed = dict[str, Array]


def concrete_shape(tensor: TensorSpec, batched: bool, batch: int, dim_value: int) -> tuple[int, ...]:
    """The shape of one sample: ``batch`` in front when batched, ``dim_value`` for every ``-1``."""
    dims = tuple(dim_value if d == -1 else d for d in tensor.dims)
    return (batch, *dims) if batched else dims


def random_array(data_type: str, shape: Sequence[int], rng: np.random.Generator) -> npt.NDArray[Any]:
    """Random values of a Triton data type.

    Floats are standard normal. Integers and booleans are 0 or 1: valid token ids,
    attention masks and class indices alike, so they exercise real code paths instead
    of failing index checks.
    """
    dtype = np.dtype(TRITON_TO_NUMPY[data_type])
    if data_type == "TYPE_STRING":
        return np.array([b"sample"] * int(np.prod(shape)), dtype=np.object_).reshape(tuple(shape))
    if dtype.kind == "f":
        return rng.standard_normal(tuple(shape)).astype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, size=tuple(shape)).astype(np.bool_)
    return rng.integers(0, 2, size=tuple(shape)).astype(dtype)


def random_feed(signature: Signature, batch: int, dim_value: int, rng: np.random.Generator) -> Feed:
    """One random input batch for every input of ``signature``."""
    return {
        t.name: random_array(t.data_type, concrete_shape(t, signature.batched, batch, dim_value), rng)
        for t in signature.inputs
    }


def numeric_strings(shape: Sequence[int], rng: np.random.Generator) -> Array:
    """Random small integers as strings (``b"7"``): what a graph that casts its strings to numbers parses."""
    values = rng.integers(0, 10, size=tuple(shape))
    return np.array([str(v).encode() for v in values.reshape(-1)], dtype=np.object_).reshape(tuple(shape))
