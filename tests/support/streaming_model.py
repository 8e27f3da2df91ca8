"""A decoupled (streaming) Python-backend model that follows a plan sent with each request.

The request's ``plan`` input (INT32, 4 values) says what to stream: ``[responses, first_ms,
gap_ms, final]``. The model sends ``responses`` responses, the first ``first_ms`` after the
request arrived and then one every ``gap_ms`` (each due at a fixed time from the request's
arrival, so a late wake-up does not shift the ones after it), then the final-response flag
on its own. With ``final`` 0 it never sends that flag while the client waits: it holds the
request until the client cancels it (or ``HOLD_CAP_S`` passes, so that a server shutting
down is not kept waiting).

Each request is streamed from a thread of its own, so requests in flight overlap as they
would on a real streaming model. The model writes one line per request to ``RECORD_FILE``
in its directory: when it really sent each response, in µs from the request's arrival in
``execute`` (sleeps overshoot; on a busy machine, by more than the plan's tolerance).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tritongen.triton.model_config import InstanceGroup, ModelConfig, ModelInput, ModelOutput
from tritongen.triton.render import render_config

STREAMING_MODEL = "stream_plan"
HOLD_CAP_S = 10.0
RECORD_FILE = "sends_us.log"

MODEL_PY = """
import json
import threading
import time

import numpy as np
import triton_python_backend_utils as pb_utils

HOLD_CAP_S = {hold_cap_s!r}


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.record = open(config["parameters"]["record_path"]["string_value"], "a", buffering=1)
        self.lock = threading.Lock()

    def execute(self, requests):
        for request in requests:
            plan = pb_utils.get_input_tensor_by_name(request, "plan").as_numpy().reshape(-1)
            sender = request.get_response_sender()
            steps = [int(v) for v in plan[:4]]
            args = (sender, steps, time.perf_counter())
            threading.Thread(target=self._stream, args=args, daemon=True).start()
        return None

    def _stream(self, sender, plan, start):
        count, first_ms, gap_ms, final = plan
        sent = []
        for index in range(max(count, 0)):
            due = start + (first_ms + index * gap_ms) / 1000
            wait = due - time.perf_counter()
            if wait > 0:
                time.sleep(wait)
            if sender.is_cancelled():
                break
            output = pb_utils.Tensor("index", np.array([index], dtype=np.int32))
            sent.append(f"{{(time.perf_counter() - start) * 1e6:.1f}}")
            sender.send(pb_utils.InferenceResponse([output]))
        with self.lock:
            self.record.write(",".join(sent) + "\\n")
        if not final:
            deadline = time.monotonic() + HOLD_CAP_S
            while time.monotonic() < deadline and not sender.is_cancelled():
                time.sleep(0.05)
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
"""


def write_streaming_model(model_dir: Path) -> Path:
    """The ``stream_plan`` model: decoupled, no batching, one instance (requests overlap in threads)."""
    (model_dir / "1").mkdir(parents=True)
    (model_dir / "1" / "model.py").write_text(MODEL_PY.format(hold_cap_s=HOLD_CAP_S))
    config = ModelConfig(
        name=model_dir.name,
        backend="python",
        max_batch_size=0,
        input=[ModelInput(name="plan", data_type="TYPE_INT32", dims=[4])],
        output=[ModelOutput(name="index", data_type="TYPE_INT32", dims=[1])],
        instance_group=[InstanceGroup(count=1, kind="KIND_CPU")],
        parameters={"record_path": str((model_dir / RECORD_FILE).resolve())},
        passthrough="model_transaction_policy {\n  decoupled: true\n}",
    )
    (model_dir / "config.pbtxt").write_text(render_config(config))
    return model_dir


def write_plan(path: Path, responses: int, first_ms: int, gap_ms: int, final: bool = True) -> Path:
    """An ``--input-data`` .npz whose every request asks for this stream."""
    np.savez(path, plan=np.array([responses, first_ms, gap_ms, int(final)], dtype=np.int32))
    return path
