"""An ensemble and a BLS model for the composing-model tests, built on the repository's ``mlp_onnx``.

- ``pre_scale``: a Python-backend preprocessing step, ``y = 2 * x`` (FP32 [16], batched, dynamic
  batching, one instance): cheap, and the composing model ``tune --composing`` tunes.
- ``ens_pre``: an ensemble ``x -> pre_scale -> mlp_onnx -> logits``.
- ``bls_call``: a Python-backend model that calls another model through BLS
  (``pb_utils.InferenceRequest(...).exec()``) with its ``x`` and answers with that model's first
  output. The optional BYTES input ``MODEL_NAME`` names the model to call; when it is absent or
  empty, the model named by the config parameter ``default_model`` (``pre_scale``) is called.
  Any model that takes ``x`` FP32 [16] (batched) can be called: ``pre_scale`` and ``ens_pre``.
"""

from __future__ import annotations

from pathlib import Path

from tritongen.triton.model_config import (
    DynamicBatching,
    InstanceGroup,
    ModelConfig,
    ModelInput,
    ModelOutput,
)
from tritongen.triton.render import render_config

PRE_MODEL = "pre_scale"
ENSEMBLE_MODEL = "ens_pre"
BLS_MODEL = "bls_call"
STEP_MODEL = "mlp_onnx"
"""The ensemble's second step: a model of the committed example repository."""
MAX_BATCH = 8

PRE_PY = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "x").as_numpy()
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("y", (2 * x).astype(np.float32))]))
        return responses
"""

BLS_PY = """
import json

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.default_model = config["parameters"]["default_model"]["string_value"]

    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "x")
            name = self.default_model
            given = pb_utils.get_input_tensor_by_name(request, "MODEL_NAME")
            if given is not None:
                value = given.as_numpy().reshape(-1)[0]
                value = value.decode() if isinstance(value, bytes) else str(value)
                name = value or name
            called = pb_utils.InferenceRequest(
                model_name=name, inputs=[pb_utils.Tensor("x", x.as_numpy())], requested_output_names=[]
            ).exec()
            if called.has_error():
                responses.append(pb_utils.InferenceResponse(error=pb_utils.TritonError(called.error().message())))
                continue
            first = called.output_tensors()[0]
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("y", first.as_numpy())]))
        return responses
"""


def _python_model(model_dir: Path, code: str, config: ModelConfig) -> Path:
    (model_dir / "1").mkdir(parents=True)
    (model_dir / "1" / "model.py").write_text(code)
    (model_dir / "config.pbtxt").write_text(render_config(config))
    return model_dir


def write_pre_model(model_dir: Path) -> Path:
    """``pre_scale``: ``y = 2 * x``, batched up to ``MAX_BATCH``, dynamic batching, one CPU instance."""
    config = ModelConfig(
        name=model_dir.name,
        backend="python",
        max_batch_size=MAX_BATCH,
        input=[ModelInput(name="x", data_type="TYPE_FP32", dims=[16])],
        output=[ModelOutput(name="y", data_type="TYPE_FP32", dims=[16])],
        dynamic_batching=DynamicBatching(max_queue_delay_microseconds=0),
        instance_group=[InstanceGroup(count=1, kind="KIND_CPU")],
    )
    return _python_model(model_dir, PRE_PY, config)


def ensemble_text(name: str, pre: str = PRE_MODEL, step: str = STEP_MODEL) -> str:
    """The ensemble's config: ``x -> pre -> scaled -> step -> logits``."""
    scheduling = (
        "ensemble_scheduling {\n"
        f'  step {{ model_name: "{pre}" model_version: -1 '
        'input_map { key: "x" value: "x" } output_map { key: "y" value: "scaled" } }\n'
        f'  step {{ model_name: "{step}" model_version: -1 '
        'input_map { key: "input" value: "scaled" } output_map { key: "logits" value: "logits" } }\n'
        "}"
    )
    config = ModelConfig(
        name=name,
        platform="ensemble",
        max_batch_size=MAX_BATCH,
        input=[ModelInput(name="x", data_type="TYPE_FP32", dims=[16])],
        output=[ModelOutput(name="logits", data_type="TYPE_FP32", dims=[4])],
    )
    return render_config(config) + "\n" + scheduling + "\n"


def write_ensemble(model_dir: Path) -> Path:
    """``ens_pre``: the ensemble of ``pre_scale`` then ``mlp_onnx`` (an empty version directory)."""
    (model_dir / "1").mkdir(parents=True)
    (model_dir / "config.pbtxt").write_text(ensemble_text(model_dir.name))
    return model_dir


def write_bls_model(model_dir: Path, default_model: str = PRE_MODEL) -> Path:
    """``bls_call``: calls the model named by ``MODEL_NAME`` (default ``default_model``) through BLS."""
    config = ModelConfig(
        name=model_dir.name,
        backend="python",
        max_batch_size=MAX_BATCH,
        input=[
            ModelInput(name="x", data_type="TYPE_FP32", dims=[16]),
            ModelInput(name="MODEL_NAME", data_type="TYPE_STRING", dims=[1], optional=True),
        ],
        output=[ModelOutput(name="y", data_type="TYPE_FP32", dims=[-1])],
        instance_group=[InstanceGroup(count=1, kind="KIND_CPU")],
        parameters={"default_model": default_model},
    )
    return _python_model(model_dir, BLS_PY, config)


def write_composing_models(repo: Path) -> None:
    """``pre_scale``, ``ens_pre`` and ``bls_call`` into ``repo`` (which must hold ``mlp_onnx``)."""
    write_pre_model(repo / PRE_MODEL)
    write_ensemble(repo / ENSEMBLE_MODEL)
    write_bls_model(repo / BLS_MODEL)
