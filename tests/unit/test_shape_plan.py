"""The dims random inputs are drawn at: ``--shape``, the graph's clues, the ladder, the one-line refusal."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tritongen.convert.onnx import onnx_runner
from tritongen.errors import ConfigError, SourceError
from tritongen.pipeline.shapes import tvm_dim_values
from tritongen.sources.dim_clues import read_clues
from tritongen.sources.dim_search import LADDER, apply_clues, search_dims
from tritongen.sources.onnx_source import load_onnx
from tritongen.sources.shape_plan import BATCH, FREE, apply_shapes, default_plan, fixed_signature

from support.real_models import detector, vad


def _model(path: Path, nodes: list, inputs: list, outputs: list, inits: list | None = None) -> Path:
    graph = helper.make_graph(nodes, "m", inputs, outputs, inits or [])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def _plan(path: Path, shapes: dict[str, tuple[int, ...]] | None = None):  # type: ignore[no-untyped-def]
    source = load_onnx(path)
    clues = read_clues(source.model)
    plan = default_plan(source.signature, clues.names)
    plan = apply_shapes(plan, source.signature, shapes or {}, clues.names)
    return source, apply_clues(plan, clues, source.signature)


def test_shape_takes_the_batch_dim_or_not_and_spreads_to_inputs_sharing_a_dim(tmp_path: Path) -> None:
    path = _model(
        tmp_path / "two.onnx",
        [helper.make_node("Add", ["a", "b"], ["y"])],
        [
            helper.make_tensor_value_info("a", TensorProto.FLOAT, ["batch", "seq"]),
            helper.make_tensor_value_info("b", TensorProto.FLOAT, ["batch", "seq"]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq"])],
    )
    for given in ((1, 128), (128,)):
        source, plan = _plan(path, {"a": given})
        assert plan.dims == {"a": (128,), "b": (128,)} and plan.chosen_by == "shape"
        assert plan.first_shapes(source.signature) == {"a": [1, 128], "b": [1, 128]}
    assert fixed_signature(source.signature, plan).inputs[0].dims == (128,)


@pytest.mark.parametrize(
    ("shapes", "words"),
    [
        ({"nope": (3,)}, "--shape names 'nope', which is not an input of the model"),
        ({"image": (3, 32)}, "--shape image=3,32 has 2 dims; 'image' has 3 ([-1,3,-1,-1], batch first)"),
        ({"image": (1, 4, 32, 32)}, "contradicts the model, which fixes [3,-1,-1]"),
    ],
)
def test_a_shape_that_does_not_fit_is_refused_in_one_line(
    tmp_path: Path, shapes: dict[str, tuple[int, ...]], words: str
) -> None:
    with pytest.raises(ConfigError) as refused:
        _plan(detector(tmp_path / "detector.onnx"), shapes)
    assert words in refused.value.message and "\n" not in refused.value.one_line()


def test_the_ladder_finds_the_first_size_a_detector_runs_at(tmp_path: Path) -> None:
    source, plan = _plan(detector(tmp_path / "detector.onnx"))
    assert plan.has_free and plan.free_values == (8, 16, 5)  # the 2x2 pools give no useful minimum
    settled = search_dims(plan, source.signature, onnx_runner(source.path, source.signature))
    assert settled.chosen_by == "ladder" and settled.free_values == (32,)
    assert settled.first_shapes(source.signature) == {"image": [1, 3, 32, 32]}
    names = read_clues(source.model).names
    assert tvm_dim_values(settled, source.signature, names) == {"height": 32, "width": 32}  # TVM's buckets
    assert tvm_dim_values(plan, source.signature, names) == {}  # nothing chosen: TVM's own default
    feeds = settled.batches(source.signature, max_batch_size=4)
    assert [f["image"].shape for f in feeds] == [(1, 3, 32, 32), (3, 3, 32, 32), (4, 3, 32, 32)]


def test_a_source_that_runs_at_no_size_names_its_inputs_and_the_shape_to_pass(tmp_path: Path) -> None:
    path = _model(  # a Reshape to 700 elements: only 700 samples run
        tmp_path / "picky.onnx",
        [helper.make_node("Reshape", ["x", "shape"], ["y"])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "n"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [7, 100])],
        [numpy_helper.from_array(np.array([7, 100], dtype=np.int64), "shape")],
    )
    source, plan = _plan(path)
    with pytest.raises(SourceError) as refused:
        search_dims(plan, source.signature, onnx_runner(source.path, source.signature))
    line = refused.value.one_line()
    tried = ", ".join(map(str, LADDER))  # 8 fails, so 16 and 5 are not tried
    assert f"(x[1,?] at {tried})" in line and "--shape x=1,640" in line and "\n" not in line
    source, plan = _plan(path, {"x": (1, 700)})
    assert search_dims(plan, source.signature, onnx_runner(source.path, source.signature)) == plan


def test_clues_a_reflect_pad_a_named_dim_a_weight_and_a_kernel(tmp_path: Path) -> None:
    _, plan = _plan(vad(tmp_path / "vad.onnx"))
    assert plan.floor == 65 and plan.free_values == (65,)  # the reflect pad of 64
    assert plan.dims["input"] == (BATCH, FREE) and plan.dims["state"] == (2, BATCH, 16)
    assert plan.shape("state", False, 3, 65) == (2, 3, 16)  # the batch on axis 1 follows the batch size
    path = _model(
        tmp_path / "clued.onnx",
        [
            helper.make_node("MatMul", ["features", "w"], ["h"]),
            helper.make_node("MaxPool", ["image"], ["pooled"], kernel_shape=[7, 7]),
        ],
        [
            helper.make_tensor_value_info("features", TensorProto.FLOAT, ["batch", "k"]),
            helper.make_tensor_value_info("image", TensorProto.FLOAT, ["batch", 3, "height_640", "dim3"]),
        ],
        [
            helper.make_tensor_value_info("h", TensorProto.FLOAT, ["batch", 4]),
            helper.make_tensor_value_info("pooled", TensorProto.FLOAT, ["batch", 3, "a", "b"]),
        ],
        [numpy_helper.from_array(np.zeros((24, 4), dtype=np.float32), "w")],
    )
    _, plan = _plan(path)
    assert plan.dims == {"features": (24,), "image": (3, 640, FREE)}  # "dim3" is an exporter's name
    assert plan.chosen_by == "clues" and plan.floor == 7 and plan.free_values == (8, 16)
    assert any("MatMul" in r for r in plan.reasons) and any("'height_640'" in r for r in plan.reasons)


def test_strings_the_graph_casts_to_numbers_are_drawn_as_numbers(tmp_path: Path) -> None:
    path = _model(
        tmp_path / "parse.onnx",
        [
            helper.make_node("Identity", ["text"], ["same"]),
            helper.make_node("Cast", ["same"], ["value"], to=TensorProto.INT32),
        ],
        [helper.make_tensor_value_info("text", TensorProto.STRING, ["batch", 4])],
        [helper.make_tensor_value_info("value", TensorProto.INT32, ["batch", 4])],
    )
    source, plan = _plan(path)
    assert plan.numeric_strings == {"text"}
    feed = plan.feed(source.signature, 2, 8, np.random.default_rng(0))
    assert all(int(v) >= 0 for v in feed["text"].reshape(-1))
    assert search_dims(plan, source.signature, onnx_runner(source.path, source.signature)) == plan
