"""Models whose config Triton completes itself: a Python model without config.pbtxt, and friends.

``auto_sleep`` has no config.pbtxt: Triton takes the Python backend from ``1/model.py`` and
its ``auto_complete_config`` declares one FP32 input ``x`` [4], one output ``y`` = 2x, and
max_batch_size 8, without dynamic batching. Each execution sleeps 30 ms however many
requests it holds, so dynamic batching (which the auto-completed config lacks) gains
several times the throughput at concurrency 8: a gain no noise can hide.
"""

from __future__ import annotations

from pathlib import Path

AUTO_MODEL = "auto_sleep"
EXECUTION_S = 0.03

AUTO_MODEL_PY = f"""
import time

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    @staticmethod
    def auto_complete_config(auto_complete_model_config):
        auto_complete_model_config.add_input({{"name": "x", "data_type": "TYPE_FP32", "dims": [4]}})
        auto_complete_model_config.add_output({{"name": "y", "data_type": "TYPE_FP32", "dims": [4]}})
        auto_complete_model_config.set_max_batch_size(8)
        return auto_complete_model_config

    def execute(self, requests):
        time.sleep({EXECUTION_S})  # once per execution, however many requests it holds
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "x").as_numpy()
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("y", x * 2)]))
        return responses
"""

# The same model without auto_complete_config: Triton serves it with no inputs or outputs.
PLAIN_MODEL_PY = (
    AUTO_MODEL_PY.split("    @staticmethod")[0]
    + AUTO_MODEL_PY.split("return auto_complete_model_config\n")[1]
)

# Triton's auto-complete raises here: the directory looks right, and the server refuses it.
FAILING_MODEL_PY = AUTO_MODEL_PY.replace(
    "auto_complete_model_config.set_max_batch_size(8)", 'raise ValueError("no shapes known")'
)

MINIMAL_CONFIG = 'backend: "python"\n'
"""The usual partial config of a Python model: the backend, and the rest from auto_complete_config."""

ENSEMBLE_CONFIG = """name: "{name}"
platform: "ensemble"
max_batch_size: 8
input [{{ name: "x" data_type: TYPE_FP32 dims: [ 4 ] }}]
output [{{ name: "y" data_type: TYPE_FP32 dims: [ 4 ] }}]
ensemble_scheduling {{
  step [
    {{ model_name: "{first}" model_version: -1
       input_map {{ key: "x" value: "x" }} output_map {{ key: "y" value: "mid" }} }},
    {{ model_name: "{second}" model_version: -1
       input_map {{ key: "x" value: "mid" }} output_map {{ key: "y" value: "y" }} }}
  ]
}}
"""


def write_auto_model(model_dir: Path, config: str | None = None, model_py: str = AUTO_MODEL_PY) -> Path:
    """A Python model whose ``auto_complete_config`` declares its tensors; ``config``: a config.pbtxt text."""
    (model_dir / "1").mkdir(parents=True)
    (model_dir / "1" / "model.py").write_text(model_py)
    if config is not None:
        (model_dir / "config.pbtxt").write_text(config)
    return model_dir


def write_ensemble(model_dir: Path, first: str, second: str) -> Path:
    """An ensemble (no tritongen metadata) running ``first`` then ``second``: y = 4x for two doublers."""
    (model_dir / "1").mkdir(parents=True)
    (model_dir / "config.pbtxt").write_text(
        ENSEMBLE_CONFIG.format(name=model_dir.name, first=first, second=second)
    )
    return model_dir


def write_refused_and_doubtful(repo: Path) -> dict[str, str]:
    """Directories Triton refuses or serves uselessly, each with the rule lint reports on it."""
    (repo / "empty_dir").mkdir(parents=True)
    (repo / "unknown_file" / "1").mkdir(parents=True)
    (repo / "unknown_file" / "1" / "model.bin").write_bytes(b"weights")
    (repo / "no_version").mkdir()
    (repo / "no_version" / "model.py").write_text(PLAIN_MODEL_PY)
    write_auto_model(
        repo / "broken_py", model_py="class TritonPythonModel:\n    def execute(self, requests)\n"
    )
    write_auto_model(repo / "plain_py", model_py=PLAIN_MODEL_PY)
    return {
        "empty_dir": "autocomplete.no-backend",
        "unknown_file": "autocomplete.no-backend",
        "no_version": "autocomplete.no-backend",
        "broken_py": "autocomplete.python-syntax",
        "plain_py": "autocomplete.python-no-io",  # a warning: Triton loads it, with no tensors
    }
