"""Python-backend models whose requests fail on purpose: one raises, one never answers (until released).

They are written into the shared server's repository and loaded by the test that needs them
(the server runs in explicit model-control mode), then unloaded.
"""

from __future__ import annotations

from pathlib import Path

RAISING_MODEL = "raises_name_error"
HUNG_MODEL = "never_answers"

RAISING_PY = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for _ in requests:
            try:
                undefined_on_purpose
            except NameError as e:  # each request fails with it (a raise out of execute leaves
                # the bundled server unable to unload the model once it has had many requests)
                error = pb_utils.TritonError(f"{type(e).__name__}: {e}")
                responses.append(pb_utils.InferenceResponse(output_tensors=[], error=error))
        return responses
"""

HUNG_PY = """
import json
import os
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.release = config["parameters"]["release_path"]["string_value"]

    def execute(self, requests):
        while not os.path.exists(self.release):  # never answers until the test releases it
            time.sleep(0.05)
        inputs = [pb_utils.get_input_tensor_by_name(r, "x").as_numpy() for r in requests]
        return [pb_utils.InferenceResponse([pb_utils.Tensor("y", x)]) for x in inputs]
"""

CONFIG = """name: "{name}"
backend: "python"
max_batch_size: 0
input [{{ name: "x" data_type: TYPE_FP32 dims: [4] }}]
output [{{ name: "y" data_type: TYPE_FP32 dims: [4] }}]
instance_group [{{ count: 1 kind: KIND_CPU }}]
{parameters}"""


def write_model(repo: Path, name: str, code: str, parameters: str = "") -> Path:
    """A one-instance Python model ``name`` in ``repo`` running ``code`` (x: FP32 [4] -> y)."""
    folder = repo / name
    (folder / "1").mkdir(parents=True, exist_ok=True)
    (folder / "1" / "model.py").write_text(code)
    (folder / "config.pbtxt").write_text(CONFIG.format(name=name, parameters=parameters))
    return folder


def write_raising_model(repo: Path) -> Path:
    """A model whose every request fails with the ``NameError`` its code raises (in Triton's JSON error)."""
    return write_model(repo, RAISING_MODEL, RAISING_PY)


def write_hung_model(repo: Path, release: Path) -> Path:
    """A model that answers nothing until ``release`` exists."""
    parameters = f'parameters {{ key: "release_path" value {{ string_value: "{release}" }} }}\n'
    return write_model(repo, HUNG_MODEL, HUNG_PY, parameters)
