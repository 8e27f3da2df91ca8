"""A Python-backend model that sleeps a known sequence of durations, for measurement-fidelity tests.

It can also pause once per burst of traffic (``pause_s`` after ``pause_after_s`` seconds of
requests; 2 s without a request starts a new burst): a server that stalls in the middle of a
load run, at a time the run can predict.
"""

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

BURST_GAP_S = 2.0  # this long without a request starts a new burst of traffic


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        text = config["parameters"]["durations_ms"]["string_value"]
        self.durations = [float(v) / 1000 for v in text.split(",")]
        self.next = 0
        parameters = config["parameters"]
        self.pause_s = float(parameters.get("pause_s", {}).get("string_value", "0"))
        self.pause_after_s = float(parameters.get("pause_after_s", {}).get("string_value", "0"))
        self.burst_start = self.last_request = None
        self.paused = False
        # Every request's real time in execute (µs): sleeps overshoot, so this is the truth.
        self.record = open(config["parameters"]["record_path"]["string_value"], "a", buffering=1)

    def execute(self, requests):
        responses = []
        for request in requests:
            start = time.perf_counter()
            x = pb_utils.get_input_tensor_by_name(request, "x").as_numpy()
            delay = self.durations[self.next % len(self.durations)]
            if self.pause_s:
                delay += self._pause(time.monotonic())
            self.next += 1
            if delay > 0:
                time.sleep(delay)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("y", x.copy())]))
            self.record.write(f"{(time.perf_counter() - start) * 1e6:.1f}\\n")
            self.last_request = time.monotonic()
        return responses

    def _pause(self, now):
        # The stall for the first request at least pause_after_s into a burst, else 0.
        if self.last_request is None or now - self.last_request > BURST_GAP_S:
            self.burst_start, self.paused = now, False
        if self.paused or now - self.burst_start < self.pause_after_s:
            return 0.0
        self.paused = True
        return self.pause_s
"""


RECORD_FILE = "durations_us.log"


def durations_ms(base_ms: float, step_ms: float, count: int = 100, seed: int = 1) -> list[float]:
    """A shuffled cycle of ``count`` evenly spaced durations, so any stretch of it is representative."""
    values = [round(base_ms + step_ms * k, 3) for k in range(count)]
    random.Random(seed).shuffle(values)
    return values


def write_sleep_model(
    model_dir: Path, durations: list[float], pause_s: float = 0.0, pause_after_s: float = 0.0
) -> Path:
    """A model that answers each request after the next duration of the cycle (no batching, 1 instance).

    With ``pause_s``, the first request ``pause_after_s`` or more into a burst of traffic
    also sleeps ``pause_s`` (once per burst); one instance, so every request behind it waits.
    """
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
            **({"pause_s": str(pause_s), "pause_after_s": str(pause_after_s)} if pause_s else {}),
        },
    )
    (model_dir / "config.pbtxt").write_text(render_config(config))
    return model_dir


SLEEP_MODELS = {
    # 2.0, 2.2, ... 21.8 ms: P50 11.8-12.0 ms, P99 21.6 ms.
    "sleep_cycle": durations_ms(2.0, 0.2),
    # A constant 12 ms: the fixed overhead of the path (client, HTTP, server, Python backend).
    "sleep_const": [12.0],
    # An identical copy, and a copy that sleeps 50% longer: what interleaved rounds must tell apart.
    "sleep_const_copy": [12.0],
    "sleep_const_slow": [18.0],
}
PAUSE_MODEL = "sleep_pause"
"""Answers at once, but stalls PAUSE_S once, PAUSE_AFTER_S into each burst of traffic."""
PAUSE_S, PAUSE_AFTER_S = 1.0, 3.0


def write_pause_model(model_dir: Path) -> Path:
    """The ``sleep_pause`` model: no sleep per request, one ``PAUSE_S`` stall per burst."""
    return write_sleep_model(model_dir, [0.0], pause_s=PAUSE_S, pause_after_s=PAUSE_AFTER_S)
