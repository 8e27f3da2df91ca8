"""Request data from the data options: random or zero data, perf_analyzer's input-data JSON, ``.npz`` steps.

A load test sends *steps*: prepared requests, one array per model input each, used
round-robin. Random and zero data make one step. A JSON file in perf_analyzer's
input-data format makes one step per entry of its ``"data"`` list::

    {"data": [
        {"INPUT0": [1, 2, 3, 4], "TEXT": ["a sentence"]},          # flat values, row-major
        {"INPUT0": {"content": [1, 2, 3, 4], "shape": [2, 2]}},     # values with their shape
        {"INPUT0": {"b64": "AACAPwAAAEA="}},                         # raw little-endian bytes
        {"INPUT0": {"content": {"b64": "..."}, "shape": [4]}}
    ]}

Each entry holds one batch row of every input (the shape excludes the batch dim); a
request of ``--batch-size B`` stacks B consecutive entries, as perf_analyzer does. A
dynamic dim comes from the entry's ``"shape"``, else from ``--shape``, else (when it is the
only one) from the number of values. BYTES inputs take strings; their ``b64`` form holds
each element as a 4-byte little-endian length and its bytes (whitespace and line breaks inside
the base64 are ignored). An input the config marks ``optional: true`` may be left out of an
entry: the request is sent without it. perf_analyzer's sequence form, a list of lists of
entries (one list per stream), is read as its entries in order; for a sequence model each
stream is then one sequence (:func:`json_stream_lengths`).
``"validation_data"`` holds the expected outputs, entry by entry
(:mod:`tritongen.client.validation_data`): a load test checks every response against them.

An ``.npz`` holds full request arrays (batch dim first), one step, or the steps
:func:`tritongen.io.arrays.write_steps` wrote; string arrays (numpy ``U`` or ``S``) feed
BYTES inputs. ``--input-value NAME=VALUE`` fixes one input in every step: a string for a
BYTES input (e.g. the model a BLS model should call), else a number broadcast to its shape.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from tritongen.client.inputs import (
    DEFAULT_STRING_LENGTH,
    InputSpec,
    ModelInterface,
    build_inputs,
    check_batch_size,
    check_input_names,
    expected_array,
    numpy_dtype,
    request_shape,
)
from tritongen.errors import ConfigError, SourceError
from tritongen.io.arrays import (
    Array,
    ArrayDtypeError,
    ArrayShapeError,
    read_steps,
    request_arrays,
)
from tritongen.io.loadgen_shared import is_string_array

Step = dict[str, Array]
"""One prepared request: an array per model input."""
Fill = Literal["random", "zeros"]


class InputDataError(SourceError):
    """A JSON input-data file that cannot be read, or whose data does not fit the model."""


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


# -- --input-value --------------------------------------------------------------------------


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
    if number is None or (dtype.kind in "iu" and not _fits_integer(dtype, [int(number)])):
        wanted = {"b": "true or false", "f": "a number"}.get(dtype.kind, f"an integer that fits {dtype}")
        raise ConfigError(
            f"--input-value {spec.name}={text!r}: input '{spec.name}' is {spec.datatype}, "
            f"which takes {wanted}",
            f"give {wanted}, e.g. --input-value {spec.name}={'true' if dtype.kind == 'b' else 1}",
        )
    return np.full(shape, number, dtype=dtype)


def _fits_integer(dtype: np.dtype[Any], values: Sequence[int]) -> bool:
    info = np.iinfo(dtype)
    return all(info.min <= v <= info.max for v in values)


# -- .npz -----------------------------------------------------------------------------------


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
    return _bytes_array([_as_bytes(item) for item in array.reshape(-1).tolist()]).reshape(array.shape)


def _as_bytes(item: Any) -> bytes:
    return item if isinstance(item, bytes) else str(item).encode()


def _bytes_array(items: list[bytes]) -> Array:
    out = np.empty(len(items), dtype=np.object_)
    out[:] = items
    return out


# -- perf_analyzer's JSON ---------------------------------------------------------------------


def json_steps(
    path: Path,
    interface: ModelInterface,
    batch_size: int = 1,
    shapes: Mapping[str, tuple[int, ...]] | None = None,
    fixed: Collection[str] = (),
) -> list[Step]:
    """The requests of a JSON input-data file: one per entry, each stacking ``batch_size`` entries from it.

    Raises:
        InputDataError: the file is missing or malformed, or its data does not fit the model.
    """
    streams = json_streams(path, interface, shapes, fixed)
    entries = [(where, entry) for stream in streams for where, entry in stream]
    if not interface.batched:
        return [entry for _, entry in entries]
    steps = []
    for start in range(len(entries)):
        rows = [entries[(start + k) % len(entries)] for k in range(batch_size)]
        given = {frozenset(entry) for _, entry in rows}
        if len(given) > 1:
            raise InputDataError(
                f"input data {path}: {rows[0][0]} to {rows[-1][0]} make one request of "
                f"--batch-size {batch_size}, but leave out different optional inputs",
                "give entries that are batched together the same inputs, or use --batch-size 1",
            )
        step: Step = {}
        for name in rows[0][1]:
            shapes_seen = {entry[name].shape for _, entry in rows}
            if len(shapes_seen) > 1:
                raise InputDataError(
                    f"input data {path}: {rows[0][0]} to {rows[-1][0]} make one request of "
                    f"--batch-size {batch_size}, "
                    f"but give input '{name}' different shapes "
                    f"({', '.join(str(list(s)) for s in sorted(shapes_seen))})",
                    "give entries that are batched together the same shape, or use --batch-size 1",
                )
            step[name] = np.stack([entry[name] for _, entry in rows])
        steps.append(step)
    return steps


def json_streams(
    path: Path,
    interface: ModelInterface,
    shapes: Mapping[str, tuple[int, ...]] | None = None,
    fixed: Collection[str] = (),
) -> list[list[tuple[str, Step]]]:
    """The entries of a JSON input-data file, by stream: where each is (``data[2]``) and its arrays.

    An entry's arrays hold one batch row (no batch dim) for a batching model, the whole
    tensor otherwise. A file of plain entries is one stream.

    Raises:
        InputDataError: the file is missing or malformed, or its data does not fit the model.
    """
    data = _read_json_data(path)
    nested = [isinstance(item, list) for item in data]
    if any(nested) and not all(nested):
        raise InputDataError(
            f'input data {path}: "data" mixes entries and lists of entries',
            "give a list of entries, or a list of streams (lists of entries)",
        )
    streams = data if all(nested) else [data]
    reader = EntryReader(path, interface, dict(shapes or {}), frozenset(fixed))
    out: list[list[tuple[str, Step]]] = []
    for s, stream in enumerate(streams):
        if not stream:
            raise InputDataError(
                f"input data {path}: data[{s}] is an empty stream", "give each stream one entry or more"
            )
        prefix = f"data[{s}]" if all(nested) else "data"
        out.append(
            [(f"{prefix}[{i}]", reader.entry(f"{prefix}[{i}]", item)) for i, item in enumerate(stream)]
        )
    return out


def json_stream_lengths(source: Fill | Path) -> list[int] | None:
    """The number of entries of each stream of a nested JSON data file, or ``None`` for other data.

    perf_analyzer's sequence form (a list of lists of entries) makes streams; a plain list of
    entries, an ``.npz``, random and zero data do not.

    Raises:
        InputDataError: the file is missing or malformed.
    """
    if not isinstance(source, Path) or source.suffix.lower() != ".json":
        return None
    data = _read_json_data(source)
    if not all(isinstance(item, list) for item in data):
        return None
    return [len(stream) for stream in data]


def _read_json_data(path: Path) -> list[Any]:
    data = read_json_document(path).get("data")
    if not isinstance(data, list) or not data:
        raise InputDataError(
            f'input data {path} has no "data" list of entries',
            'write {"data": [{"INPUT": [...]}, ...]} (perf_analyzer\'s input-data format)',
        )
    return data


def read_json_document(path: Path) -> dict[str, Any]:
    """The JSON object of an input-data file (empty when the JSON is not an object).

    Raises:
        InputDataError: the file is missing, not UTF-8, or not JSON.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as e:
        raise InputDataError(
            f"input data {path} does not exist", "check the path given to --input-data"
        ) from e
    except (OSError, UnicodeDecodeError) as e:
        raise InputDataError(f"cannot read input data {path}: {e}", "give a UTF-8 JSON file") from e
    try:
        document = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputDataError(
            f"input data {path} is not valid JSON: {e.msg} at line {e.lineno} column {e.colno}",
            "fix the JSON (perf_analyzer's input-data format)",
        ) from e
    return document if isinstance(document, dict) else {}


