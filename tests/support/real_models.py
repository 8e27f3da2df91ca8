"""Small models built in code, each with a trait of the published models users bring.

- ``detector``: ONNX, image ``[batch, 3, height, width]`` whose spatial dims must be multiples
  of 32 (a stride-32 pool upsampled back and concatenated, as in YOLO-style necks);
- ``vad``: ONNX voice-activity RNN step: ``input [batch, samples]`` through a reflect pad of 64,
  ``state [2, batch, 16]`` (the batch on axis 1: it cannot batch) and ``sr []`` (a scalar);
- ``gain``: ONNX, ``x [batch, 16]`` times a scalar ``gain []``: a scalar on a batching model;
- ``filetype``: ONNX classifier of INT32 byte values with ``ai.onnx.ml`` ops (Scaler, LabelEncoder);
- ``half``: ONNX in FP16 throughout (inputs, weights, outputs);
- ``external``: ONNX whose weights live in a file beside it (external data);
- ``doubled``: ONNX whose output dim is an expression of the input's (``2*seq``);
- ``scale_int``: TorchScript ``forward(self, x, sr: int)``: a Python ``int`` argument;
- ``accumulator``: TorchScript that keeps a running sum in an attribute (stateful);
- ``counter``: TorchScript that counts its calls in an attribute but answers from its input alone;
- ``gain_ts``: TorchScript ``forward(self, x, gain)`` with ``gain`` a rank-0 tensor;
- ``half_ts``: TorchScript in FP16 throughout.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
ML_OPSET = 3


def _save(graph: onnx.GraphProto, path: Path, ml: bool = False, **save: Any) -> Path:
    opsets = [helper.make_opsetid("", OPSET)] + ([helper.make_opsetid("ai.onnx.ml", ML_OPSET)] if ml else [])
    model = helper.make_model(graph, opset_imports=opsets, producer_name="tritongen-tests")
    model.ir_version = 8
    onnx.checker.check_model(model)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, path, **save)
    return path


def _const(name: str, values: Any, dtype: Any = np.float32) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(values, dtype=dtype), name)


def detector(path: Path) -> Path:
    """``image [batch, 3, height, width]`` -> ``features [batch, 4, height, width]``; sides multiples of 32.

    Five 2x2 pools and a 32-fold upsampling, concatenated with the image: at 8x8 the pools run
    out of pixels; nothing in the graph names 32.
    """
    rng = np.random.default_rng(0)
    pools = [f"pooled{i}" for i in range(6)]
    nodes = [
        *(
            helper.make_node(
                "MaxPool", [([*pools, "image"])[i - 1]], [pools[i]], kernel_shape=[2, 2], strides=[2, 2]
            )
            for i in range(5)
        ),
        helper.make_node("Resize", [pools[4], "", "scales"], ["upsampled"], mode="nearest"),
        helper.make_node("Concat", ["image", "upsampled"], ["both"], axis=1),
        helper.make_node("Conv", ["both", "weight"], ["features"]),
    ]
    image = helper.make_tensor_value_info("image", TensorProto.FLOAT, ["batch", 3, "height", "width"])
    out = helper.make_tensor_value_info("features", TensorProto.FLOAT, ["batch", 4, "height", "width"])
    inits = [
        _const("scales", [1, 1, 32, 32]),
        _const("weight", rng.standard_normal((4, 6, 1, 1)) * 0.3),
    ]
    return _save(helper.make_graph(nodes, "detector", [image], [out], inits), path)


def vad(path: Path) -> Path:
    """One step of a voice-activity RNN: ``input``, ``state`` (batch on axis 1), ``sr`` (a scalar)."""
    nodes = [
        helper.make_node("Pad", ["input", "pads"], ["padded"], mode="reflect"),
        helper.make_node("Mul", ["padded", "padded"], ["power"]),
        helper.make_node("ReduceMean", ["power"], ["energy"], axes=[1], keepdims=1),
        helper.make_node("Cast", ["sr"], ["sr_float"], to=TensorProto.FLOAT),
        helper.make_node("Div", ["sr_float", "rate"], ["sr_scale"]),
        helper.make_node("ReduceMean", ["state"], ["memory"], axes=[0, 2], keepdims=0),
        helper.make_node("Unsqueeze", ["memory", "axis1"], ["memory_col"]),
        helper.make_node("Mul", ["energy", "sr_scale"], ["scaled"]),
        helper.make_node("Add", ["scaled", "memory_col"], ["logit"]),
        helper.make_node("Sigmoid", ["logit"], ["output"]),
        helper.make_node("Add", ["state", "energy"], ["mixed"]),
        helper.make_node("Tanh", ["mixed"], ["stateN"]),
    ]
    inputs = [
        helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", "samples"]),
        helper.make_tensor_value_info("state", TensorProto.FLOAT, [2, "batch", 16]),
        helper.make_tensor_value_info("sr", TensorProto.INT64, []),
    ]
    outputs = [
        helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", 1]),
        helper.make_tensor_value_info("stateN", TensorProto.FLOAT, [2, "batch", 16]),
    ]
    inits = [
        _const("pads", [0, 64, 0, 64], np.int64),
        _const("axis1", [1], np.int64),
        _const("rate", 16000.0),
    ]
    return _save(helper.make_graph(nodes, "vad", inputs, outputs, inits), path)


def gain(path: Path) -> Path:
    """``y = x * gain``: ``x [batch, 16]`` and a scalar ``gain []`` on a model that batches."""
    nodes = [helper.make_node("Mul", ["x", "gain"], ["y"])]
    inputs = [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 16]),
        helper.make_tensor_value_info("gain", TensorProto.FLOAT, []),
    ]
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 16])
    return _save(helper.make_graph(nodes, "gain", inputs, [out]), path)


def filetype(path: Path) -> Path:
    """INT32 byte values ``[batch, length]`` -> ``probabilities [batch, 2]``, ``label [batch]`` (strings)."""
    nodes = [
        helper.make_node("Cast", ["bytes"], ["values"], to=TensorProto.FLOAT),
        helper.make_node("ReduceMean", ["values"], ["mean"], axes=[1], keepdims=1),
        helper.make_node("ReduceMax", ["values"], ["peak"], axes=[1], keepdims=1),
        helper.make_node("Concat", ["mean", "peak"], ["stats"], axis=1),
        helper.make_node(
            "Scaler", ["stats"], ["scaled"], domain="ai.onnx.ml", offset=[0.5, 0.5], scale=[4.0, 2.0]
        ),
        helper.make_node("Softmax", ["scaled"], ["probabilities"], axis=1),
        helper.make_node("ArgMax", ["probabilities"], ["index"], axis=1, keepdims=0),
        helper.make_node(
            "LabelEncoder",
            ["index"],
            ["label"],
            domain="ai.onnx.ml",
            keys_int64s=[0, 1],
            values_strings=["text", "binary"],
            default_string="unknown",
        ),
    ]
    inputs = [helper.make_tensor_value_info("bytes", TensorProto.INT32, ["batch", "length"])]
    outputs = [
        helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, ["batch", 2]),
        helper.make_tensor_value_info("label", TensorProto.STRING, ["batch"]),
    ]
    return _save(helper.make_graph(nodes, "filetype", inputs, outputs), path, ml=True)


def half(path: Path) -> Path:
    """``x [batch, 16] FP16`` -> ``y [batch, 8] FP16``: a dense layer and a ReLU, all in half precision."""
    rng = np.random.default_rng(1)
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"]),
        helper.make_node("Add", ["h", "b"], ["pre"]),
        helper.make_node("Relu", ["pre"], ["y"]),
    ]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT16, ["batch", 16])]
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT16, ["batch", 8])
    inits = [
        _const("w", rng.standard_normal((16, 8)) * 0.25, np.float16),
        _const("b", rng.standard_normal(8) * 0.1, np.float16),
    ]
    return _save(helper.make_graph(nodes, "half", inputs, [out], inits), path)


def external(path: Path) -> Path:
    """``x [batch, 64]`` -> ``y [batch, 64]`` with its 64x64 weights in ``<name>.weights`` beside the file."""
    rng = np.random.default_rng(2)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Tanh", ["h"], ["y"])]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 64])]
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 64])
    inits = [_const("w", rng.standard_normal((64, 64)) * 0.125)]
    graph = helper.make_graph(nodes, "external", inputs, [out], inits)
    location = path.with_suffix(".weights").name
    return _save(graph, path, save_as_external_data=True, location=location, size_threshold=0)


def doubled(path: Path) -> Path:
    """``x [batch, seq]`` -> ``y [batch, 2*seq]``: an output dim written as an expression."""
    nodes = [helper.make_node("Concat", ["x", "x"], ["y"], axis=1)]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq"])]
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "2*seq"])
    return _save(helper.make_graph(nodes, "doubled", inputs, [out]), path)


ONNX_MODELS = {
    "detector": detector,
    "vad": vad,
    "gain": gain,
    "filetype": filetype,
    "half": half,
    "external": external,
    "doubled": doubled,
}


def _script(module: Any, path: Path) -> Path:
    import torch

    path.parent.mkdir(parents=True, exist_ok=True)
    torch.jit.script(module).save(str(path))
    return path


def scale_int(path: Path) -> Path:
    """TorchScript ``forward(self, x: Tensor, sr: int)``: ``x * sr / 16000``."""
    import torch

    class ScaleInt(torch.nn.Module):
        def forward(self, x: torch.Tensor, sr: int) -> torch.Tensor:
            return x * (float(sr) / 16000.0)

    return _script(ScaleInt(), path)


def accumulator(path: Path) -> Path:
    """TorchScript that adds each input's sum to ``self.total`` and answers with it: stateful."""
    import torch

    class Accumulator(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.total = torch.zeros(1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            self.total = self.total + x.sum()
            return x + self.total

    return _script(Accumulator(), path)


def counter(path: Path) -> Path:
    """TorchScript that counts its calls in ``self.calls`` but answers ``2 * x``: stateless in effect."""
    import torch

    class Counter(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.calls = 0

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            self.calls = self.calls + 1
            return x * 2.0

    return _script(Counter(), path)


def gain_ts(path: Path) -> Path:
    """TorchScript ``forward(self, x, gain)`` with ``gain`` a rank-0 tensor: ``x * gain``."""
    import torch

    class Gain(torch.nn.Module):
        def forward(self, x: torch.Tensor, gain: torch.Tensor) -> torch.Tensor:
            return x * gain

    return _script(Gain(), path)


def half_ts(path: Path) -> Path:
    """TorchScript in half precision: ``x [batch, 16] FP16`` -> ``[batch, 8] FP16``."""
    import torch

    torch.manual_seed(3)
    return _script(torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.ReLU()).half().eval(), path)


TORCHSCRIPT_MODELS = {
    "scale_int": scale_int,
    "accumulator": accumulator,
    "counter": counter,
    "gain_ts": gain_ts,
    "half_ts": half_ts,
}


def write_model(name: str, folder: Path) -> Path:
    """Write corpus model ``name`` into ``folder`` (``NAME.onnx`` or ``NAME.pt``)."""
    if name in ONNX_MODELS:
        return ONNX_MODELS[name](folder / f"{name}.onnx")
    return TORCHSCRIPT_MODELS[name](folder / f"{name}.pt")
