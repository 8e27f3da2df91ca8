"""Small ONNX graphs built in code, for tests and the demo.

- ``mlp``: ``input [batch, 16] FP32 -> logits [batch, 4]``, two dense layers.
- ``text``: a toy text encoder with two inputs and a dynamic sequence dim:
  ``input_ids [batch, seq] INT64``, ``attention_mask [batch, seq] INT64`` ->
  ``embedding [batch, 32] FP32`` (masked mean of token embeddings).
- ``fixed``: no batch dim at all: ``x [3, 8] FP32 -> y [3, 8]``, so ``max_batch_size: 0``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from tritongen.errors import ConfigError

if TYPE_CHECKING:
    import onnx

OPSET = 17
IR_VERSION = 8  # readable by the ONNX Runtime inside older Triton images too


def _model(graph: onnx.GraphProto) -> onnx.ModelProto:
    from onnx import checker, helper

    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="tritongen"
    )
    model.ir_version = IR_VERSION
    checker.check_model(model)
    return model


def _weights(name: str, shape: tuple[int, ...], rng: np.random.Generator) -> onnx.TensorProto:
    from onnx import numpy_helper

    scale = 1.0 / np.sqrt(shape[0])
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


def mlp(in_features: int = 16, hidden: int = 64, out_features: int = 4, seed: int = 0) -> onnx.ModelProto:
    """Two dense layers with a ReLU; dynamic batch dim."""
    from onnx import TensorProto, helper

    rng = np.random.default_rng(seed)
    nodes = [
        helper.make_node("MatMul", ["input", "w1"], ["h0"]),
        helper.make_node("Add", ["h0", "b1"], ["h1"]),
        helper.make_node("Relu", ["h1"], ["h2"]),
        helper.make_node("MatMul", ["h2", "w2"], ["h3"]),
        helper.make_node("Add", ["h3", "b2"], ["logits"]),
    ]
    graph = helper.make_graph(
        nodes,
        "mlp",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", in_features])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", out_features])],
        initializer=[
            _weights("w1", (in_features, hidden), rng),
            _weights("b1", (hidden,), rng),
            _weights("w2", (hidden, out_features), rng),
            _weights("b2", (out_features,), rng),
        ],
    )
    return _model(graph)


def text_encoder(vocab: int = 1000, width: int = 32, seed: int = 0) -> onnx.ModelProto:
    """Masked mean of token embeddings; dynamic batch and sequence dims, two inputs."""
    from onnx import TensorProto, helper

    rng = np.random.default_rng(seed)
    nodes = [
        helper.make_node("Gather", ["embeddings", "input_ids"], ["tokens"]),  # [b, s, w]
        helper.make_node("Cast", ["attention_mask"], ["mask_f"], to=TensorProto.FLOAT),  # [b, s]
        helper.make_node("Unsqueeze", ["mask_f", "axis_last"], ["mask3"]),  # [b, s, 1]
        helper.make_node("Mul", ["tokens", "mask3"], ["masked"]),
        helper.make_node("ReduceSum", ["masked", "axis_seq"], ["summed"], keepdims=0),  # [b, w]
        helper.make_node("ReduceSum", ["mask3", "axis_seq"], ["count"], keepdims=0),  # [b, 1]
        helper.make_node("Max", ["count", "one"], ["count_safe"]),
        helper.make_node("Div", ["summed", "count_safe"], ["mean"]),
        helper.make_node("Tanh", ["mean"], ["embedding"]),
    ]
    from onnx import numpy_helper

    graph = helper.make_graph(
        nodes,
        "text_encoder",
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"]),
            helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "seq"]),
        ],
        [helper.make_tensor_value_info("embedding", TensorProto.FLOAT, ["batch", width])],
        initializer=[
            _weights("embeddings", (vocab, width), rng),
            numpy_helper.from_array(np.array([-1], dtype=np.int64), "axis_last"),
            numpy_helper.from_array(np.array([1], dtype=np.int64), "axis_seq"),
            numpy_helper.from_array(np.array([1.0], dtype=np.float32), "one"),
        ],
    )
    return _model(graph)


def fixed(rows: int = 3, cols: int = 8) -> onnx.ModelProto:
    """A graph with fully static shapes: ``y = sigmoid(x)``; no batch dim."""
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Sigmoid", ["x"], ["y"])],
        "fixed",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [rows, cols])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [rows, cols])],
    )
    return _model(graph)


EXAMPLES: dict[str, Callable[[], onnx.ModelProto]] = {"mlp": mlp, "text": text_encoder, "fixed": fixed}


def write_example(name: str, path: Path) -> Path:
    """Build example ``name`` and save it to ``path``.

    Raises:
        ConfigError: ``name`` is not one of :data:`EXAMPLES`.
    """
    import onnx

    factory = EXAMPLES.get(name)
    if factory is None:
        raise ConfigError(f"unknown example model {name!r}", f"choose from: {', '.join(EXAMPLES)}")
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(factory(), str(path))
    return path
