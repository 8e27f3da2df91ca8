"""Signatures read from ONNX graphs."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from tritongen.errors import SourceError
from tritongen.sources.onnx_source import load_onnx, signature_from_onnx
from tritongen.sources.signature import TensorSpec


def _graph_model(
    inputs: list[onnx.ValueInfoProto], outputs: list[onnx.ValueInfoProto], nodes: list[onnx.NodeProto]
) -> onnx.ModelProto:
    model = helper.make_model(
        helper.make_graph(nodes, "g", inputs, outputs), opset_imports=[helper.make_opsetid("", 17)]
    )
    model.ir_version = 8
    return model


def test_mlp_has_a_batch_dim(example_models: dict[str, Path]) -> None:
    sig = load_onnx(example_models["mlp"]).signature
    assert sig.batched
    assert sig.inputs == (TensorSpec("input", "TYPE_FP32", (16,)),)
    assert sig.outputs == (TensorSpec("logits", "TYPE_FP32", (4,)),)


def test_text_encoder_keeps_dynamic_sequence_dim(example_models: dict[str, Path]) -> None:
    sig = load_onnx(example_models["text"]).signature
    assert sig.batched
    assert [t.name for t in sig.inputs] == ["input_ids", "attention_mask"]
    assert all(t.data_type == "TYPE_INT64" and t.dims == (-1,) for t in sig.inputs)
    assert sig.outputs[0].dims == (32,)


def test_static_graph_has_no_batch_dim(example_models: dict[str, Path]) -> None:
    sig = load_onnx(example_models["fixed"]).signature
    assert not sig.batched
    assert sig.inputs[0].dims == (3, 8)


def test_initializers_listed_as_inputs_are_not_inputs() -> None:
    w = onnx.numpy_helper.from_array(__import__("numpy").ones((4,), dtype="float32"), "w")
    model = _graph_model(
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4]),
            helper.make_tensor_value_info("w", TensorProto.FLOAT, [4]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 4])],
        [helper.make_node("Add", ["x", "w"], ["y"])],
    )
    model.graph.initializer.append(w)
    sig = signature_from_onnx(model)
    assert [t.name for t in sig.inputs] == ["x"]


@pytest.mark.parametrize(
    ("onnx_type", "triton_type"),
    [
        (TensorProto.FLOAT16, "TYPE_FP16"),
        (TensorProto.DOUBLE, "TYPE_FP64"),
        (TensorProto.INT8, "TYPE_INT8"),
        (TensorProto.UINT8, "TYPE_UINT8"),
        (TensorProto.INT32, "TYPE_INT32"),
        (TensorProto.BOOL, "TYPE_BOOL"),
        (TensorProto.STRING, "TYPE_STRING"),
        (TensorProto.BFLOAT16, "TYPE_BF16"),
    ],
)
def test_dtypes_map_to_triton(onnx_type: int, triton_type: str) -> None:
    model = _graph_model(
        [helper.make_tensor_value_info("x", onnx_type, ["n", 2])],
        [helper.make_tensor_value_info("y", onnx_type, ["n", 2])],
        [helper.make_node("Identity", ["x"], ["y"])],
    )
    sig = signature_from_onnx(model)
    assert sig.inputs[0].data_type == triton_type == sig.outputs[0].data_type


def test_partially_dynamic_leading_dim_is_not_a_batch_dim() -> None:
    model = _graph_model(
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2])],
        [helper.make_node("ReduceSum", ["x"], ["y"], keepdims=1)],
    )
    sig = signature_from_onnx(model)
    assert not sig.batched
    assert sig.inputs[0].dims == (-1, 2)
    assert sig.notes


def test_complex_tensor_is_refused() -> None:
    model = _graph_model(
        [helper.make_tensor_value_info("x", TensorProto.COMPLEX64, ["n"])],
        [helper.make_tensor_value_info("y", TensorProto.COMPLEX64, ["n"])],
        [helper.make_node("Identity", ["x"], ["y"])],
    )
    with pytest.raises(SourceError, match="COMPLEX64"):
        signature_from_onnx(model)


def test_sequence_input_is_refused() -> None:
    seq = helper.make_tensor_sequence_value_info("s", TensorProto.FLOAT, None)
    model = _graph_model(
        [seq],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [helper.make_node("SequenceAt", ["s", "i"], ["y"])],
    )
    with pytest.raises(SourceError, match="not a tensor"):
        signature_from_onnx(model)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="does not exist"):
        load_onnx(tmp_path / "nope.onnx")


def test_garbage_file(tmp_path: Path) -> None:
    path = tmp_path / "garbage.onnx"
    path.write_bytes(b"\x00\xffthis is not a protobuf" * 10)
    with pytest.raises(SourceError, match=r"not a readable ONNX model|holds no ONNX graph"):
        load_onnx(path)


def test_truncated_file(tmp_path: Path, example_models: dict[str, Path]) -> None:
    data = example_models["mlp"].read_bytes()
    path = tmp_path / "truncated.onnx"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(SourceError, match="re-export"):
        load_onnx(path)


def test_checker_failure_is_a_source_error(tmp_path: Path) -> None:
    model = _graph_model(
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 2])],
        [helper.make_node("Identity", ["not_defined"], ["y"])],
    )
    path = tmp_path / "bad.onnx"
    onnx.save(model, str(path))
    with pytest.raises(SourceError, match="fails the ONNX checker"):
        load_onnx(path)
