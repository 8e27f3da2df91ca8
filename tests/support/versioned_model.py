"""A Python-backend model served in two versions that answer at different speeds: ``-x`` is measurable.

Version 1 answers at once; version 2 sleeps ``SLOW_MS`` first. ``version_policy: all`` serves both,
and the server's choice without a version is the newest, 2.
"""

from __future__ import annotations

from pathlib import Path

from tritongen.triton.model_config import (
    InstanceGroup,
    ModelConfig,
    ModelInput,
    ModelOutput,
    VersionAll,
    VersionPolicy,
)
from tritongen.triton.render import render_config

VERSIONED_MODEL = "versioned_echo"
SLOW_MS = 20.0
"""Version 2's sleep before each answer."""

MODEL_PY = """
import time

import triton_python_backend_utils as pb_utils

DELAY_S = {delay_s}


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "x").as_numpy()
            if DELAY_S:
                time.sleep(DELAY_S)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("y", x.copy())]))
        return responses
"""


def write_versioned_model(model_dir: Path) -> Path:
    """``versioned_echo``: version 1 at once, version 2 after ``SLOW_MS``; both served."""
    for version, delay_ms in (("1", 0.0), ("2", SLOW_MS)):
        (model_dir / version).mkdir(parents=True)
        (model_dir / version / "model.py").write_text(MODEL_PY.format(delay_s=delay_ms / 1000))
    config = ModelConfig(
        name=model_dir.name,
        backend="python",
        max_batch_size=0,
        input=[ModelInput(name="x", data_type="TYPE_FP32", dims=[4])],
        output=[ModelOutput(name="y", data_type="TYPE_FP32", dims=[4])],
        instance_group=[InstanceGroup(count=1, kind="KIND_CPU")],
        version_policy=VersionPolicy(all=VersionAll()),
    )
    (model_dir / "config.pbtxt").write_text(render_config(config))
    return model_dir
