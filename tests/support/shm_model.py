"""A Python-backend model for the shared-memory tests: outputs that show where the inputs went.

``shm_echo`` batches (up to 4 rows) and has two inputs and two outputs: ``y = x + 1`` (FP32,
16 per row, a size known from the metadata) and ``z = n`` (INT32, a dynamic dim, so its
size is known only with ``--output-shared-memory-size``).
"""

from __future__ import annotations

from pathlib import Path

from tritongen.triton.model_config import InstanceGroup, ModelConfig, ModelInput, ModelOutput
from tritongen.triton.render import render_config

SHM_MODEL = "shm_echo"

MODEL_PY = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "x").as_numpy()
            n = pb_utils.get_input_tensor_by_name(request, "n").as_numpy()
            outputs = [pb_utils.Tensor("y", (x + 1).astype(np.float32)), pb_utils.Tensor("z", n.copy())]
            responses.append(pb_utils.InferenceResponse(outputs))
        return responses
"""


def write_shm_model(model_dir: Path) -> Path:
    """Write ``shm_echo`` into ``model_dir``."""
    (model_dir / "1").mkdir(parents=True)
    (model_dir / "1" / "model.py").write_text(MODEL_PY)
    config = ModelConfig(
        name=model_dir.name,
        backend="python",
        max_batch_size=4,
        input=[
            ModelInput(name="x", data_type="TYPE_FP32", dims=[16]),
            ModelInput(name="n", data_type="TYPE_INT32", dims=[-1]),
        ],
        output=[
            ModelOutput(name="y", data_type="TYPE_FP32", dims=[16]),
            ModelOutput(name="z", data_type="TYPE_INT32", dims=[-1]),
        ],
        instance_group=[InstanceGroup(count=1, kind="KIND_CPU")],
    )
    (model_dir / "config.pbtxt").write_text(render_config(config))
    return model_dir