@dataclass(frozen=True)
class EntryReader:
    """Reads the entries of one JSON file against one model."""

    path: Path
    interface: ModelInterface
    shapes: dict[str, tuple[int, ...]]
    fixed: frozenset[str]

    def fail(self, where: str, message: str, hint: str) -> InputDataError:
        """An error about the entry at ``where``."""
        return InputDataError(f"input data {self.path}: {where} {message}", hint)

    def entry(self, where: str, item: Any) -> Step:
        """One entry's arrays, in the model's input order (inputs fixed by ``--input-value`` skipped)."""
        if not isinstance(item, dict):
            raise self.fail(where, "is not an object of inputs", 'write e.g. {"INPUT0": [1, 2, 3]}')
        specs = {spec.name: spec for spec in self.interface.inputs}
        unknown = [name for name in item if name not in specs]
        if unknown:
            raise self.fail(
                where,
                f"gives input '{unknown[0]}', which model '{self.interface.name}' does not have",
                f"inputs are: {', '.join(specs)}",
            )
        missing = [
            name
            for name, spec in specs.items()
            if name not in item and name not in self.fixed and not spec.optional
        ]
        if missing:
            raise self.fail(
                where,
                f"has no data for required input(s) {', '.join(missing)}",
                "give every input in every entry (only inputs the config marks optional: true may be "
                "left out), or fix one with --input-value NAME=VALUE",
            )
        return {
            name: self.tensor(f"{where} input '{name}'", spec, item[name])
            for name, spec in specs.items()
            if name not in self.fixed and name in item
        }

    def tensor(self, where: str, spec: InputSpec, value: Any) -> Array:
        """One input of one entry: flat values, ``{"content", "shape"}`` or ``{"b64"}``, shaped."""
        given: Any = None
        content: Any = value
        if isinstance(value, dict):
            keys = set(value)
            if keys == {"b64"}:
                content = value
            elif "content" in keys and keys <= {"content", "shape"}:
                content, given = value["content"], value.get("shape")
            else:
                raise self.fail(
                    where,
                    f"has keys {sorted(keys)}",
                    'give a list of values, {"content": [...], "shape": [...]} or {"b64": "..."}',
                )
        if isinstance(content, dict) and set(content) == {"b64"}:
            flat = self.b64(where, spec, content["b64"])
        elif isinstance(content, list):
            flat = (
                self.strings(where, content)
                if spec.datatype == "BYTES"
                else self.numbers(where, spec, content)
            )
        else:
            raise self.fail(where, "is neither a list of values nor base64", 'give a list or {"b64": "..."}')
        dims = self.dims(where, spec, given, flat.size)
        if math.prod(dims) != flat.size:
            raise self.fail(
                where,
                f"has {flat.size} values, but its shape {dims} holds {math.prod(dims)} "
                f"(the model's dims are {list(spec.dims)}{self.batch_note()})",
                f'give {math.prod(dims)} values in row-major order, or a "shape" that fits them',
            )
        return flat.reshape(dims)

    def batch_note(self) -> str:
        """How messages say that shapes exclude the batch dim."""
        return ", batch dim excluded" if self.interface.batched else ""

    def dims(self, where: str, spec: InputSpec, given: Any, count: int) -> list[int]:
        """The entry's shape: its ``"shape"``, else ``--shape``, else the model's dims (one -1 inferred)."""
        declared = list(spec.dims)
        if given is not None:
            shape_ok = isinstance(given, list) and all(isinstance(d, int) and d >= 0 for d in given)
            if (
                not shape_ok
                or len(given) != len(declared)
                or any(d not in (-1, g) for d, g in zip(declared, given, strict=False))
            ):
                raise self.fail(
                    where,
                    f"has shape {given}, but the model's dims are {declared}{self.batch_note()}",
                    "give one size per dim, keeping the dims the model fixes",
                )
            return list(given)
        override = self.shapes.get(spec.name)
        if override is not None:
            return request_shape(spec, 1, False, override)
        dynamic = [i for i, d in enumerate(declared) if d == -1]
        if not dynamic:
            return declared
        known = math.prod(d for d in declared if d != -1)
        if len(dynamic) > 1 or known == 0 or count % known:
            raise self.fail(
                where,
                f"needs a shape: the model's dims are {declared}{self.batch_note()}",
                f'give "shape" beside "content", or --shape {spec.name}=DIMS',
            )
        declared[dynamic[0]] = count // known
        return declared

    def strings(self, where: str, content: list[Any]) -> Array:
        """A BYTES input's values: strings, as UTF-8 ``bytes``."""
        flat = _flatten(content)
        if not all(isinstance(item, str) for item in flat):
            raise self.fail(
                where,
                "is BYTES and takes strings, but holds other values",
                'give strings, e.g. ["a sentence"]',
            )
        return _bytes_array([item.encode() for item in flat])

    def numbers(self, where: str, spec: InputSpec, content: list[Any]) -> Array:
        """A numeric input's values as its dtype, refused when they do not fit it."""
        dtype = np.dtype(numpy_dtype(spec.datatype))
        flat = _flatten(content)
        if any(isinstance(item, str) for item in flat):
            raise self.fail(
                where,
                f"holds strings, but the input is {spec.datatype}",
                f"give numbers for '{spec.name}' (strings only go to BYTES inputs)",
            )
        bools = all(isinstance(item, bool) for item in flat)
        numeric = all(isinstance(item, (int, float)) and not isinstance(item, bool) for item in flat)
        if dtype.kind == "b":
            ok = bools or (numeric and all(item in (0, 1) for item in flat))
        elif dtype.kind in "iu":
            ok = numeric and all(float(item).is_integer() for item in flat)
            ok = ok and _fits_integer(dtype, [int(item) for item in flat])
        else:
            ok = numeric
        if not ok:
            wanted = {"b": "true/false", "f": "numbers"}.get(dtype.kind, f"integers that fit {dtype}")
            raise self.fail(
                where, f"holds values that are not {wanted}", f"give {wanted} for {spec.datatype}"
            )
        return np.array(flat, dtype=dtype)

    def b64(self, where: str, spec: InputSpec, text: Any) -> Array:
        """Base64 contents: raw little-endian values, or length-prefixed elements for BYTES.

        Whitespace and line breaks inside the string are ignored, as perf_analyzer ignores them
        (encoders commonly break base64 every 76 characters).
        """
        try:
            raw = base64.b64decode("".join(text.split()) if isinstance(text, str) else text, validate=True)
        except (binascii.Error, ValueError, TypeError) as e:
            raise self.fail(
                where, f"has malformed base64 ({e})", "encode the raw tensor bytes with base64"
            ) from e
        if spec.datatype == "BYTES":
            items = _split_bytes(raw)
            if items is None:
                raise self.fail(
                    where,
                    "has base64 BYTES that are not 4-byte length-prefixed elements",
                    "encode each element as its length (uint32, little-endian) followed by its bytes",
                )
            return _bytes_array(items)
        dtype = np.dtype(numpy_dtype(spec.datatype))
        if len(raw) % dtype.itemsize:
            raise self.fail(
                where,
                f"has {len(raw)} bytes of base64, not a whole number of {spec.datatype} values",
                f"encode {dtype.itemsize}-byte little-endian values",
            )
        return np.frombuffer(raw, dtype=dtype.newbyteorder("<")).astype(dtype)


def _flatten(content: list[Any]) -> list[Any]:
    """Nested lists in row-major order."""
    flat: list[Any] = []
    for item in content:
        if isinstance(item, list):
            flat.extend(_flatten(item))
        else:
            flat.append(item)
    return flat


def _split_bytes(raw: bytes) -> list[bytes] | None:
    """Elements of Triton's BYTES serialisation (uint32 little-endian length, then the bytes)."""
    items, at = [], 0
    while at < len(raw):
        if at + 4 > len(raw):
            return None
        size = int.from_bytes(raw[at : at + 4], "little")
        if at + 4 + size > len(raw):
            return None
        items.append(raw[at + 4 : at + 4 + size])
        at += 4 + size
    return items
