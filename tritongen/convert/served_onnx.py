"""A copy of the source graph as Triton serves it: scalars taken as ``[1]``, ``--constant`` inputs frozen.

A scalar input ``sr`` becomes an input of dims ``[1]`` (``[batch, 1]`` on a batching model)
and a Reshape (a Gather of the first row) hands the graph the scalar it was exported with; a
scalar output is reshaped to ``[1]``; a frozen input becomes an initializer. The weights are
not parsed: the copy refers to the source's external data files, copied beside it.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from tritongen.sources.adaptation import Adaptation

if TYPE_CHECKING:
    import onnx

SUFFIX = "__tritongen_scalar"
"""Appended to the name a scalar keeps inside the served graph."""


def write_served_onnx(source: Path, adaptation: Adaptation, path: Path) -> Path:
    """Write the served copy of ``source`` to ``path`` (with links to its external data files)."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(source), load_external_data=False)
    graph = model.graph
    for name in adaptation.scalar_inputs:
        inner = name + SUFFIX
        _rename_uses(graph, name, inner)
        value = next(v for v in graph.input if v.name == name)
        _set_dims(value, ["batch", 1] if adaptation.batched else [1])
        nodes = [*_first_value(name, inner, adaptation.batched), *graph.node]
        del graph.node[:]
        graph.node.extend(nodes)
        graph.initializer.extend(_shape_constants(name))
    for name in adaptation.scalar_outputs:
        inner = name + SUFFIX
        for node in graph.node:
            node.output[:] = [inner if o == name else o for o in node.output]
        _set_dims(next(v for v in graph.output if v.name == name), [1])
        graph.node.append(onnx.helper.make_node("Reshape", [inner, f"{name}__one"], [name]))
        graph.initializer.append(numpy_helper.from_array(np.array([1], dtype=np.int64), f"{name}__one"))
    kept = [v for v in graph.input if v.name not in adaptation.constants]
    del graph.input[:]
    graph.input.extend(kept)
    for name, value in adaptation.constants.items():
        graph.initializer.append(numpy_helper.from_array(np.asarray(value), name))
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))
    copy_external_data(source, model, path.parent)
    return path


def _first_value(name: str, inner: str, batched: bool) -> list[onnx.NodeProto]:
    """Nodes making ``inner``, a scalar, from ``name``: its first element (batched) or its one element."""
    from onnx import helper

    if batched:
        return [
            helper.make_node(
                "Reshape", [name, f"{name}__minus_one"], [f"{name}__flat"], name=f"{name}__flatten"
            ),
            helper.make_node(
                "Gather", [f"{name}__flat", f"{name}__zero"], [inner], axis=0, name=f"{name}__first"
            ),
        ]
    return [helper.make_node("Reshape", [name, f"{name}__no_dims"], [inner], name=f"{name}__to_scalar")]


def _shape_constants(name: str) -> list[onnx.TensorProto]:
    """The constants the nodes of :func:`_first_value` read."""
    from onnx import numpy_helper

    return [
        numpy_helper.from_array(np.array([], dtype=np.int64), f"{name}__no_dims"),
        numpy_helper.from_array(np.array(0, dtype=np.int64), f"{name}__zero"),
        numpy_helper.from_array(np.array([-1], dtype=np.int64), f"{name}__minus_one"),
    ]


def _rename_uses(graph: onnx.GraphProto, old: str, new: str) -> None:
    """Every read of ``old`` in the graph and its subgraphs reads ``new`` instead."""
    for node in graph.node:
        node.input[:] = [new if i == old else i for i in node.input]
        for attribute in node.attribute:
            if attribute.HasField("g"):
                _rename_uses(attribute.g, old, new)
            for sub in attribute.graphs:
                _rename_uses(sub, old, new)


def _set_dims(value: onnx.ValueInfoProto, dims: list[int | str]) -> None:
    shape = value.type.tensor_type.shape
    del shape.dim[:]
    for dim in dims:
        entry = shape.dim.add()
        if isinstance(dim, int):
            entry.dim_value = dim
        else:
            entry.dim_param = dim


def copy_external_data(source: Path, model: onnx.ModelProto, folder: Path) -> list[str]:
    """Copy the external data files ``model`` refers to from beside ``source`` into ``folder``, unparsed.

    Not hard links: ONNX and ONNX Runtime refuse a data file with several links (a known attack).
    Returns the file names, relative to ``folder``.
    """
    names = external_data_files(model)
    for name in names:
        origin, target = source.parent / name, folder / name
        if target.exists() or not origin.exists():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(origin, target)
    return names


def external_data_files(model: onnx.ModelProto) -> list[str]:
    """The external data files the tensors of ``model`` (and its subgraphs) refer to."""
    names: set[str] = set()
    for tensor in _tensors(model.graph):
        if tensor.data_location == 1:  # EXTERNAL
            names.update(e.value for e in tensor.external_data if e.key == "location")
    return sorted(names)


def _tensors(graph: onnx.GraphProto) -> Iterator[onnx.TensorProto]:
    """The initializers and constant tensors of ``graph`` and its subgraphs."""
    yield from graph.initializer
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.HasField("t"):
                yield attribute.t
            yield from attribute.tensors
            if attribute.HasField("g"):
                yield from _tensors(attribute.g)
            for sub in attribute.graphs:
                yield from _tensors(sub)
