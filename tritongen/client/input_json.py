"""perf_analyzer's input-data JSON: one request per entry of its ``"data"`` list, checked against the model.

::

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
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tritongen.client.inputs import InputSpec, ModelInterface, numpy_dtype, request_shape
from tritongen.client.steps import Fill, Step, bytes_array, fits_integer
from tritongen.errors import SourceError
from tritongen.io.arrays import Array


class InputDataError(SourceError):
    """A JSON input-data file that cannot be read, or whose data does not fit the model."""


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
        return bytes_array([item.encode() for item in flat])

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
            ok = ok and fits_integer(dtype, [int(item) for item in flat])
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

        Whitespace and line breaks inside the string are ignored and missing ``=`` padding is
        supplied, as perf_analyzer's decoder takes them (encoders commonly break base64 every 76
        characters, and some leave the padding out).
        """
        try:
            raw = base64.b64decode(_padded(text) if isinstance(text, str) else text, validate=True)
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
            return bytes_array(items)
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


def _padded(text: str) -> str:
    """Base64 text without its whitespace, ``=`` padding added where it was left out."""
    joined = "".join(text.split())
    return joined + "=" * (-len(joined) % 4)
