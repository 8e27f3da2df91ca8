"""Expected outputs of a data file, checked against the model and laid out per request step.

perf_analyzer's input-data JSON may hold ``"validation_data"`` beside ``"data"``: a list of
the same shape (as many entries, or the same streams of entries), each entry naming some or
all of the model's outputs with the values the response must hold, written as ``data``
writes inputs (a list of values, ``{"content", "shape"}`` or ``{"b64"}``)::

    {"data":            [{"INPUT0": [1, 2]}, {"INPUT0": [3, 4]}],
     "validation_data": [{"OUTPUT0": [2, 4]}, {"OUTPUT0": [6, 8]}]}

An ``.npz`` carries them as arrays named ``expected:OUTPUT`` beside the inputs: in a plain
archive the whole output of its one request (batch dim first), in a steps file each step's.

Each step then holds ``expected:OUTPUT`` (flat per row) and ``entries:`` (the entry of each
row), which the load generator compares every response with (``tritonload/validation.py``).
Floats agree within ``atol + rtol * |expected|``; integers, booleans and strings exactly.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tritongen.client.input_json import EntryReader, InputDataError, read_json_document
from tritongen.client.inputs import InputSpec, ModelInterface, numpy_dtype
from tritongen.client.steps import Fill, Step
from tritongen.io.arrays import Array, read_steps
from tritongen.io.loadgen_shared import ENTRIES_KEY, EXPECTED_PREFIX, is_string_array

DEFAULT_ATOL = 1e-6
DEFAULT_RTOL = 1e-5
"""Float outputs agree with their expected values within ``atol + rtol * |expected|``."""


@dataclass(frozen=True)
class ExpectedOutputs:
    """A data file's expected outputs, per request step, and where each entry is in the file."""

    steps: list[Step]
    """Per step: ``expected:OUTPUT`` arrays and ``entries:`` (empty for a step with nothing to check)."""
    labels: list[str]
    """Entry number → where it is in the file (``data[3]``, ``data[1][2]``, ``step 4 row 0``)."""
    outputs: tuple[str, ...]
    """The outputs checked in some step."""


def expected_outputs(
    source: Fill | Path, interface: ModelInterface, batch_size: int = 1
) -> ExpectedOutputs | None:
    """The expected outputs of a data file laid out as its request steps, or ``None`` when it has none.

    Raises:
        InputDataError: validation data that does not fit the data (counts, streams) or the
            model (an unknown output, values of another type, an element count its shape cannot hold).
    """
    if not isinstance(source, Path):
        return None
    if source.suffix.lower() == ".json":
        return _json_expected(source, interface, batch_size)
    return _npz_expected(source, interface)


# -- JSON -------------------------------------------------------------------------------------


def _json_expected(path: Path, interface: ModelInterface, batch_size: int) -> ExpectedOutputs | None:
    document = read_json_document(path)
    if "validation_data" not in document:
        return None
    data, given = document.get("data"), document["validation_data"]
    entries = _aligned(path, data if isinstance(data, list) else [], given)
    reader = _OutputReader(EntryReader(path, interface, {}, frozenset()), interface)
    rows = [reader.entry(where, item) for where, item in entries]
    labels = [where.replace("validation_data", "data", 1) for where, _ in entries]
    if not interface.batched:
        steps = [_step(path, [i], rows, labels) for i in range(len(rows))]
    else:
        steps = [
            _step(path, [(start + k) % len(rows) for k in range(batch_size)], rows, labels, stacked=True)
            for start in range(len(rows))
        ]
    return _finished(steps, labels)


def _aligned(path: Path, data: list[Any], given: Any) -> list[tuple[str, Any]]:
    """The validation entries in order, with where each is; refused unless they align with ``data``."""
    if not isinstance(given, list):
        raise InputDataError(
            f'input data {path}: "validation_data" is not a list of entries',
            'give a list like "data": one entry of expected outputs per entry of inputs',
        )
    nested = bool(data) and all(isinstance(item, list) for item in data)
    if nested != (bool(given) and all(isinstance(item, list) for item in given)):
        kind = "streams (lists of entries)" if nested else "a plain list of entries"
        raise InputDataError(
            f'input data {path}: "data" is {kind}, but "validation_data" is not',
            'give "validation_data" the same layout as "data"',
        )
    if not nested:
        if len(given) != len(data):
            raise InputDataError(
                f'input data {path}: "validation_data" has {len(given)} entries, "data" {len(data)}',
                "give one entry of expected outputs per entry of inputs, in the same order",
            )
        return [(f"validation_data[{i}]", item) for i, item in enumerate(given)]
    if [len(s) for s in given] != [len(s) for s in data]:
        raise InputDataError(
            f'input data {path}: the streams of "validation_data" have {[len(s) for s in given]} '
            f'entries, those of "data" {[len(s) for s in data]}',
            "give each stream one entry of expected outputs per step, in the same order",
        )
    return [
        (f"validation_data[{s}][{i}]", item)
        for s, stream in enumerate(given)
        for i, item in enumerate(stream)
    ]


