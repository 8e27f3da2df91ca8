"""Request data from the data options: random or zero data, or a file's steps, with inputs fixed to a value.

A load test sends *steps*: prepared requests, one array per model input each, used
round-robin. Random and zero data make one step. A JSON file in perf_analyzer's
input-data format makes one step per entry of its ``"data"`` list (:mod:`.input_json`), an
``.npz`` its stored steps (:mod:`.input_npz`). ``"validation_data"`` holds the expected
outputs, entry by entry (:mod:`tritongen.client.validation_data`): a load test checks every
response against them. ``--input-value NAME=VALUE`` fixes one input in every step: a string
for a BYTES input (e.g. the model a BLS model should call), else a number broadcast to its shape.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tritongen.client.input_json import (
    EntryReader,
    InputDataError,
    json_steps,
    json_stream_lengths,
    json_streams,
    read_json_document,
)
from tritongen.client.input_npz import npz_steps
from tritongen.client.inputs import (
    DEFAULT_STRING_LENGTH,
    InputSpec,
    ModelInterface,
    build_inputs,
    check_batch_size,
    check_input_names,
    numpy_dtype,
    request_shape,
)
from tritongen.client.steps import Fill, Step, fits_integer
from tritongen.errors import ConfigError
from tritongen.io.arrays import Array

__all__ = [
    "EntryReader",
    "Fill",
    "InputDataError",
    "InputPlan",
    "Step",
    "input_steps",
    "json_steps",
    "json_stream_lengths",
    "json_streams",
    "parse_input_data",
    "parse_input_values",
    "read_json_document",
    "value_array",
    "with_values",
]  # fmt: skip
"""The data options' names, and those of the data files' readers callers take from here."""


@dataclass(frozen=True)
class InputPlan:
    """What the data options ask for: where the request data comes from, and inputs fixed to a value."""

    source: Fill | Path = "random"
    """``random``, ``zeros``, or a ``.json`` or ``.npz`` file."""
    string_length: int = DEFAULT_STRING_LENGTH
    """Bytes per element of random BYTES inputs."""
    values: Mapping[str, str] = field(default_factory=dict)
    """``--input-value`` by input name."""


def parse_input_data(text: str) -> Fill | Path:
    """``--input-data``: ``random``, ``zeros`` or the path of a ``.json`` or ``.npz`` file.

    Raises:
        ConfigError: anything else.
    """
    if text in ("random", "zeros"):
        return text  # type: ignore[return-value]
    path = Path(text)
    if path.suffix.lower() not in (".json", ".npz"):
        raise ConfigError(
            f"--input-data {text!r} is neither random, zeros, a .json nor an .npz file",
            "give random, zeros, a JSON file in perf_analyzer's input-data format or an .npz",
        )
    return path


def parse_input_values(items: Sequence[str]) -> dict[str, str]:
    """``--input-value NAME=VALUE`` items by name (the value may contain ``=``).

    Raises:
        ConfigError: an item without ``=`` or a name, or a name given twice.
    """
    values: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise ConfigError(
                f"--input-value {item!r} is not NAME=VALUE", "write e.g. --input-value MODEL_NAME=mlp_onnx"
            )
        if name in values:
            raise ConfigError(f"--input-value gives input '{name}' twice", "give each input once")
        values[name] = value
    return values


def input_steps(
    interface: ModelInterface,
    plan: InputPlan,
    batch_size: int = 1,
    shapes: Mapping[str, tuple[int, ...]] | None = None,
    seed: int = 0,
    files: Mapping[str, Path] | None = None,
) -> list[Step]:
    """The requests to send, checked against the model: one step for random or zero data, or a file's.

    Args:
        interface: The model as the server describes it.
        plan: The data options.
        batch_size: Rows per request (random and zero data, JSON entries stacked).
        shapes: ``--shape`` values of dynamic dims by input.
        seed: Seed of random data.
        files: ``NAME=FILE.npy`` arrays (``infer --input``), with random or zero data only.

    Raises:
        ConfigError: an unknown input name, a batch size the model cannot take, a bad
            ``--input-value`` or ``--string-length``, or files with a data file.
        SourceError: the data file is missing or malformed, or its data does not fit the model.
    """
    shapes = dict(shapes or {})
    if plan.string_length < 0:
        raise ConfigError(f"--string-length {plan.string_length} is negative", "give 0 or more bytes")
    check_input_names(interface, list(plan.values), "--input-value")
    check_input_names(interface, list(shapes), "--shape")
    check_batch_size(interface, batch_size)
    fixed = set(plan.values)
    if isinstance(plan.source, Path):
        if files:
            raise ConfigError("--input and a data file in --input-data exclude each other", "use one of them")
        if plan.source.suffix.lower() == ".json":
            steps = json_steps(plan.source, interface, batch_size, shapes, fixed)
        else:
            steps = npz_steps(plan.source, interface, fixed)
    else:
        steps = [
            build_inputs(
                interface,
                batch_size=batch_size,
                shapes=shapes,
                files=dict(files or {}),
                seed=seed,
                fill=plan.source,
                string_length=plan.string_length,
            )
        ]
    return [with_values(interface, step, plan.values, shapes, batch_size) for step in steps]


def with_values(
    interface: ModelInterface,
    step: Step,
    values: Mapping[str, str],
    shapes: Mapping[str, tuple[int, ...]],
    batch_size: int,
) -> Step:
    """``step`` with the inputs of ``values`` fixed, its arrays in the model's input order.

    A fixed value fills the step's rows (``batch_size`` when the step has no other input);
    its dynamic dims come from ``shapes``, else are 1.

    Raises:
        ConfigError: a value that is not of its input's type.
    """
    filled = dict(step)
    rows = next((int(a.shape[0]) for a in step.values() if a.ndim), batch_size)
    for spec in interface.inputs:
        text = values.get(spec.name)
        if text is None:
            continue
        override = shapes.get(spec.name)
        if override is not None:
            shape = request_shape(spec, rows, interface.batched, override)
        else:
            shape = ([rows] if interface.batched else []) + [1 if d == -1 else d for d in spec.dims]
        filled[spec.name] = value_array(spec, text, shape)
    return {spec.name: filled[spec.name] for spec in interface.inputs if spec.name in filled}


def value_array(spec: InputSpec, text: str, shape: list[int]) -> Array:
    """``--input-value`` for ``spec``, broadcast to ``shape``: the string itself for BYTES, else a number.

    Raises:
        ConfigError: a value that is not a number (or ``true``/``false``) of the input's type.
    """
    if spec.datatype == "BYTES":
        return np.full(shape, text.encode(), dtype=np.object_)
    dtype = np.dtype(numpy_dtype(spec.datatype))
    lowered = text.strip().lower()
    number: float | int | bool | None = None
    if dtype.kind == "b":
        number = {"true": True, "false": False, "1": True, "0": False}.get(lowered)
    else:
        try:
            number = int(lowered) if dtype.kind in "iu" else float(lowered)
        except ValueError:
            number = None
    if number is None or (dtype.kind in "iu" and not fits_integer(dtype, [int(number)])):
        wanted = {"b": "true or false", "f": "a number"}.get(dtype.kind, f"an integer that fits {dtype}")
        raise ConfigError(
            f"--input-value {spec.name}={text!r}: input '{spec.name}' is {spec.datatype}, "
            f"which takes {wanted}",
            f"give {wanted}, e.g. --input-value {spec.name}={'true' if dtype.kind == 'b' else 1}",
        )
    return np.full(shape, number, dtype=dtype)
