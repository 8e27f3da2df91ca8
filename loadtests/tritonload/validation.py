"""Responses checked against the expected outputs of their step (perf_analyzer's ``validation_data``).

A steps file may give a step expected outputs (``expected:NAME``, flat per row) and the data
entry of each row (see :mod:`.shared`). Each response to such a step is compared, output by
output: integers, booleans and strings exactly, floats within the file's ``[atol, rtol]``. A
response that differs is the error kind ``validation``; each differing output counts
``mismatched/NAME`` and the window keeps its first mismatch (entry, element, expected and
received value). A response that matches counts ``validation_matched``.

Most responses of a deterministic model are the bytes of the last one that matched, so each
step remembers those bytes (the HTTP body, the gRPC raw outputs) and compares the rest with a
byte comparison; only a response that differs from them is decoded.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from .options import TritonOptions
from .payloads import read_steps
from .request_data import NUMPY_DTYPES, Array, decode_tolerance, read_npz, split_step
from .shared import MATCHED_COUNT, VALIDATION_ERROR, Mismatch

if TYPE_CHECKING:  # the comparison itself needs neither Locust nor gevent
    from .recording import Recorder

VALUE_CHARS = 60
"""Expected and received values are shown up to this many characters."""


@dataclass
class Received:
    """One output of a response: its wire type, shape and raw contents."""

    datatype: str
    shape: list[int]
    raw: bytes | None = None
    values: list[Any] | None = None
    """The output's values when the response carried them as JSON (not binary)."""


@dataclass
class StepCheck:
    """What the responses to one step must hold."""

    expected: dict[str, Array]
    entries: list[int]
    known: dict[str, bytes] = field(default_factory=dict)
    """Each output's raw bytes in the last response that matched."""
    known_body: bytes = b""
    """The last HTTP response body (and head) that matched."""


def step_checks(steps: Sequence[Mapping[str, Array]]) -> list[StepCheck | None] | None:
    """Each step's check (``None`` for a step without expected outputs), or ``None`` when no step has one."""
    checks: list[StepCheck | None] = []
    for step in steps:
        _, expected, entries = split_step(step)
        if not expected:
            checks.append(None)
            continue
        rows = [int(e) for e in entries.reshape(-1).tolist()] if entries is not None else [0]
        checks.append(StepCheck(expected=expected, entries=rows))
    return checks if any(c is not None for c in checks) else None


class Validator:
    """Compares the responses of this process's users with their steps' expected outputs.

    ``check_*`` return the error kind ``validation`` or None, and count into the recorder: a
    match as ``validation_matched`` (in the window where the request is recorded next), a
    mismatch as ``mismatched/NAME`` with its first detail.
    """

    def __init__(self, checks: list[StepCheck | None], tolerance: tuple[float, float], recorder: Recorder):
        self.checks = checks
        self.atol, self.rtol = tolerance
        self.recorder = recorder

    def check_http(self, step: int, response: bytes, when: float | None = None) -> str | None:
        """Check one whole HTTP response (head and body) to ``step`` (``when``: its request's end)."""
        check = self.checks[step]
        if check is None:
            return None
        if response == check.known_body:
            return self._matched()
        outputs = http_outputs(response)
        error = self._compare(check, outputs, when)
        if error is None:
            check.known_body = response
        return error

    def check_grpc(self, step: int, response: Any) -> str | None:
        """Check one ``ModelInferResponse`` to ``step``."""
        check = self.checks[step]
        if check is None:
            return None
        raws = response.raw_output_contents
        if len(check.known) == len(check.expected) and len(raws) == len(response.outputs):
            got = {tensor.name: raw for tensor, raw in zip(response.outputs, raws, strict=True)}
            if all(got.get(name) == raw for name, raw in check.known.items()):
                return self._matched()
        return self._compare(check, grpc_outputs(response))

    def _matched(self) -> str | None:
        """Count a response whose outputs all matched (no error)."""
        self.recorder.defer_count(MATCHED_COUNT, 1)
        return None

    def _compare(
        self, check: StepCheck, outputs: Mapping[str, Received], when: float | None = None
    ) -> str | None:
        failed = False
        for name, expected in check.expected.items():
            got = outputs.get(name)
            detail = (
                _missing(check, name)
                if got is None
                else first_difference(expected, got, check.entries, self.atol, self.rtol)
            )
            if detail is None:
                if got is not None and got.raw is not None:
                    check.known[name] = got.raw
                continue
            failed = True
            self.recorder.mismatch(name, detail, when)
        return VALIDATION_ERROR if failed else self._matched()


def _missing(check: StepCheck, name: str) -> Mismatch:
    return Mismatch(
        entry=check.entries[0], element=-1, expected=f"output {name!r}", received="no such output",
        at=time.time(),
    )  # fmt: skip


