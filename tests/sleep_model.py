"""A Python-backend model that sleeps a known sequence of durations, for measurement-fidelity tests."""

from __future__ import annotations

import random
from pathlib import Path

from tritongen.triton.model_config import InstanceGroup, ModelConfig, ModelInput, ModelOutput
from tritongen.triton.render import render_config

MODEL_PY = """
import json
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        text = config["parameters"]["durations_ms"]["string_value"]
        self.durations = [float(v) / 1000 for v in text.split(",")]
        self.next = 0
        # Every request's real time in execute (µs): sleeps overshoot, so this is the truth.
        self.record = open(config["parameters"]["record_path"]["string_value"], "a", buffering=1)

    def execute(self, requests):
        responses = []
        for request in requests:
            start = time.perf_counter()
            x = pb_utils.get_input_tensor_by_name(request, "x").as_numpy()
            delay = self.durations[self.next % len(self.durations)]
            self.next += 1
            if delay > 0:
                time.sleep(delay)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("y", x.copy())]))
            self.record.write(f"{(time.perf_counter() - start) * 1e6:.1f}\\n")
        return responses
"""


RECORD_FILE = "durations_us.log"


def durations_ms(base_ms: float, step_ms: float, count: int = 100, seed: int = 1) -> list[float]:
    """A shuffled cycle of ``count`` evenly spaced durations, so any stretch of it is representative."""
    values = [round(base_ms + step_ms * k, 3) for k in range(count)]
    random.Random(seed).shuffle(values)
    return values


def write_sleep_model(model_dir: Path, durations: list[float]) -> Path:
    """A model that answers each request after the next duration of the cycle (no batching, 1 instance)."""
    (model_dir / "1").mkdir(parents=True)
    (model_dir / "1" / "model.py").write_text(MODEL_PY)
    config = ModelConfig(
        name=model_dir.name,
        backend="python",
        max_batch_size=0,
        input=[ModelInput(name="x", data_type="TYPE_FP32", dims=[4])],
        output=[ModelOutput(name="y", data_type="TYPE_FP32", dims=[4])],
        instance_group=[InstanceGroup(count=1, kind="KIND_CPU")],
        parameters={
            "durations_ms": ",".join(str(d) for d in durations),
            "record_path": str((model_dir / RECORD_FILE).resolve()),
        },
    )
    (model_dir / "config.pbtxt").write_text(render_config(config))
    return model_dir


SLEEP_MODELS = {
    # 2.0, 2.2, ... 21.8 ms: P50 11.8-12.0 ms, P99 21.6 ms.
    "sleep_cycle": durations_ms(2.0, 0.2),
    # A constant 12 ms: the fixed overhead of the path (client, HTTP, server, Python backend).
    "sleep_const": [12.0],
}
