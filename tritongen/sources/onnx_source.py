"""Load an ONNX file and read its signature."""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tritongen.errors import MissingDependencyError, SourceError
from tritongen.sources.signature import Signature, TensorSpec

if TYPE_CHECKING:
    import onnx

# onnx.TensorProto.DataType name -> Triton data type.
_ONNX_TO_TRITON = {
    "FLOAT": "TYPE_FP32",
    "UINT8": "TYPE_UINT8",
    "INT8": "TYPE_INT8",
    "UINT16": "TYPE_UINT16",
    "INT16": "TYPE_INT16",
    "INT32": "TYPE_INT32",
    "INT64": "TYPE_INT64",
    "STRING": "TYPE_STRING",
    "BOOL": "TYPE_BOOL",
    "FLOAT16": "TYPE_FP16",
    "DOUBLE": "TYPE_FP64",
    "UINT32": "TYPE_UINT32",
    "UINT64": "TYPE_UINT64",
    "BFLOAT16": "TYPE_BF16",
}


@dataclass(frozen=True)
class OnnxSource:
    """A loaded ONNX model with its file, content hash and signature."""

    path: Path
    sha256: str
    signature: Signature
    opset: int
    model: onnx.ModelProto


def load_onnx(path: Path, frozen: Collection[str] = ()) -> OnnxSource:
    """Load, check and describe an ONNX file.

    Raises:
        SourceError: the file is missing, not ONNX, fails the ONNX checker, or has
            tensors whose type or shape Triton cannot describe.
    """
    try:
        import onnx
    except ImportError as e:  # pragma: no cover - onnx is a core dependency
        raise MissingDependencyError("the onnx package is not installed", "run `make install`") from e

    if not path.exists():
        raise SourceError(f"{path} does not exist", "check the path to the ONNX file")
    if not path.is_file():
        raise SourceError(f"{path} is not a file", "pass the path of an .onnx file")
    data = path.read_bytes()
    try:
        model = onnx.load_from_string(data)
    except Exception as e:  # protobuf raises DecodeError and friends
        raise SourceError(
            f"{path} is not a readable ONNX model ({type(e).__name__})",
            "re-export the model; the file may be truncated or not ONNX at all",
        ) from e
    if not model.graph.node and not model.graph.output:
        raise SourceError(
            f"{path} holds no ONNX graph", "re-export the model; the file may be truncated or not ONNX"
        )
    try:
        # external data is found beside the file: checked by path (its bytes are not read)
        onnx.checker.check_model(str(path) if _has_external_data(model) else model, full_check=False)
    except onnx.checker.ValidationError as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise SourceError(f"{path} fails the ONNX checker: {first}", "re-export the model") from e
    _check_operator_domains(path, model)
    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception:  # inference is a best effort; the declared shapes still count
        inferred = model
    signature = signature_from_onnx(inferred, str(path), frozen)
    opset = max((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), default=0)
    return OnnxSource(
        path=path,
        sha256=hashlib.sha256(data).hexdigest(),
        signature=signature,
        opset=opset,
        model=model,
    )


ENGINE_DOMAINS = frozenset({"", "ai.onnx", "ai.onnx.ml", "com.microsoft"})
"""Operator domains the engines implement: standard ONNX, ONNX-ML and ONNX Runtime's contrib ops.
(The ONNX checker already refuses operators unknown to the standard domains.)"""


def _has_external_data(model: onnx.ModelProto) -> bool:
    import onnx

    return any(init.data_location == onnx.TensorProto.EXTERNAL for init in model.graph.initializer)


def _check_operator_domains(path: Path, model: onnx.ModelProto) -> None:
    """Refuse custom operators up front: no engine here implements them, and every build would fail."""
    local = {(f.domain, f.name) for f in model.functions}  # model-local functions expand to known ops
    custom = sorted(
        {
            f"{n.domain}::{n.op_type}"
            for n in model.graph.node
            if n.domain not in ENGINE_DOMAINS and (n.domain, n.op_type) not in local
        }
    )
    if custom:
        shown = ", ".join(custom[:5]) + (f" and {len(custom) - 5} more" if len(custom) > 5 else "")
        raise SourceError(
            f"{path} uses custom operators no engine here implements: {shown}",
            "re-export the model with standard ONNX operators",
        )