def make_validator(options: TritonOptions, recorder: Recorder | None) -> Validator | None:
    """The validator of ``--triton-inputs`` when its steps carry expected outputs, else None.

    Raises:
        NpzReadError: the file is unreadable.
        ValueError: its tolerance is malformed.
    """
    if not options.inputs or recorder is None:
        return None
    label = f"--triton-inputs {options.inputs}"
    checks = step_checks(read_steps(options.inputs, label))
    if checks is None:
        return None
    return Validator(checks, decode_tolerance(read_npz(options.inputs, label)), recorder)


def decoded(got: Received, dtype: np.dtype[Any]) -> Array:
    """A received output's values, flat: numbers as ``dtype``, BYTES as an object array of ``bytes``."""
    if got.values is not None:
        if dtype.kind == "O":
            items = [v.encode() if isinstance(v, str) else bytes(v) for v in got.values]
            out = np.empty(len(items), dtype=np.object_)
            out[:] = items
            return out
        return np.asarray(got.values, dtype=dtype).reshape(-1)
    raw = got.raw or b""
    if dtype.kind != "O":
        wire = NUMPY_DTYPES.get(got.datatype)
        return np.frombuffer(raw, dtype=np.dtype(wire) if wire is not None else dtype)
    items, at = [], 0
    while at + 4 <= len(raw):
        size = int.from_bytes(raw[at : at + 4], "little")
        items.append(raw[at + 4 : at + 4 + size])
        at += 4 + size
    out = np.empty(len(items), dtype=np.object_)
    out[:] = items
    return out


def first_difference(
    expected: Array, got: Received, entries: Sequence[int], atol: float, rtol: float
) -> Mismatch | None:
    """The first element where ``got`` differs from ``expected`` (flat per row), or None when they agree.

    Floats agree within ``atol + rtol * |expected|`` (NaN agrees with NaN); other types exactly.
    """
    values = decoded(got, expected.dtype)
    rows = expected.shape[0] if expected.ndim == 2 else 1
    if values.size != expected.size:
        return Mismatch(
            entry=entries[0], element=-1, expected=f"{expected.size} elements",
            received=f"{values.size} elements (shape {got.shape})", at=time.time(),
        )  # fmt: skip
    flat = expected.reshape(-1)
    if expected.dtype.kind == "f":
        differ = ~np.isclose(values.astype(np.float64), flat, atol=atol, rtol=rtol, equal_nan=True)
    else:
        differ = values.astype(flat.dtype) != flat if flat.dtype.kind != "O" else _bytes_differ(values, flat)
    where = np.flatnonzero(differ)
    if not where.size:
        return None
    index = int(where[0])
    per_row = max(1, flat.size // rows)
    return Mismatch(
        entry=entries[min(index // per_row, len(entries) - 1)],
        element=index % per_row,
        expected=_shown(flat[index]),
        received=_shown(values[index]),
        at=time.time(),
    )


def _bytes_differ(values: Array, flat: Array) -> Array:
    return np.array([a != b for a, b in zip(values.tolist(), flat.tolist(), strict=True)], dtype=bool)


def _shown(value: Any) -> str:
    """An element as messages show it: numbers in full precision, strings as Python literals."""
    if isinstance(value, (bytes, np.bytes_)):
        text = bytes(value).decode("utf-8", "backslashreplace")
        shown = json.dumps(text, ensure_ascii=False)
    elif isinstance(value, (float, np.floating)):
        shown = f"{float(value):.9g}"
    else:
        shown = str(value.item() if isinstance(value, np.generic) else value)
    return shown if len(shown) <= VALUE_CHARS else shown[: VALUE_CHARS - 1] + "…"


def http_outputs(response: bytes) -> dict[str, Received]:
    """The outputs of one whole HTTP inference response (binary tensor extension, or JSON ``data``)."""
    head_end = response.find(b"\r\n\r\n")
    head, body = response[:head_end], response[head_end + 4 :]
    length = len(body)
    for line in head.split(b"\r\n")[1:]:
        key, _, value = line.partition(b":")
        if key.strip().lower() == b"inference-header-content-length":
            length = int(value)
    try:
        header = json.loads(body[:length])
    except ValueError:
        return {}
    outputs, at = {}, length
    for tensor in header.get("outputs", []):
        got = Received(str(tensor.get("datatype", "")), [int(d) for d in tensor.get("shape", [])])
        size = (tensor.get("parameters") or {}).get("binary_data_size")
        if size is not None:
            got.raw = bytes(body[at : at + int(size)])
            at += int(size)
        else:
            got.values = _flatten(tensor.get("data", []))
        outputs[str(tensor.get("name", ""))] = got
    return outputs


def grpc_outputs(response: Any) -> dict[str, Received]:
    """The outputs of one ``ModelInferResponse`` (raw contents)."""
    raws = list(response.raw_output_contents)
    outputs = {}
    for index, tensor in enumerate(response.outputs):
        raw = raws[index] if index < len(raws) else b""
        outputs[tensor.name] = Received(tensor.datatype, [int(d) for d in tensor.shape], raw=bytes(raw))
    return outputs


def _flatten(values: Any) -> list[Any]:
    if not isinstance(values, list):
        return [values]
    flat: list[Any] = []
    for item in values:
        flat.extend(_flatten(item))
    return flat
