"""Request data, as the load generator and the tritongen package both read and write it, written once.

Triton's dtype table, random string elements, the ``.npz`` reader and the request-steps
layout (steps, a sequence model's streams, expected outputs and their tolerance). Like
:mod:`.shared`, this module imports only the standard library and numpy: tritongen imports it
(through ``tritongen/io/loadgen_shared.py``) in processes that never import Locust.
"""

from __future__ import annotations

import math
import os
import zipfile
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = [
    "ENTRIES_KEY",
    "EXPECTED_PREFIX",
    "NPZ_READ_FAILURES",
    "NUMPY_DTYPES",
    "STEPS_KEY",
    "STEP_FAILURES",
    "STREAMS_KEY",
    "STRING_ALPHABET",
    "TOLERANCE_KEY",
    "Array",
    "NpzReadError",
    "decode_steps",
    "decode_streams",
    "decode_tolerance",
    "encode_steps",
    "is_string_array",
    "random_strings",
    "read_npz",
    "split_step",
    "tensor_byte_size",
]
"""What the tritongen package takes from here (through ``tritongen/io/loadgen_shared.py``)."""

Array = npt.NDArray[Any]

# -- tensors and request data ------------------------------------------------------------------

NUMPY_DTYPES: dict[str, type] = {
    "BOOL": np.bool_,
    "UINT8": np.uint8,
    "UINT16": np.uint16,
    "UINT32": np.uint32,
    "UINT64": np.uint64,
    "INT8": np.int8,
    "INT16": np.int16,
    "INT32": np.int32,
    "INT64": np.int64,
    "FP16": np.float16,
    "FP32": np.float32,
    "FP64": np.float64,
}
"""Triton wire type → numpy type (every other type is sent as BYTES)."""
STRING_ALPHABET = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
"""What random BYTES elements are made of."""


def is_string_array(array: Array) -> bool:
    """Whether ``array`` holds strings (``bytes``/``str`` objects, numpy ``S`` or ``U``): a BYTES tensor."""
    return array.dtype.kind in "OSU"


def item_bytes(item: Any) -> bytes:
    """One element of a string tensor as bytes (``str`` as UTF-8)."""
    return item if isinstance(item, bytes) else str(item).encode()


def random_strings(shape: Sequence[int], length: int, rng: np.random.Generator) -> Array:
    """An object array of random ASCII letters and digits, ``length`` bytes per element."""
    count = int(np.prod(shape))
    alphabet = np.frombuffer(STRING_ALPHABET, dtype=np.uint8)
    codes = alphabet[rng.integers(0, len(alphabet), size=(count, length))]
    out = np.empty(count, dtype=np.object_)
    out[:] = [row.tobytes() for row in codes]
    return out.reshape(shape)


def tensor_byte_size(datatype: str, dims: Sequence[int]) -> int | None:
    """Bytes of a tensor of wire type ``datatype`` and shape ``dims`` (at least 1); None if unknown.

    Unknown: a BYTES (or other non-numeric) tensor, or a dynamic (negative) dim.
    """
    dtype = NUMPY_DTYPES.get(datatype)
    if dtype is None or any(d < 0 for d in dims):
        return None
    return max(1, math.prod(dims) * np.dtype(dtype).itemsize)


# -- .npz files: plain arrays, or request steps ----------------------------------------------

NPZ_READ_FAILURES: tuple[type[Exception], ...] = (OSError, ValueError, EOFError, zipfile.BadZipFile)
"""What ``numpy.load`` raises for a file that is not a readable array file."""
STEPS_KEY = "__tritongen_steps__"
"""Marks an ``.npz`` of request steps; holds ``[number of steps]``. Without it an ``.npz`` is one step.

In a steps file a numeric array of step ``i`` is ``i/NAME``; a string array is ``n<i>/NAME``
(each element's byte length, in the tensor's shape) and ``b<i>/NAME`` (the elements' bytes,
concatenated): stored without pickling and without losing trailing NUL bytes."""
STREAMS_KEY = "__tritongen_streams__"
"""In a steps file of a sequence model's streams: the number of steps of each stream, in order.

Each stream is one sequence: its steps (consecutive in the file) sent in order, the first with
the start flag and the last with the end flag."""
EXPECTED_PREFIX = "expected:"
"""In a request step, the array ``expected:NAME`` holds what output NAME must answer (validation).

It is flat per row: ``[rows, elements]`` for a batching model, ``[elements]`` otherwise; a row's
elements are the output's, row-major. A step that has expected outputs has ``ENTRIES_KEY`` too."""
ENTRIES_KEY = "entries:"
"""In a step with expected outputs: the data file's entry of each row (int64), named in mismatches."""
TOLERANCE_KEY = "__tritongen_tolerance__"
"""In a steps file with expected outputs: ``[atol, rtol]`` for floating-point outputs
(``|received - expected| <= atol + rtol * |expected|``); other types compare exactly."""
STEP_FAILURES: tuple[type[Exception], ...] = (ValueError, KeyError, IndexError)
"""What :func:`decode_steps` raises for malformed request steps."""