def signature_from_onnx(
    model: onnx.ModelProto, where: str = "model", frozen: Collection[str] = ()
) -> Signature:
    """Describe the graph's inputs (initializers excluded) and outputs for Triton.

    A leading dim that is dynamic on every input and output becomes the batch dim; any
    other dynamic dim is ``-1``. A rank-0 tensor is served as dims ``[1]`` (``scalar``): on a
    batching model a scalar input is one value per request (its first row), and takes no
    part in finding the batch dim.
    """
    initializers = {init.name for init in model.graph.initializer} | set(frozen)
    raw_inputs = [_raw_tensor(v, where) for v in model.graph.input if v.name not in initializers]
    raw_outputs = [_raw_tensor(v, where) for v in model.graph.output]
    if not raw_inputs:
        raise SourceError(f"{where} has no inputs", "export the model with at least one graph input")
    if not raw_outputs:
        raise SourceError(f"{where} has no outputs", "export the model with at least one graph output")
    tensors = [t for t in raw_inputs if t[2]] + raw_outputs
    batched = len(tensors) > len(raw_outputs) and all(dims and dims[0] == -1 for _, _, dims, _ in tensors)
    notes = [] if batched else no_batch_reasons(raw_inputs + raw_outputs)

    def spec(name: str, dtype: str, dims: list[int], _names: tuple[str, ...]) -> TensorSpec:
        if not dims:
            return TensorSpec(name=name, data_type=dtype, dims=(1,), scalar=True)
        return TensorSpec(name=name, data_type=dtype, dims=tuple(dims[1:] if batched else dims))

    return Signature(
        inputs=tuple(spec(*t) for t in raw_inputs),
        outputs=tuple(spec(*t) for t in raw_outputs),
        batched=batched,
        notes=tuple(notes),
    )


def frozen_inputs(model: onnx.ModelProto, constants: Mapping[str, str], where: str) -> dict[str, Any]:
    """The values ``--constant`` gives graph inputs: each in the input's type and (fixed) shape.

    Raises:
        ConfigError: a name that is no graph input, a dynamic dim, or a value the type cannot hold.
    """
    from tritongen.sources.adaptation import tensor_constant, unknown_constant

    initializers = {init.name for init in model.graph.initializer}
    inputs = {v.name: v for v in model.graph.input if v.name not in initializers}
    refused = unknown_constant(list(constants), list(inputs), f"an input of {where}")
    if refused is not None:
        raise refused
    values = {}
    for name, text in constants.items():
        _, data_type, dims, _ = _raw_tensor(inputs[name], where)
        values[name] = tensor_constant(text, data_type, dims, f"--constant {name}")
    return values


RawTensor = tuple[str, str, list[int], tuple[str, ...]]
"""A graph tensor as read: name, Triton type, dims (``-1`` dynamic), dim names (``""`` unnamed)."""


def no_batch_reasons(tensors: list[RawTensor]) -> list[str]:
    """Why a graph whose first dims are dynamic on some tensors has no batch dim, naming the tensor."""
    leads = {names[0] for _, _, dims, names in tensors if dims and dims[0] == -1 and names and names[0]}
    if not any(dims and dims[0] == -1 for _, _, dims, _ in tensors):
        return []
    for name, _, dims, names in tensors:
        if dims and dims[0] == -1:
            continue
        shown = ",".join(n or str(d) for d, n in zip(dims, names, strict=False)) if dims else ""
        axis = next((i for i, n in enumerate(names) if n and n in leads), None)
        if axis is not None:
            why = f"'{name}' carries the batch ({names[axis]}) on axis {axis} ([{shown}])"
        elif not dims:
            continue
        else:
            why = f"'{name}' has a fixed first dim ([{shown}])"
        return [
            f"{why}: Triton batches on axis 0 only, so the model is served with max_batch_size 0 "
            "and every request carries its full shape"
        ]
    return [
        "an output does not have the inputs' dynamic first dim, so the model is served with max_batch_size 0"
    ]


def _raw_tensor(value: onnx.ValueInfoProto, where: str) -> RawTensor:
    import onnx

    kind = value.type.WhichOneof("value")
    if kind != "tensor_type":
        raise SourceError(
            f"{where}: '{value.name}' is a {kind or 'untyped'} value, not a tensor",
            "Triton serves tensors only; export sequences and maps as tensors",
        )
    tensor_type = value.type.tensor_type
    onnx_type = onnx.TensorProto.DataType.Name(tensor_type.elem_type)
    triton_type = _ONNX_TO_TRITON.get(onnx_type)
    if triton_type is None:
        raise SourceError(
            f"{where}: tensor '{value.name}' has type {onnx_type}, which Triton cannot serve",
            "cast it to a supported type (float, int, bool, string) in the export",
        )
    if not tensor_type.HasField("shape"):
        raise SourceError(
            f"{where}: tensor '{value.name}' has no shape, not even after ONNX shape inference",
            "export the model with static or symbolic shapes on every graph input and output",
        )
    dims = [d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else -1 for d in tensor_type.shape.dim]
    names = tuple("" if d.HasField("dim_value") else d.dim_param for d in tensor_type.shape.dim)
    return value.name, triton_type, dims, names
