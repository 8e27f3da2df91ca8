"""Request inputs built from a served model's metadata: shapes, dtypes, random or given data."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from tritongen.errors import ConfigError
from tritongen.io.arrays import (
    ExpectedArray,
    check_request_array,
    read_npy,
)
from tritongen.io.loadgen_shared import random_strings

DEFAULT_DYNAMIC_DIM = 8
DEFAULT_STRING_LENGTH = 16
"""Bytes per element of random BYTES (string) inputs."""


@dataclass(frozen=True)
class InputSpec:
    """One model input as the server describes it; ``dims`` exclude the batch dim when batched."""

    name: str
    datatype: str
    """Triton wire type, e.g. ``FP32``, ``INT64``, ``BYTES``."""
    dims: tuple[int, ...]
    optional: bool = False
    """Marked ``optional: true`` in the config: a request may leave it out."""


@dataclass(frozen=True)
class ModelInterface:
    """What a client needs to know to call a model."""

    name: str
    max_batch_size: int
    inputs: tuple[InputSpec, ...]
    outputs: tuple[str, ...]
    output_specs: tuple[InputSpec, ...] = ()
    """The outputs with their types and dims (batch dim excluded when batched), where known."""

    @property
    def batched(self) -> bool:
        """Whether requests carry a leading batch dim."""
        return self.max_batch_size > 0


def interface_from_metadata(metadata: dict[str, Any], config: dict[str, Any]) -> ModelInterface:
    """Combine the model metadata and config (as JSON dicts) into a :class:`ModelInterface`."""
    max_batch = int(config.get("max_batch_size", 0))
    optional = {t.get("name") for t in config.get("input") or [] if t.get("optional")}
    inputs = []
    for tensor in metadata["inputs"]:
        shape = [int(d) for d in tensor["shape"]]
        dims = shape[1:] if max_batch > 0 else shape
        inputs.append(
            InputSpec(
                name=tensor["name"],
                datatype=tensor["datatype"],
                dims=tuple(dims),
                optional=tensor["name"] in optional,
            )
        )
    outputs = tuple(t["name"] for t in metadata["outputs"])
    output_specs = tuple(
        InputSpec(
            name=t["name"],
            datatype=str(t.get("datatype", "")),
            dims=tuple(int(d) for d in t.get("shape", []))[1 if max_batch > 0 else 0 :],
        )
        for t in metadata["outputs"]
    )
    return ModelInterface(
        name=metadata["name"],
        max_batch_size=max_batch,
        inputs=tuple(inputs),
        outputs=outputs,
        output_specs=output_specs,
    )


def parse_shape_overrides(items: list[str]) -> dict[str, tuple[int, ...]]:
    """Parse ``NAME=DIMS`` items (``input_ids=128`` or ``image=3x224x224`` or ``x=3,224``).

    Raises:
        ConfigError: an item is not ``NAME=DIMS`` with positive integers.
    """
    shapes: dict[str, tuple[int, ...]] = {}
    for item in items:
        name, sep, dims = item.partition("=")
        parts = [p for p in dims.replace("x", ",").split(",") if p.strip()]
        try:
            values = tuple(int(p) for p in parts)
        except ValueError:
            values = ()
        if not sep or not name or not values or any(v <= 0 for v in values):
            raise ConfigError(
                f"--shape {item!r} is not NAME=DIMS",
                "write e.g. --shape input_ids=128 or --shape image=3x224x224",
            )
        shapes[name] = values
    return shapes


def parse_input_files(items: list[str]) -> dict[str, Path]:
    """Parse ``NAME=FILE.npy`` items.

    Raises:
        ConfigError: an item is not ``NAME=FILE``.
    """
    files: dict[str, Path] = {}
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise ConfigError(f"--input {item!r} is not NAME=FILE.npy", "write e.g. --input input=batch.npy")
        files[name] = Path(path)
    return files


def numpy_dtype(datatype: str) -> Any:
    """The numpy dtype for a Triton wire type."""
    from tritonclient.utils import triton_to_np_dtype

    dtype = triton_to_np_dtype(datatype)
    if dtype is None:
        raise ConfigError(
            f"data type {datatype} is not supported by the client", "use a numeric or BYTES input"
        )
    return dtype


def request_shape(
    spec: InputSpec, batch_size: int, batched: bool, override: tuple[int, ...] | None
) -> list[int]:
    """The full shape to send for ``spec``: batch dim (if batched) + dims with dynamic ones filled."""
    if override is not None:
        if len(override) != len(spec.dims):
            raise ConfigError(
                f"--shape for '{spec.name}' has {len(override)} dims; the model expects {len(spec.dims)} "
                f"({list(spec.dims)}, batch dim excluded)",
                "give one value per non-batch dim",
            )
        for given, declared in zip(override, spec.dims, strict=True):
            if declared != -1 and given != declared:
                raise ConfigError(
                    f"--shape for '{spec.name}' sets {list(override)}, but the model fixes {list(spec.dims)}",
                    "change only the dims that are -1",
                )
        dims = list(override)
    else:
        dims = [DEFAULT_DYNAMIC_DIM if d == -1 else d for d in spec.dims]
    return ([batch_size] if batched else []) + dims


def random_array(
    datatype: str, shape: list[int], rng: np.random.Generator, string_length: int = DEFAULT_STRING_LENGTH
) -> npt.NDArray[Any]:
    """Random data of a Triton type: normal floats, small non-negative ints, bools, random strings."""
    dtype = numpy_dtype(datatype)
    if datatype == "BYTES":
        return random_strings(shape, string_length, rng)
    if datatype == "BF16":  # ml_dtypes.bfloat16 is no numpy floating type, but it is a float
        return rng.standard_normal(size=shape).astype(np.float32).astype(dtype)
    if datatype == "BOOL":
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    if np.issubdtype(dtype, np.floating):
        return rng.standard_normal(size=shape).astype(dtype)
    # Small non-negative integers are valid token ids, masks and class indices alike.
    return rng.integers(0, 2, size=shape).astype(dtype)


def zeros_array(datatype: str, shape: list[int]) -> npt.NDArray[Any]:
    """Zeros of a Triton type (empty strings for BYTES)."""
    if datatype == "BYTES":
        return np.full(shape, b"", dtype=np.object_)
    return np.zeros(shape, dtype=numpy_dtype(datatype))


def build_inputs(
    interface: ModelInterface,
    batch_size: int = 1,
    shapes: dict[str, tuple[int, ...]] | None = None,
    files: dict[str, Path] | None = None,
    seed: int = 0,
    fill: Literal["random", "zeros"] = "random",
    string_length: int = DEFAULT_STRING_LENGTH,
) -> dict[str, npt.NDArray[Any]]:
    """One array per model input: loaded from ``files`` where given, else random (or zeros).

    Raises:
        ConfigError: an unknown input name, a batch size the model cannot take, or a
            shape that contradicts the model.
        SourceError: an input file is unreadable or has the wrong dtype or shape.
    """
    shapes = shapes or {}
    files = files or {}
    check_input_names(interface, [*shapes, *files])
    check_batch_size(interface, batch_size)
    rng = np.random.default_rng(seed)
    arrays: dict[str, npt.NDArray[Any]] = {}
    for spec in interface.inputs:
        if spec.name in files:
            arrays[spec.name] = _load_input_file(spec, files[spec.name], interface)
        else:
            shape = request_shape(spec, batch_size, interface.batched, shapes.get(spec.name))
            if fill == "zeros":
                arrays[spec.name] = zeros_array(spec.datatype, shape)
            else:
                arrays[spec.name] = random_array(spec.datatype, shape, rng, string_length)
    return arrays


def check_input_names(interface: ModelInterface, names: list[str], option: str | None = None) -> None:
    """Check that every name is an input of the model.

    Raises:
        ConfigError: the first name the model has no input of.
    """
    known = {spec.name for spec in interface.inputs}
    for name in names:
        if name not in known:
            where = f"{option} {name}=…: model" if option else "model"
            raise ConfigError(
                f"{where} '{interface.name}' has no input '{name}'", f"inputs are: {', '.join(sorted(known))}"
            )


def check_batch_size(interface: ModelInterface, batch_size: int) -> None:
    """Check that the model takes requests of ``batch_size`` rows.

    Raises:
        ConfigError: a batch size below 1, above the model's max, or above 1 for a model that does not batch.
    """
    if batch_size < 1:
        raise ConfigError(f"--batch-size {batch_size} must be at least 1", "use 1 or more")
    if interface.batched and batch_size > interface.max_batch_size:
        raise ConfigError(
            f"--batch-size {batch_size} exceeds the model's max_batch_size {interface.max_batch_size}",
            f"use at most {interface.max_batch_size}",
        )
    if not interface.batched and batch_size != 1:
        raise ConfigError(
            f"model '{interface.name}' does not batch (max_batch_size 0), so --batch-size {batch_size} "
            "is impossible",
            "drop --batch-size",
        )


def expected_array(spec: InputSpec) -> ExpectedArray:
    """What an array sent for ``spec`` must be: its exact dtype (any for ``BYTES``) and dims."""
    dtype = None if spec.datatype == "BYTES" else np.dtype(numpy_dtype(spec.datatype))
    return ExpectedArray(name=spec.name, dtype=dtype, dims=spec.dims)


def _load_input_file(spec: InputSpec, path: Path, interface: ModelInterface) -> npt.NDArray[Any]:
    label = f"input file {path}"
    array = read_npy(path, label, "--input")
    check_request_array(array, expected_array(spec), label, interface.max_batch_size)
    return array