def _step(
    path: Path, members: Sequence[int], rows: list[dict[str, Array]], labels: list[str], stacked: bool = False
) -> Step:
    """The check of one step made of entries ``members`` (stacked rows for a batching model)."""
    named = {frozenset(rows[i]) for i in members}
    if len(named) > 1:
        raise InputDataError(
            f"input data {path}: {labels[members[0]]} to {labels[members[-1]]} make one request, but "
            "their validation entries name different outputs",
            "name the same outputs in entries batched together, or use --batch-size 1",
        )
    first = rows[members[0]]
    if not first:
        return {}
    step: Step = {}
    for name in first:
        sizes = {rows[i][name].size for i in members}
        if len(sizes) > 1:
            raise InputDataError(
                f"input data {path}: {labels[members[0]]} to {labels[members[-1]]} make one request, but "
                f"expect output '{name}' with different element counts "
                f"({', '.join(map(str, sorted(sizes)))})",
                "give entries batched together outputs of one shape, or use --batch-size 1",
            )
        values = [rows[i][name].reshape(-1) for i in members]
        step[EXPECTED_PREFIX + name] = np.stack(values) if stacked else values[0]
    step[ENTRIES_KEY] = np.array(list(members), dtype=np.int64)
    return step


def _finished(steps: list[Step], labels: list[str]) -> ExpectedOutputs | None:
    names = sorted(
        {k[len(EXPECTED_PREFIX) :] for step in steps for k in step if k.startswith(EXPECTED_PREFIX)}
    )
    if not names:
        return None
    return ExpectedOutputs(steps=steps, labels=labels, outputs=tuple(names))


@dataclass(frozen=True)
class _OutputReader:
    """Reads validation entries against the model's outputs, with the input reader's value parsing."""

    reader: EntryReader
    interface: ModelInterface

    def entry(self, where: str, item: Any) -> dict[str, Array]:
        """One validation entry: each named output's expected values, flat."""
        if not isinstance(item, dict):
            raise self.reader.fail(where, "is not an object of outputs", 'write e.g. {"OUTPUT0": [1, 2, 3]}')
        specs = {spec.name: spec for spec in self.interface.output_specs}
        unknown = [name for name in item if name not in specs]
        if unknown:
            raise self.reader.fail(
                where,
                f"gives output '{unknown[0]}', which model '{self.interface.name}' does not have",
                f"outputs are: {', '.join(specs) or 'none'}",
            )
        return {
            name: self.values(f"{where} output '{name}'", specs[name], value) for name, value in item.items()
        }

    def values(self, where: str, spec: InputSpec, value: Any) -> Array:
        """One output's expected values, flat, their count checked against its dims."""
        reader, content, shape = self.reader, value, None
        if isinstance(value, dict) and "content" in value and set(value) <= {"content", "shape"}:
            content, shape = value["content"], value.get("shape")
        if isinstance(content, dict) and set(content) == {"b64"}:
            flat = reader.b64(where, spec, content["b64"])
        elif isinstance(content, list):
            flat = (
                reader.strings(where, content)
                if spec.datatype == "BYTES"
                else reader.numbers(where, spec, content)
            )
        else:
            raise reader.fail(
                where,
                "is neither a list of values nor base64",
                'give a list, {"content": [...]} or {"b64": "..."}',
            )
        if shape is not None and (not isinstance(shape, list) or math.prod(shape) != flat.size):
            raise reader.fail(
                where, f"has {flat.size} values, not the {shape} its shape holds", "fix its shape"
            )
        _check_count(reader, where, spec, flat.size, self.interface.batched)
        return flat


