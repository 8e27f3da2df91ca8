"""PyTorch twins of the example ONNX models, for PyTorch-source conversions (TorchScript included).

``tritongen convert tritongen.examples.torch_models:mlp --input-spec input:FP32:-1,16``
builds the same function as the ONNX ``mlp`` example (same weights), so every engine
can be compared on it.
"""

from __future__ import annotations

from typing import Any

from tritongen.errors import MissingDependencyError

MLP_INPUT_SPECS = ("input:FP32:-1,16",)
MLP_OUTPUT_NAMES = ("logits",)


def mlp() -> Any:
    """The example MLP (``input [batch, 16] -> logits [batch, 4]``) as a ``torch.nn.Module``."""
    try:
        import torch
    except ImportError as e:
        raise MissingDependencyError(
            "PyTorch is not installed", "install the torch extra: pip install 'tritongen[torch]'"
        ) from e
    from onnx import numpy_helper

    from tritongen.examples.models import mlp as onnx_mlp

    weights = {t.name: numpy_helper.to_array(t) for t in onnx_mlp().graph.initializer}
    first = torch.nn.Linear(int(weights["w1"].shape[0]), int(weights["w1"].shape[1]))
    second = torch.nn.Linear(int(weights["w2"].shape[0]), int(weights["w2"].shape[1]))
    with torch.no_grad():
        first.weight.copy_(torch.from_numpy(weights["w1"].T.copy()))
        first.bias.copy_(torch.from_numpy(weights["b1"].copy()))
        second.weight.copy_(torch.from_numpy(weights["w2"].T.copy()))
        second.bias.copy_(torch.from_numpy(weights["b2"].copy()))
    return torch.nn.Sequential(first, torch.nn.ReLU(), second).eval()
