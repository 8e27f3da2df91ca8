"""Input and output rules: names, data types, dims, reshape, formats and shape tensors."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

from tritongen.lint.rules.context import ModelContext, enum_name

PROTOCOL_TYPES = {
    "TYPE_BOOL": "BOOL",
    "TYPE_UINT8": "UINT8",
    "TYPE_UINT16": "UINT16",
    "TYPE_UINT32": "UINT32",
    "TYPE_UINT64": "UINT64",
    "TYPE_INT8": "INT8",
    "TYPE_INT16": "INT16",
    "TYPE_INT32": "INT32",
    "TYPE_INT64": "INT64",
    "TYPE_FP16": "FP16",
    "TYPE_FP32": "FP32",
    "TYPE_FP64": "FP64",
    "TYPE_STRING": "BYTES",
    "TYPE_BF16": "BF16",
}


def element_count(dims: list[int]) -> int:
    """Triton's element count: -1 when any dim is variable, 0 for no dims."""
    if not dims:
        return 0
    if any(d == -1 for d in dims):
        return -1
    return math.prod(dims)


def _blocks(dims: list[int]) -> list[int]:
    """Products of the fixed runs between variable dims."""
    blocks, product = [], 1
    for d in dims:
        if d == -1:
            blocks.append(product)
            product = 1
        else:
            product *= d
    blocks.append(product)
    return blocks


def _invalid_dims(dims: list[int]) -> list[int]:
    """The dims that are neither a size (>= 1) nor -1 (variable)."""
    return [d for d in dims if d < 1 and d != -1]


def check_io(ctx: ModelContext) -> None:
    """Inputs and outputs: names, data types, dims, reshape, formats, shape tensors, uniqueness."""
    config = ctx.config
    batching = config.max_batch_size > 0
    for kind, tensors in (("input", config.input), ("output", config.output)):
        names = Counter(t.name for t in tensors if t.name)
        for name, count in names.items():
            if count > 1:
                ctx.error(
                    "io.duplicate-name",
                    kind,
                    f"{kind} name '{name}' is used {count} times",
                    f"give each {kind} its own name (Triton loads it, but every request then fails)",
                )
        for index, tensor in enumerate(tensors):
            _check_tensor(ctx, kind, index, tensor, batching)
    shared = {t.name for t in config.input} & {t.name for t in config.output}
    for name in sorted(shared - {""}):
        ctx.warning(
            "io.input-output-name",
            "output",
            f"'{name}' is both an input and an output",
            "rename one of them: clients cannot tell them apart in requests",
        )


def _check_tensor(ctx: ModelContext, kind: str, index: int, tensor: Any, batching: bool) -> None:
    """One input or output: its name and data type, its dims and reshape, its format."""
    path = f"{kind}[{index}]"
    label = f"{kind} '{tensor.name}'" if tensor.name else f"{kind} #{index}"
    if not tensor.name:
        ctx.error("io.name-missing", f"{path}.name", f"{label} has no name", "set name")
    if tensor.data_type == 0:
        ctx.error(
            "io.data-type-missing",
            f"{path}.data_type",
            f"{label} has no data_type",
            "set data_type, e.g. TYPE_FP32",
        )
    _check_dims(ctx, path, label, tensor, batching)
    _check_format(ctx, kind, path, label, tensor)


def _check_dims(ctx: ModelContext, path: str, label: str, tensor: Any, batching: bool) -> None:
    """Dims present and valid, and a reshape that is valid and holds as many elements."""
    dims = list(tensor.dims)
    has_reshape = tensor.HasField("reshape")
    reshape = list(tensor.reshape.shape) if has_reshape else None
    if not dims:
        ctx.error(
            "io.dims-missing",
            f"{path}.dims",
            f"{label} has no dims",
            "give the dims without the batch dim; a scalar is dims: [1] with reshape: { shape: [] }",
        )
    if has_reshape and reshape == [] and not batching:
        ctx.error(
            "io.reshape-scalar",
            f"{path}.reshape",
            f"{label} reshapes to a scalar on a model without batching",
            "drop the reshape, or enable batching (max_batch_size > 0)",
        )
    bad = _invalid_dims(dims)
    if bad:
        ctx.error(
            "io.dims-value",
            f"{path}.dims",
            f"{label} has dim {bad[0]}; dims are >= 1, or -1 for variable",
            "use a positive size, or -1 for a dim that varies",
        )
    if reshape:
        bad = _invalid_dims(reshape)
        if bad:
            ctx.error(
                "io.reshape-value",
                f"{path}.reshape.shape",
                f"{label} reshapes to dim {bad[0]}",
                "use a positive size, or -1 for a dim that varies",
            )
    if reshape is not None and dims and not _invalid_dims(dims + reshape):
        _check_reshape(ctx, path, label, dims, reshape)


def _check_format(ctx: ModelContext, kind: str, path: str, label: str, tensor: Any) -> None:
    """Image formats with three dims; shape tensors and non-linear formats only on TensorRT."""
    if kind == "input" and tensor.format in (1, 2) and len(tensor.dims) != 3:
        ctx.error(
            "io.format-dims",
            f"{path}.format",
            f"{label} has format {enum_name(tensor, 'format')} but {len(tensor.dims)} dims",
            "NHWC/NCHW inputs have exactly 3 dims (without the batch dim)",
        )
    if tensor.is_shape_tensor and ctx.platform != "tensorrt_plan":
        ctx.error(
            "io.shape-tensor",
            f"{path}.is_shape_tensor",
            f"{label} is a shape tensor on a model that is not TensorRT",
            "drop is_shape_tensor: only TensorRT has shape tensors",
        )
    if tensor.is_non_linear_format_io and ctx.platform != "tensorrt_plan":
        ctx.error(
            "io.non-linear",
            f"{path}.is_non_linear_format_io",
            f"{label} uses a non-linear format on a model that is not TensorRT",
            "drop is_non_linear_format_io",
        )


def _check_reshape(ctx: ModelContext, path: str, label: str, dims: list[int], reshape: list[int]) -> None:
    a, b = element_count(dims), element_count(reshape)
    if b == 0 and a == 1:
        return
    if (a == -1) != (b == -1) or (a != -1 and a != b):
        ctx.error(
            "io.reshape-size",
            f"{path}.reshape",
            f"{label}: dims {dims} and reshape {reshape} hold a different number of elements",
            "make the reshape hold as many elements as the dims",
        )
        return
    if a == -1:
        if dims.count(-1) != reshape.count(-1):
            ctx.error(
                "io.reshape-variable",
                f"{path}.reshape",
                f"{label}: dims {dims} and reshape {reshape} differ in their number of variable dims",
                "use as many -1 in the reshape as in the dims",
            )
        elif _blocks(dims) != _blocks(reshape):
            ctx.error(
                "io.reshape-size",
                f"{path}.reshape",
                f"{label}: the fixed dims of {dims} and {reshape} "
                "between the variable ones hold different sizes",
                "keep each block's size the same",
            )
