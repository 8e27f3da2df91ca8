"""The ONNX side: which ops TVM's frontend takes, importing the graph, and its inputs' dims."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from tritongen.convert.onnx import graph_inputs
from tritongen.convert.tvm.options import first_line
from tritongen.errors import ConversionError
from tritongen.sources.signature import Signature

if TYPE_CHECKING:
    import onnx


def check_supported_ops(model: onnx.ModelProto) -> None:
    """Refuse a graph with ops TVM's ONNX frontend has no converter for, naming them all.

    Raises:
        ConversionError: one or more ops are unsupported.
    """
    from tvm.relax.frontend.onnx import onnx_frontend

    nodes = list(_all_nodes(model.graph))
    ml = sorted({n.op_type for n in nodes if n.domain == "ai.onnx.ml"})
    if ml:  # the frontend converts by op name alone: an ML op never reaches a converter of its own
        quoted = ", ".join(f"'{op}'" for op in ml)
        raise ConversionError(
            f"TVM cannot import the ai.onnx.ml op{'s' if len(ml) > 1 else ''} {quoted}: its ONNX frontend "
            "has no converter for that domain",
            "the other formats run them (ONNX Runtime implements ai.onnx.ml); leave tvm out of --formats",
        )
    convert_map = getattr(onnx_frontend, "_get_convert_map", None)
    if convert_map is None:  # a later TVM may hide it; the frontend then reports ops itself
        return
    known = set(convert_map()) | {"Constant", "If"}
    missing = sorted({node.op_type for node in nodes} - known)
    if missing:
        quoted = ", ".join(f"'{op}'" for op in missing)
        raise ConversionError(
            f"TVM's ONNX frontend does not support op{'s' if len(missing) > 1 else ''} {quoted}",
            "re-export the model without those ops (e.g. decompose them), or skip the tvm format",
        )


def import_onnx(model: onnx.ModelProto, name: str, shapes: dict[str, list[int]] | None = None) -> Any:
    """Import ``model`` into a Relax IRModule, weights bound as constants.

    Raises:
        ConversionError: the frontend fails; its reason is given in one line.
    """
    from tvm.relax.frontend.onnx import from_onnx

    try:
        return from_onnx(model, shape_dict=shapes, keep_params_in_input=False)
    except Exception as e:  # the frontend raises anything from ValueError to TVMError
        raise ConversionError(
            f"TVM's ONNX frontend cannot import {name}: {first_line(str(e)) or type(e).__name__}",
            "re-export the model with static shapes or simpler ops, or skip the tvm format",
        ) from e


def _all_nodes(graph: onnx.GraphProto) -> Iterator[onnx.NodeProto]:
    for node in graph.node:
        yield node
        for attribute in node.attribute:
            if attribute.g.node:
                yield from _all_nodes(attribute.g)
            for sub in attribute.graphs:
                yield from _all_nodes(sub)


def input_dims(model: onnx.ModelProto, signature: Signature) -> dict[str, tuple[int | str, ...]]:
    """Each graph input's dims with dynamic ones named (``batch`` for the batch dim)."""
    dims: dict[str, tuple[int | str, ...]] = {}
    for value in graph_inputs(model):
        shape: list[int | str] = []
        for index, dim in enumerate(value.type.tensor_type.shape.dim):
            if dim.HasField("dim_value") and dim.dim_value > 0:
                shape.append(int(dim.dim_value))
            elif index == 0 and signature.batched:
                shape.append(dim.dim_param or "batch")
            else:
                shape.append(dim.dim_param or f"{value.name}_dim{index}")
        dims[value.name] = tuple(shape)
    return dims


def relax_dims(
    module: Any,
) -> tuple[dict[str, tuple[int | str | None, ...]], list[tuple[int | str | None, ...]]]:
    """The dims of ``main``'s inputs (by name) and outputs (in order) as the Relax import sees them.

    A dim is an int when static, its variable's name when dynamic (the ONNX dim name), and
    ``None`` for a computed extent (such as ``dim1 * 2``), which no bucket can slice back.
    """
    function = module["main"]
    arg_types = list(function.ty.params)
    inputs = {str(var): _dims(arg_type) for var, arg_type in zip(function.params, arg_types, strict=True)}
    ret = function.ty.ret
    fields = list(ret.fields) if hasattr(ret, "fields") else [ret]
    return inputs, [_dims(field) for field in fields]


def _dims(tensor_type: Any) -> tuple[int | str | None, ...]:
    shape = getattr(tensor_type, "shape", None)
    values = getattr(shape, "values", None)
    if values is None:
        return ()
    dims: list[int | str | None] = []
    for value in values:
        kind = type(value).__name__
        dims.append(int(value) if kind == "IntImm" else str(value) if kind in ("Var", "SizeVar") else None)
    return tuple(dims)
