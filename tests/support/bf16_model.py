"""Triton's ``identity_bf16`` QA model as a Python-backend model: BF16 in, the same BF16 out.

The Python backend has no numpy view of BF16 (numpy has no such type), so the tensor goes
through DLPack into torch and back out unchanged.
"""

from __future__ import annotations

from pathlib import Path

from tritongen.triton.model_config import InstanceGroup, ModelConfig, ModelInput, ModelOutput
from tritongen.triton.render import render_config

BF16_MODEL = "identity_bf16"

MODEL_PY = """
import torch
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            tensor = pb_utils.get_input_tensor_by_name(request, "INPUT0")
            value = torch.utils.dlpack.from_dlpack(tensor.to_dlpack()).clone()
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor.from_dlpack("OUTPUT0", value)]))
        return responses
"""


def write_bf16_model(model_dir: Path) -> Path:
    """``identity_bf16``: ``INPUT0`` BF16 ``[-1]`` -> ``OUTPUT0``, batching up to 8 rows."""
    (model_dir / "1").mkdir(parents=True)
    (model_dir / "1" / "model.py").write_text(MODEL_PY)
    config = ModelConfig(
        name=model_dir.name,
        backend="python",
        max_batch_size=8,
        input=[ModelInput(name="INPUT0", data_type="TYPE_BF16", dims=[-1])],
        output=[ModelOutput(name="OUTPUT0", data_type="TYPE_BF16", dims=[-1])],
        instance_group=[InstanceGroup(count=1, kind="KIND_CPU")],
    )
    (model_dir / "config.pbtxt").write_text(render_config(config))
    return model_dir
