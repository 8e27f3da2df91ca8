"""A Python-backend model with string (BYTES) inputs that records every request it receives.

``string_echo`` takes ``text`` (strings, any count per row), ``tag`` (one string per row)
and ``scale`` (one FP32 per row), and may be sent ``note`` (one string per row, an input the
config marks optional); it answers ``length`` (each string's length in bytes
times ``scale``) and ``echo`` (``tag``). Every request appends one JSON line to its record
file: the strings and values it carried, so a test can tell which data the server saw.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tritongen.triton.model_config import InstanceGroup, ModelConfig, ModelInput, ModelOutput
from tritongen.triton.render import render_config

STRING_MODEL = "string_echo"
RECORD_FILE = "requests.jsonl"

MODEL_PY = """
import json

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.record = open(config["parameters"]["record_path"]["string_value"], "a", buffering=1)

    def execute(self, requests):
        responses = []
        for request in requests:
            text = pb_utils.get_input_tensor_by_name(request, "text").as_numpy()
            tag = pb_utils.get_input_tensor_by_name(request, "tag").as_numpy()
            scale = pb_utils.get_input_tensor_by_name(request, "scale").as_numpy()
            note = pb_utils.get_input_tensor_by_name(request, "note")
            lengths = np.vectorize(len, otypes=[np.float32])(text) * scale
            seen = {
                "text": [[item.decode("utf-8", "replace") for item in row] for row in text],
                "tag": [item.decode("utf-8", "replace") for item in tag.reshape(-1)],
                "scale": scale.reshape(-1).tolist(),
            }
            if note is not None:
                seen["note"] = [item.decode("utf-8", "replace") for item in note.as_numpy().reshape(-1)]
            self.record.write(json.dumps(seen) + "\\n")
            responses.append(pb_utils.InferenceResponse([
                pb_utils.Tensor("length", lengths.astype(np.float32)),
                pb_utils.Tensor("echo", tag),
            ]))
        return responses
"""


def write_string_model(model_dir: Path) -> Path:
    """The ``string_echo`` model (batches up to 4 rows, no dynamic batching: one record per request)."""
    (model_dir / "1").mkdir(parents=True)
    (model_dir / "1" / "model.py").write_text(MODEL_PY)
    config = ModelConfig(
        name=model_dir.name,
        backend="python",
        max_batch_size=4,
        input=[
            ModelInput(name="text", data_type="TYPE_STRING", dims=[-1]),
            ModelInput(name="tag", data_type="TYPE_STRING", dims=[1]),
            ModelInput(name="scale", data_type="TYPE_FP32", dims=[1]),
            ModelInput(name="note", data_type="TYPE_STRING", dims=[1], optional=True),
        ],
        output=[
            ModelOutput(name="length", data_type="TYPE_FP32", dims=[-1]),
            ModelOutput(name="echo", data_type="TYPE_STRING", dims=[1]),
        ],
        instance_group=[InstanceGroup(count=1, kind="KIND_CPU")],
        parameters={"record_path": str((model_dir / RECORD_FILE).resolve())},
    )
    (model_dir / "config.pbtxt").write_text(render_config(config))
    return model_dir


def recorded(model_dir: Path, since: int = 0) -> list[dict[str, Any]]:
    """The requests the model recorded, from line ``since`` on (a line still being written left out)."""
    path = model_dir / RECORD_FILE
    if not path.exists():
        return []
    text = path.read_text()
    lines = text.splitlines(keepends=True)[since:]
    lines = [line for line in lines if line.endswith("\n")]
    return [json.loads(line) for line in lines if line.strip()]
