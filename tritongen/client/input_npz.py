"""``--input-data FILE.npz``: full request arrays (batch dim first), one step or several, checked.

The steps are those :func:`tritongen.io.arrays.write_steps` wrote, or one step of plain
arrays; string arrays (numpy ``U`` or ``S``) feed BYTES inputs.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import Any

import numpy as np

from tritongen.client.inputs import InputSpec, ModelInterface, expected_array, numpy_dtype
from tritongen.client.steps import Step, bytes_array
from tritongen.io.arrays import Array, ArrayDtypeError, ArrayShapeError, read_steps, request_arrays
from tritongen.io.loadgen_shared import is_string_array


def npz_steps(path: Path, interface: ModelInterface, fixed: Collection[str] = ()) -> list[Step]:
    """The steps of ``--input-data FILE.npz``, each checked: one array per input (but ``fixed``).

    Raises:
        SourceError: the file is missing or unreadable, lacks an input, has a wrong
            dtype or shape, or its steps differ in rows.
    """
    label = f"input data {path}"
    raw_steps = read_steps(path, label, "--input-data")
    steps = []
    for index, arrays in enumerate(raw_steps):
        where = label if len(raw_steps) == 1 else f"{label} step {index}"
        expected = [
            expected_array(spec)
            for spec in interface.inputs
            if spec.name not in fixed and (spec.name in arrays or not spec.optional)
        ]
        converted = {
            spec.name: _npz_array(arrays[spec.name], spec, where)
            for spec in interface.inputs
            if spec.name in arrays and spec.name not in fixed
        }
        steps.append(request_arrays(converted, expected, where, interface.max_batch_size))
    if interface.batched and any(steps):
        rows = {int(next(iter(step.values())).shape[0]) for step in steps if step}
        if len(rows) > 1:
            raise ArrayShapeError(
                f"{label}: its steps have different batch sizes ({', '.join(map(str, sorted(rows)))} rows)",
                "give every step the same rows",
            )
    return steps


def _npz_array(array: Array, spec: InputSpec, where: str) -> Array:
    """A stored array as it is sent: strings for BYTES inputs as ``bytes`` objects, numbers as they are."""
    if spec.datatype != "BYTES":
        if is_string_array(array):
            raise ArrayDtypeError(
                f"{where} holds strings ({array.dtype}) for input '{spec.name}', which is {spec.datatype}",
                f"store numbers of dtype {np.dtype(numpy_dtype(spec.datatype))} for it",
            )
        return array
    if not is_string_array(array):
        raise ArrayDtypeError(
            f"{where} holds {array.dtype} for input '{spec.name}', which is BYTES (strings)",
            "store a string array for it, e.g. numpy.array(['a', 'b'])",
        )
    return bytes_array([_as_bytes(item) for item in array.reshape(-1).tolist()]).reshape(array.shape)


def _as_bytes(item: Any) -> bytes:
    return item if isinstance(item, bytes) else str(item).encode()
