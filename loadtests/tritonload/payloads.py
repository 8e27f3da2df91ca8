"""Request payloads and their data: model metadata, random or file data, HTTP bodies, gRPC requests.

Payloads are built once per process: HTTP bodies use Triton's binary tensor extension,
gRPC requests carry raw tensor contents. ``--triton-inputs`` may hold several requests
(steps, see :func:`read_steps`); string arrays (``bytes``/``str`` objects, numpy ``S``/``U``)
go out as BYTES; random BYTES data are strings of ``--triton-string-length``.
"""

from __future__ import annotations

import json
from typing import Any, TypedDict

import numpy as np

from .options import TritonOptions
from .request_data import (
    BF16,
    NUMPY_DTYPES,
    STEP_FAILURES,
    STEPS_KEY,
    Array,
    NpzReadError,
    bf16_from_floats,
    decode_steps,
    decode_streams,
    is_bf16,
    is_string_array,
    item_bytes,
    random_strings,
    read_npz,
    split_step,
)


class TensorMeta(TypedDict):
    """One tensor of the model metadata."""

    name: str
    datatype: str
    shape: list[int]


class ModelMeta(TypedDict):
    """The model metadata this file reads."""

    inputs: list[TensorMeta]
    outputs: list[TensorMeta]


def random_arrays(meta: ModelMeta, max_batch: int, options: TritonOptions) -> dict[str, Array]:
    """One request of random data shaped from the metadata; BYTES elements have ``--triton-string-length``."""
    rng = np.random.default_rng(options.seed)
    arrays = {}
    for tensor in meta["inputs"]:
        dims = [options.dynamic_dim if int(d) == -1 else int(d) for d in tensor["shape"]]
        if max_batch > 0:
            dims[0] = options.batch_size
        dtype = NUMPY_DTYPES.get(tensor["datatype"])
        if tensor["datatype"] == BF16:
            arrays[tensor["name"]] = bf16_from_floats(rng.standard_normal(dims))
        elif dtype is None:
            arrays[tensor["name"]] = random_strings(dims, options.string_length, rng)
        elif np.issubdtype(dtype, np.floating):
            arrays[tensor["name"]] = rng.standard_normal(dims).astype(dtype)
        else:
            arrays[tensor["name"]] = rng.integers(0, 2, size=dims).astype(dtype)
    return arrays


def read_steps(path: str, label: str) -> list[dict[str, Array]]:
    """The request steps of an ``.npz``: those tritongen wrote (``STEPS_KEY``), or its arrays as one step.

    In a steps file a numeric array of step ``i`` is ``i/NAME``; a string array is
    ``n<i>/NAME`` (each element's byte length, in the tensor's shape) and ``b<i>/NAME``
    (the elements' bytes, concatenated), read back as an object array of ``bytes``.

    Raises:
        NpzReadError: The file does not exist, or is not a readable archive of arrays or of steps.
    """
    arrays = read_npz(path, label)
    if STEPS_KEY not in arrays:
        return [arrays]
    try:
        return decode_steps(arrays)
    except STEP_FAILURES as e:
        raise NpzReadError("unreadable", f"cannot read {label} as request steps: {e}") from e


def read_streams(path: str, label: str) -> list[int] | None:
    """The stream lengths of a steps file (a sequence model's streams), or ``None`` when it has none.

    Raises:
        NpzReadError: The file is unreadable, or its streams do not split its steps.
    """
    arrays = read_npz(path, label)
    if STEPS_KEY not in arrays:
        return None
    try:
        return decode_streams(arrays)
    except STEP_FAILURES as e:
        raise NpzReadError("unreadable", f"cannot read {label} as request steps: {e}") from e


def build_steps(meta: ModelMeta, max_batch: int, options: TritonOptions) -> list[dict[str, Array]]:
    """The requests to send round-robin: the steps of ``--triton-inputs``, else one of random data.

    Only the inputs: a step's expected outputs are read by :func:`.validation.make_validator`.
    """
    if options.inputs:
        steps = read_steps(options.inputs, f"--triton-inputs {options.inputs}")
        return [split_step(step)[0] for step in steps]
    return [random_arrays(meta, max_batch, options)]