def _check_count(reader: EntryReader, where: str, spec: InputSpec, count: int, batched: bool) -> None:
    """Refuse an element count the output's dims cannot hold (one batch row for a batching model)."""
    known = math.prod(d for d in spec.dims if d >= 0)
    dynamic = any(d < 0 for d in spec.dims)
    fits = count % known == 0 if dynamic and known else count == known
    if not fits:
        row = ", batch dim excluded" if batched else ""
        holds = f"a multiple of {known}" if dynamic else str(known)
        raise reader.fail(
            where,
            f"has {count} values, but output '{spec.name}' has dims {list(spec.dims)}{row}: it holds {holds}",
            "give the output's values for one entry, row-major",
        )


# -- .npz -------------------------------------------------------------------------------------


def _npz_expected(path: Path, interface: ModelInterface) -> ExpectedOutputs | None:
    raw_steps = read_steps(path, f"input data {path}", "--input-data")
    specs = {spec.name: spec for spec in interface.output_specs}
    steps: list[Step] = []
    labels: list[str] = []
    for index, arrays in enumerate(raw_steps):
        given = {k[len(EXPECTED_PREFIX) :]: a for k, a in arrays.items() if k.startswith(EXPECTED_PREFIX)}
        where = f"input data {path}" + ("" if len(raw_steps) == 1 else f" step {index}")
        step = _npz_step(where, given, specs, interface, len(labels))
        rows = int(step[ENTRIES_KEY].size) if step else 0
        prefix = "" if len(raw_steps) == 1 else f"step {index} "
        labels += [f"{prefix}row {r}" if interface.batched else f"step {index}" for r in range(rows)]
        steps.append(step)
    return _finished(steps, labels)


def _npz_step(
    where: str,
    given: Mapping[str, Array],
    specs: Mapping[str, InputSpec],
    interface: ModelInterface,
    first: int,
) -> Step:
    """One step's ``expected:OUTPUT`` arrays of an ``.npz``, flat per row, checked against the outputs."""
    if not given:
        return {}
    step: Step = {}
    reader = EntryReader(Path(where), interface, {}, frozenset())
    counts = set()
    for name, array in given.items():
        spec = specs.get(name)
        if spec is None:
            raise InputDataError(
                f"{where} holds '{EXPECTED_PREFIX}{name}', "
                f"but model '{interface.name}' has no output '{name}'",
                f"outputs are: {', '.join(specs) or 'none'}",
            )
        values = _npz_values(where, spec, array)
        rows = int(values.shape[0]) if interface.batched and values.ndim else 1
        flat = values.reshape(rows, -1) if interface.batched else values.reshape(-1)
        _check_count(reader, f"'{EXPECTED_PREFIX}{name}'", spec, flat.size // max(rows, 1), interface.batched)
        counts.add(rows)
        step[EXPECTED_PREFIX + name] = flat
    if len(counts) > 1:
        raise InputDataError(
            f"{where}: its expected outputs have different batch sizes "
            f"({', '.join(map(str, sorted(counts)))} rows)",
            "give every expected output the rows of the request, batch dim first",
        )
    step[ENTRIES_KEY] = np.arange(first, first + counts.pop(), dtype=np.int64)
    return step


def _npz_values(where: str, spec: InputSpec, array: Array) -> Array:
    """An ``.npz`` array as the output's type: strings as ``bytes`` for BYTES, numbers as its dtype."""
    if spec.datatype == "BYTES":
        if not is_string_array(array):
            raise InputDataError(
                f"{where}: '{EXPECTED_PREFIX}{spec.name}' holds {array.dtype}, "
                f"but output '{spec.name}' is BYTES",
                "store a string array for it",
            )
        items = [i if isinstance(i, bytes) else str(i).encode() for i in array.reshape(-1).tolist()]
        out = np.empty(len(items), dtype=np.object_)
        out[:] = items
        return out.reshape(array.shape)
    dtype = np.dtype(numpy_dtype(spec.datatype))
    if is_string_array(array) or (dtype.kind in "iub" and array.dtype.kind == "f"):
        raise InputDataError(
            f"{where}: '{EXPECTED_PREFIX}{spec.name}' holds {array.dtype}, "
            f"but output '{spec.name}' is {spec.datatype}",
            f"store {dtype} values for it",
        )
    return array.astype(dtype)
