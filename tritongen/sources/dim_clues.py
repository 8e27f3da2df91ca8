"""What an ONNX graph says about the values its dynamic dims take, read without running it.

- a dim whose name carries its value (``height_640``, ``640``);
- a dim a node ties to a fixed one: a MatMul's inner dim against its weight, an
  element-wise op against a constant's dim, a Conv's channels against its kernel;
- a minimum some node needs: a reflect Pad needs more than its pad, a Conv or pool more
  than its kernel, a downscaling Resize enough to keep one pixel;
- string inputs the graph casts to numbers (they need numeric strings).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import onnx

_VALUE_IN_NAME = re.compile(r"(?:^|[_\-x])(\d+)$")
_GENERATED = re.compile(
    r"^(dim|unk__|s|DynamicDimension\.|batch_?|seq_?|n|N)\d*$|_dim_?\d+$|^\w+_dynamic_axes_\d+$"
)
"""Dim names exporters make up (``dim1``, ``unk__12``, ``s0``, ``output_dim2``): their digits are no value."""
_PASS_THROUGH = frozenset(
    {"Identity", "Reshape", "Squeeze", "Unsqueeze", "Flatten", "Transpose", "Slice", "Gather"}
)
"""Ops a string input may pass through before the Cast that parses it."""
_ELEMENTWISE = frozenset(
    {"Add", "Sub", "Mul", "Div", "Pow", "Where", "Max", "Min", "Equal", "Less", "Greater"}
)
_NUMERIC_STRINGS_LIMIT = 3
"""How many ops deep a string input is followed to the Cast that parses it."""


@dataclass
class DimClues:
    """The clues of one graph: dim names, values found, a minimum, numeric string inputs."""

    names: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Each graph input's dim names (``""`` for an unnamed or fixed dim)."""
    values: dict[tuple[str, int], tuple[int, str]] = field(default_factory=dict)
    """(input, axis) -> (value, why)."""
    minimum: tuple[int, str] | None = None
    """The smallest value a free dim may take, and why."""
    numeric_strings: frozenset[str] = frozenset()

    def named_values(self) -> dict[str, int]:
        """The values found, by dim name (for dims that share a name)."""
        out: dict[str, int] = {}
        for (name, axis), (value, _) in self.values.items():
            names = self.names.get(name, ())
            if axis < len(names) and names[axis]:
                out.setdefault(names[axis], value)
        return out


def read_clues(model: onnx.ModelProto) -> DimClues:
    """Every clue of ``model`` (see the module's description)."""
    graph = model.graph
    initializers = {init.name: init for init in graph.initializer}
    inputs = [v for v in graph.input if v.name not in initializers]
    clues = DimClues(names={v.name: _dim_names(v) for v in inputs})
    constants = _constants(graph)
    dynamic = {
        (v.name, axis)
        for v in inputs
        for axis, d in enumerate(v.type.tensor_type.shape.dim)
        if _is_dynamic(d)
    }
    for name, names in clues.names.items():
        for axis, dim in enumerate(names):
            value = _value_in_name(dim)
            if value is not None and (name, axis) in dynamic:
                clues.values[(name, axis)] = (value, f"the dim name {dim!r}")
    ranks = {v.name: len(v.type.tensor_type.shape.dim) for v in inputs}
    for node in graph.node:
        for (name, axis), found in _partner_values(node, ranks, constants).items():
            if (name, axis) in dynamic:
                clues.values.setdefault((name, axis), found)
        floor = _minimum(node, set(ranks), constants)
        if floor is not None and (clues.minimum is None or floor[0] > clues.minimum[0]):
            clues.minimum = floor
    clues.numeric_strings = _numeric_string_inputs(graph, inputs)
    return clues


def _dim_names(value: onnx.ValueInfoProto) -> tuple[str, ...]:
    return tuple(d.dim_param if not d.HasField("dim_value") else "" for d in value.type.tensor_type.shape.dim)


def _is_dynamic(dim: Any) -> bool:
    return not (dim.HasField("dim_value") and dim.dim_value > 0)


def _value_in_name(name: str) -> int | None:
    """The value a dim name carries (``height_640`` -> 640), unless an exporter made the name up."""
    if not name or _GENERATED.search(name):
        return None
    match = _VALUE_IN_NAME.search(name)
    if match is None:
        return None
    value = int(match.group(1))
    return value if value >= 2 else None


