"""Array files (``.npy``, ``.npz``): read them and check their arrays against what a model takes.

Two sets of rules check the arrays. Request arrays go to the server as they are, so their
dtype must be the input's exactly and their batch must fit the model's largest
(:func:`request_arrays`, :func:`check_request_array`). Feed arrays go to a framework
runtime after a cast, so their dtype only has to cast safely to the input's and every
input must have the same rows (:func:`feed_arrays`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from tritongen.errors import SourceError
from tritongen.io import loadgen_shared as shared

Array = npt.NDArray[Any]


class ArrayFileError(SourceError):
    """An array file cannot be used as given."""


class ArrayFileMissingError(ArrayFileError):
    """The array file does not exist."""


class ArrayFileUnreadableError(ArrayFileError):
    """The file is not an array file of the kind asked (or holds pickled objects)."""


class ArrayMissingError(ArrayFileError):
    """An ``.npz`` file has no array for an input."""


class ArrayDtypeError(ArrayFileError):
    """An array's dtype does not fit its input."""


class ArrayShapeError(ArrayFileError):
    """An array's rank, fixed dims or rows do not fit its input."""


@dataclass(frozen=True)
class ExpectedArray:
    """One array a model input takes: its name, dtype (``None``: any) and dims after the batch dim."""

    name: str
    dtype: np.dtype[Any] | None
    dims: tuple[int, ...]

    def fits(self, shape: tuple[int, ...], batched: bool) -> bool:
        """Whether ``shape`` has this input's rank (plus the batch dim) and its fixed dims."""
        body = shape[1:] if batched else shape
        rank = len(self.dims) + (1 if batched else 0)
        return len(shape) == rank and all(d in (-1, got) for d, got in zip(self.dims, body, strict=False))


def _load(path: Path, label: str, option: str | None, kind: str) -> Any:
    """What ``numpy.load`` makes of ``path`` without pickles: an array or an open ``NpzFile``."""
    try:
        return np.load(path, allow_pickle=False)
    except FileNotFoundError as e:
        hint = f"check the path given to {option}" if option else "check the path"
        raise ArrayFileMissingError(f"{label} does not exist", hint) from e
    except shared.NPZ_READ_FAILURES as e:
        raise _unreadable(label, kind, str(e)) from e


def _unreadable(label: str, kind: str, reason: str) -> ArrayFileUnreadableError:
    saver = "numpy.savez" if kind == "an .npz archive" else "numpy.save"
    return ArrayFileUnreadableError(f"cannot read {label} as {kind}: {reason}", f"save it with {saver}")


def read_npz(path: Path, label: str, option: str | None = None) -> dict[str, Array]:
    """Every array of an ``.npz`` file by name; pickled objects are refused (the locustfile's reader).

    Args:
        path: The file.
        label: How messages name the file, e.g. ``input data batch.npz``.
        option: The command-line option that gave the path, named in the hint.

    Raises:
        ArrayFileMissingError: The file does not exist.
        ArrayFileUnreadableError: It is not an ``.npz`` archive of plain arrays.
    """
    try:
        return shared.read_npz(path, label)
    except shared.NpzReadError as e:
        if e.kind == "missing":
            hint = f"check the path given to {option}" if option else "check the path"
            raise ArrayFileMissingError(e.message, hint) from e
        raise ArrayFileUnreadableError(e.message, "save it with numpy.savez") from e


def read_npy(path: Path, label: str, option: str | None = None) -> Array:
    """The one array of an ``.npy`` file; pickled objects are refused.

    Raises:
        ArrayFileMissingError: The file does not exist.
        ArrayFileUnreadableError: It is not an ``.npy`` array file.
    """
    loaded = _load(path, label, option, "an .npy array")
    if not isinstance(loaded, np.ndarray):
        loaded.close()
        raise _unreadable(label, "an .npy array", "it is an .npz archive")
    return loaded


def check_request_array(array: Array, expected: ExpectedArray, label: str, max_batch_size: int) -> None:
    """Check that ``array`` can be sent as it is for ``expected`` (batched when ``max_batch_size > 0``).

    Raises:
        ArrayDtypeError: The dtype is not exactly the input's.
        ArrayShapeError: The rank or a fixed dim differs, or the batch is empty or too large.
    """
    want = expected.dtype
    if want is not None and array.dtype != want:
        raise ArrayDtypeError(
            f"{label} holds {array.dtype}, input '{expected.name}' takes {want}",
            f"convert it, e.g. numpy.save(path, array.astype('{want}'))",
        )
    batched = max_batch_size > 0
    if not expected.fits(array.shape, batched) or (batched and not 1 <= array.shape[0] <= max_batch_size):
        lead = "[batch, " if batched else "["
        raise ArrayShapeError(
            f"{label} has shape {list(array.shape)}, input '{expected.name}' takes "
            f"{lead}{', '.join(str(d) for d in expected.dims)}]",
            "reshape the array to match the model",
        )