def build_arrays(meta: ModelMeta, max_batch: int, options: TritonOptions) -> dict[str, Array]:
    """One request's arrays: the first of :func:`build_steps`."""
    return build_steps(meta, max_batch, options)[0]


def wire_datatype(array: Array) -> str:
    """The Triton wire type of ``array``; strings (``bytes``/``str`` objects, numpy ``S``/``U``) are BYTES.

    Raises:
        ValueError: numpy data of a type Triton has no wire type for.
    """
    if is_string_array(array):
        return "BYTES"
    if is_bf16(array):
        return BF16
    for name, dtype in NUMPY_DTYPES.items():
        if np.dtype(dtype) == array.dtype:
            return name
    raise ValueError(f"arrays of {array.dtype} have no Triton wire type")


def raw_bytes(array: Array) -> bytes:
    """The tensor contents as Triton takes them (BYTES: each item length-prefixed, ``str`` as UTF-8)."""
    if not is_string_array(array):
        return np.ascontiguousarray(array).tobytes()
    chunks = []
    for item in array.reshape(-1).tolist():
        data = item_bytes(item)
        chunks.append(len(data).to_bytes(4, "little") + data)
    return b"".join(chunks)


def http_body(
    arrays: dict[str, Array], outputs: list[str], request_id: str | None = None
) -> tuple[bytes, dict[str, str]]:
    """A request in Triton's binary tensor extension: JSON header (its id first), then raw tensor bytes."""
    raws = {name: raw_bytes(array) for name, array in arrays.items()}
    header: dict[str, Any] = {"id": request_id} if request_id is not None else {}
    header |= {
        "inputs": [
            {
                "name": name,
                "shape": list(array.shape),
                "datatype": wire_datatype(array),
                "parameters": {"binary_data_size": len(raws[name])},
            }
            for name, array in arrays.items()
        ],
        "outputs": [{"name": name, "parameters": {"binary_data": True}} for name in outputs],
    }
    head = json.dumps(header, separators=(",", ":")).encode()
    body = head + b"".join(raws.values())
    headers = {
        "Content-Type": "application/octet-stream",
        "Inference-Header-Content-Length": str(len(head)),
        "Connection": "keep-alive",
    }
    return body, headers


def http_request(
    model: str,
    host: str,
    port: int,
    arrays: dict[str, Array],
    outputs: list[str],
    request_id: str | None = None,
) -> bytes:
    """The whole HTTP/1.1 inference request, head and body (with ``request_id`` where given)."""
    body, headers = http_body(arrays, outputs, request_id)
    head = f"POST /v2/models/{model}/infer HTTP/1.1\r\nHost: {host}:{port}\r\n"
    head += "".join(f"{key}: {value}\r\n" for key, value in headers.items())
    head += f"Content-Length: {len(body)}\r\n\r\n"
    return head.encode() + body


def grpc_request(model: str, arrays: dict[str, Array], outputs: list[str], version: str = "") -> Any:
    """A ``ModelInferRequest`` with raw tensor contents (to ``version`` of the model where given)."""
    from tritonclient.grpc import service_pb2

    request = service_pb2.ModelInferRequest(model_name=model, model_version=version)
    for name, array in arrays.items():
        tensor = request.inputs.add()
        tensor.name = name
        tensor.datatype = wire_datatype(array)
        tensor.shape.extend(array.shape)
        request.raw_input_contents.append(raw_bytes(array))
    for name in outputs:
        request.outputs.add().name = name
    return request


def batch_rows(arrays: dict[str, Array], max_batch: int) -> int:
    """Rows per request: the batch dim of the arrays when the model batches, else 1."""
    return next(iter(arrays.values())).shape[0] if max_batch > 0 else 1
