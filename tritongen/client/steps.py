"""What request data is made of: a step (one prepared request), and the data made up without a file."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from tritongen.io.arrays import Array

Step = dict[str, Array]
"""One prepared request: an array per model input."""
Fill = Literal["random", "zeros"]
"""Data made up for every input: random values, or zeros."""


def bytes_array(items: list[bytes]) -> Array:
    """A 1-D object array of ``bytes`` (a BYTES input's elements)."""
    out = np.empty(len(items), dtype=np.object_)
    out[:] = items
    return out


def fits_integer(dtype: np.dtype[Any], values: Sequence[int]) -> bool:
    """Whether every value fits the integer ``dtype``."""
    info = np.iinfo(dtype)
    return all(info.min <= v <= info.max for v in values)