def _constants(graph: onnx.GraphProto) -> dict[str, tuple[tuple[int, ...], list[float] | None]]:
    """Initializers and Constant outputs: their shape, and their values when small and stored inline."""
    from onnx import numpy_helper

    out: dict[str, tuple[tuple[int, ...], list[float] | None]] = {}
    tensors = [(init.name, init) for init in graph.initializer]
    tensors += [
        (node.output[0], attr.t)
        for node in graph.node
        if node.op_type == "Constant"
        for attr in node.attribute
        if attr.name == "value"
    ]
    for name, tensor in tensors:
        shape = tuple(int(d) for d in tensor.dims)
        values = None
        inline = tensor.data_location != 1  # 1: EXTERNAL, whose bytes are not read here
        if inline and math.prod(shape) <= 64:
            try:
                values = [float(v) for v in numpy_helper.to_array(tensor).reshape(-1)]
            except Exception:  # an odd dtype: its shape is clue enough
                values = None
        out[name] = (shape, values)
    return out


def _partner_values(
    node: onnx.NodeProto,
    ranks: dict[str, int],
    constants: dict[str, tuple[tuple[int, ...], list[float] | None]],
) -> dict[tuple[str, int], tuple[int, str]]:
    """Dims of graph inputs that ``node`` ties to a fixed dim of a constant operand."""
    found: dict[tuple[str, int], tuple[int, str]] = {}
    operands = list(node.input)
    if node.op_type in ("MatMul", "Gemm") and len(operands) >= 2:
        a, b = operands[0], operands[1]
        if a in ranks and b in constants and len(constants[b][0]) >= 2:
            trans_b = any(at.name == "transB" and at.i for at in node.attribute)
            inner = constants[b][0][-1] if trans_b else constants[b][0][-2]
            found[(a, ranks[a] - 1)] = (inner, f"{node.op_type} {node.name or b} takes {inner} features")
    if node.op_type == "Conv" and len(operands) >= 2 and operands[0] in ranks and operands[1] in constants:
        group = next((at.i for at in node.attribute if at.name == "group"), 1) or 1
        channels = constants[operands[1]][0][1] * group
        found[(operands[0], 1)] = (channels, f"Conv {node.name or operands[1]} takes {channels} channels")
    if node.op_type in _ELEMENTWISE:
        for name in (n for n in operands if n in ranks):
            for other in (n for n in operands if n in constants):
                shape = constants[other][0]
                for offset in range(1, min(len(shape), ranks[name]) + 1):
                    if shape[-offset] > 1:
                        why = f"{node.op_type} {node.name or other} with a constant of dim {shape[-offset]}"
                        found.setdefault((name, ranks[name] - offset), (shape[-offset], why))
    return found


def _minimum(
    node: onnx.NodeProto,
    inputs: set[str],
    constants: dict[str, tuple[tuple[int, ...], list[float] | None]],
) -> tuple[int, str] | None:
    """The smallest dim ``node`` takes when it reads a graph input directly, with why."""
    if not node.input or node.input[0] not in inputs:
        return None
    attrs = {at.name: at for at in node.attribute}
    label = f"{node.op_type} {node.name}".strip()
    if node.op_type == "Pad":
        mode = attrs["mode"].s.decode() if "mode" in attrs else "constant"
        pads = constants.get(node.input[1], ((), None))[1] if len(node.input) > 1 else None
        if mode == "reflect" and pads:
            most = int(max(pads))
            return most + 1, f"{label} reflects {most} values"
    if node.op_type in ("Conv", "MaxPool", "AveragePool", "LpPool") and "kernel_shape" in attrs:
        kernel = max(attrs["kernel_shape"].ints)
        if kernel > 1:
            return kernel, f"{label} has a kernel of {kernel}"
    if node.op_type == "Resize" and len(node.input) > 2:
        scales = constants.get(node.input[2], ((), None))[1]
        low = [s for s in scales or [] if 0 < s < 1]
        if low:
            need = math.ceil(1 / min(low))
            return need, f"{label} scales by {min(low):g}"
    return None


def _numeric_string_inputs(graph: onnx.GraphProto, inputs: list[onnx.ValueInfoProto]) -> frozenset[str]:
    """String graph inputs that reach a Cast to a number (through reshapes and the like)."""
    from onnx import TensorProto

    strings = {v.name for v in inputs if v.type.tensor_type.elem_type == TensorProto.STRING}
    found: set[str] = set()
    for name in strings:
        if any(_casts_to_number(node) for node in _consumers(graph, name, _NUMERIC_STRINGS_LIMIT)):
            found.add(name)
    return frozenset(found)


def _consumers(graph: onnx.GraphProto, name: str, depth: int) -> Iterator[onnx.NodeProto]:
    """Nodes reading ``name``, and through pass-through ops those reading their outputs."""
    for node in graph.node:
        if name in node.input:
            yield node
            if node.op_type in _PASS_THROUGH and depth > 1:
                for output in node.output:
                    yield from _consumers(graph, output, depth - 1)


def _casts_to_number(node: onnx.NodeProto) -> bool:
    from onnx import TensorProto

    if node.op_type != "Cast":
        return False
    to = next((at.i for at in node.attribute if at.name == "to"), 0)
    return to not in (TensorProto.STRING, TensorProto.UNDEFINED)