def request_arrays(
    arrays: Mapping[str, Array], expected: Sequence[ExpectedArray], label: str, max_batch_size: int
) -> dict[str, Array]:
    """The arrays of ``expected``, in its order, each checked by :func:`check_request_array`.

    Raises:
        ArrayMissingError: Inputs without an array (all of them named).
        ArrayDtypeError: A dtype is not exactly the input's.
        ArrayShapeError: A shape does not fit.
    """
    missing = [tensor.name for tensor in expected if tensor.name not in arrays]
    if missing:
        raise ArrayMissingError(
            f"{label} has no array for input(s) {', '.join(missing)}",
            "store one array per model input, named like the input",
        )
    for tensor in expected:
        check_request_array(arrays[tensor.name], tensor, label, max_batch_size)
    return {tensor.name: arrays[tensor.name] for tensor in expected}


def feed_arrays(
    arrays: Mapping[str, Array], expected: Sequence[ExpectedArray], label: str, batched: bool
) -> tuple[dict[str, Array], int | None]:
    """The arrays of ``expected``, in its order, cast to their dtypes.

    Returns:
        The arrays, and their number of rows (``None`` when not ``batched``).

    Raises:
        ArrayMissingError: The first input without an array.
        ArrayDtypeError: A dtype does not cast safely to the input's.
        ArrayShapeError: A shape does not fit, or the inputs have different numbers of rows.
    """
    feed: dict[str, Array] = {}
    rows: int | None = None
    for tensor in expected:
        if tensor.name not in arrays:
            raise ArrayMissingError(
                f"{label} has no array {tensor.name!r}",
                f"store one array per input: {', '.join(t.name for t in expected)}",
            )
        feed[tensor.name] = _feed_array(arrays[tensor.name], tensor, label, batched)
        if batched:
            if rows is not None and feed[tensor.name].shape[0] != rows:
                raise ArrayShapeError(
                    f"{label}: inputs have different numbers of rows", "give every input the same rows"
                )
            rows = feed[tensor.name].shape[0]
    return feed, rows


def _feed_array(array: Array, expected: ExpectedArray, label: str, batched: bool) -> Array:
    """``array`` cast to the dtype of ``expected``, once its dtype and shape are checked."""
    want = expected.dtype
    if want is not None and not np.can_cast(array.dtype, want, "same_kind"):
        raise ArrayDtypeError(
            f"{label}: {expected.name!r} is {array.dtype}, the model wants {want}",
            "save the array with the input's dtype",
        )
    if not expected.fits(array.shape, batched):
        lead = ["batch"] if batched else []
        wanted = ",".join(lead + [str(d) for d in expected.dims])
        raise ArrayShapeError(
            f"{label}: {expected.name!r} has shape {list(array.shape)}, the model wants [{wanted}]",
            "save arrays with the batch dim first and the model's fixed dims",
        )
    return np.ascontiguousarray(array, dtype=want)


# -- request steps: several requests in one .npz --------------------------------------------


def write_steps(
    path: Path,
    steps: Sequence[Mapping[str, Array]],
    streams: Sequence[int] | None = None,
    tolerance: tuple[float, float] | None = None,
) -> None:
    """Write request steps to one ``.npz`` (read back by :func:`read_steps` and the locustfile).

    A numeric array of step ``i`` is stored as ``i/NAME``. A string array is stored
    without pickling and without losing trailing NUL bytes: ``n<i>/NAME`` holds the byte
    length of each element (in the tensor's shape), ``b<i>/NAME`` their bytes, concatenated.
    ``streams`` (a sequence model's streams: each one's number of steps) goes with them, and
    ``tolerance`` (``[atol, rtol]``) with steps that carry expected outputs.
    """
    np.savez(path, **shared.encode_steps(steps, streams, tolerance))


def read_steps(path: Path, label: str, option: str | None = None) -> list[dict[str, Array]]:
    """The request steps of an ``.npz``: those :func:`write_steps` wrote, or its arrays as one step.

    String tensors of a steps file come back as object arrays of ``bytes``; in a plain
    ``.npz`` they stay as numpy stored them (``S`` or ``U``).

    Raises:
        ArrayFileMissingError: The file does not exist.
        ArrayFileUnreadableError: It is not an ``.npz`` archive of plain arrays, or a malformed steps file.
    """
    arrays = read_npz(path, label, option)
    if shared.STEPS_KEY not in arrays:
        return [arrays]
    try:
        return shared.decode_steps(arrays)
    except shared.STEP_FAILURES as e:
        raise _unreadable(label, "an .npz archive", f"malformed request steps ({e})") from e