class NpzReadError(ValueError):
    """An ``.npz`` file that is missing (``kind`` ``missing``) or not a readable archive (``unreadable``)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


def read_npz(path: str | os.PathLike[str], label: str) -> dict[str, Array]:
    """Every array of an ``.npz`` file by name; pickled objects are refused.

    ``label`` names the file in messages, e.g. ``input data batch.npz``.

    Raises:
        NpzReadError: The file does not exist, or is not an archive of plain arrays.
    """
    unreadable = f"cannot read {label} as an .npz archive"
    try:
        loaded = np.load(path, allow_pickle=False)
    except FileNotFoundError as e:
        raise NpzReadError("missing", f"{label} does not exist") from e
    except NPZ_READ_FAILURES as e:
        raise NpzReadError("unreadable", f"{unreadable}: {e}") from e
    if not isinstance(loaded, np.lib.npyio.NpzFile):
        raise NpzReadError("unreadable", f"{unreadable}: it holds a single array")
    try:
        with loaded:
            arrays = {name: loaded[name] for name in loaded.files}
    except NPZ_READ_FAILURES as e:
        raise NpzReadError("unreadable", f"{unreadable}: {e}") from e
    stray = [name for name, value in arrays.items() if not isinstance(value, np.ndarray)]
    if stray:
        raise NpzReadError("unreadable", f"{unreadable}: {stray[0]!r} is not an array")
    return arrays


def encode_steps(
    steps: Sequence[Mapping[str, Array]],
    streams: Sequence[int] | None = None,
    tolerance: tuple[float, float] | None = None,
) -> dict[str, Array]:
    """The arrays of one ``.npz`` holding request ``steps`` (see ``STEPS_KEY``), in ``streams`` if given.

    ``tolerance`` (``TOLERANCE_KEY``) goes with steps that carry expected outputs.

    Raises:
        ValueError: stream lengths that are not positive or do not add up to the steps.
    """
    stored: dict[str, Array] = {STEPS_KEY: np.array([len(steps)], dtype=np.int64)}
    if streams is not None:
        if min(streams, default=0) < 1 or sum(streams) != len(steps):
            raise ValueError(f"streams of {list(streams)} steps do not split {len(steps)} steps")
        stored[STREAMS_KEY] = np.array(list(streams), dtype=np.int64)
    if tolerance is not None:
        stored[TOLERANCE_KEY] = np.array(tolerance, dtype=np.float64)
    for index, step in enumerate(steps):
        for name, array in step.items():
            if not is_string_array(array):
                stored[f"{index}/{name}"] = np.ascontiguousarray(array)
                continue
            items = [item_bytes(item) for item in array.reshape(-1).tolist()]
            lengths = np.array([len(item) for item in items], np.int64)
            stored[f"n{index}/{name}"] = lengths.reshape(array.shape)
            stored[f"b{index}/{name}"] = np.frombuffer(b"".join(items), dtype=np.uint8)
    return stored


def decode_steps(arrays: Mapping[str, Array]) -> list[dict[str, Array]]:
    """The request steps held by the arrays of an ``.npz`` that has ``STEPS_KEY``.

    String tensors come back as object arrays of ``bytes``, in their shape.

    Raises:
        ValueError: String lengths that do not add up to their bytes, or a bad step number.
        KeyError: The bytes of a string tensor are missing.
        IndexError: An array of a step beyond the number of steps.
    """
    count = int(arrays[STEPS_KEY].reshape(-1)[0])
    steps: list[dict[str, Array]] = [{} for _ in range(count)]
    for key, array in arrays.items():
        head, _, name = key.partition("/")
        if key in (STEPS_KEY, STREAMS_KEY, TOLERANCE_KEY) or head.startswith("b"):
            continue
        if head.startswith("n"):
            steps[int(head[1:])][name] = _split_strings(arrays[f"b{head[1:]}/{name}"], array, name)
        else:
            steps[int(head)][name] = array
    return steps


def decode_streams(arrays: Mapping[str, Array]) -> list[int] | None:
    """The stream lengths of a steps file (``STREAMS_KEY``), or ``None`` when its steps are one series.

    Raises:
        ValueError: lengths that are not positive or do not add up to the file's steps.
    """
    if STREAMS_KEY not in arrays:
        return None
    lengths = [int(n) for n in arrays[STREAMS_KEY].reshape(-1).tolist()]
    count = int(arrays[STEPS_KEY].reshape(-1)[0])
    if min(lengths, default=0) < 1 or sum(lengths) != count:
        raise ValueError(f"streams of {lengths} steps do not split {count} steps")
    return lengths


def decode_tolerance(arrays: Mapping[str, Array]) -> tuple[float, float]:
    """``(atol, rtol)`` of a steps file's expected outputs (exact, ``(0, 0)``, when it states none).

    Raises:
        ValueError: not two non-negative numbers.
    """
    if TOLERANCE_KEY not in arrays:
        return 0.0, 0.0
    values = [float(v) for v in arrays[TOLERANCE_KEY].reshape(-1).tolist()]
    if len(values) != 2 or min(values) < 0 or any(math.isnan(v) for v in values):
        raise ValueError(f"the tolerance {values} is not [atol, rtol] of two non-negative numbers")
    return values[0], values[1]


def split_step(step: Mapping[str, Array]) -> tuple[dict[str, Array], dict[str, Array], Array | None]:
    """A step's inputs, its expected outputs by output name (``EXPECTED_PREFIX``) and its rows' entries."""
    inputs, expected = {}, {}
    for name, array in step.items():
        if name.startswith(EXPECTED_PREFIX):
            expected[name[len(EXPECTED_PREFIX) :]] = array
        elif name != ENTRIES_KEY:
            inputs[name] = array
    return inputs, expected, step.get(ENTRIES_KEY)


def _split_strings(data: Array, lengths: Array, name: str) -> Array:
    """An object array of ``bytes`` shaped like ``lengths``, cut from the concatenated ``data``."""
    sizes = lengths.reshape(-1).astype(np.int64).tolist()
    raw = data.tobytes()
    if sum(sizes) != len(raw) or min(sizes, default=0) < 0:
        raise ValueError(f"the lengths of {name!r} do not add up to its bytes")
    items, at = [], 0
    for size in sizes:
        items.append(raw[at : at + size])
        at += size
    out = np.empty(len(items), dtype=np.object_)
    out[:] = items
    return out.reshape(lengths.shape)
