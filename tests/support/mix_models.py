"""Two identical Python-backend models whose latency is fixed by their queue delay, for mixed load tests.

Each model batches (``max_batch_size`` 4) with a long ``max_queue_delay`` and answers at
once: every request waits in the queue until the delay since the first request of its
batch is over (a batch never fills: at most three requests are in flight per model). So
one stream and three streams see the same latency, and a model's throughput is the number
of its in-flight streams divided by that latency: a 3:1 split of the streams gives a 3:1
ratio of throughput, whatever the machine's speed. One instance each: cheap to load.
"""

from __future__ import annotations

from pathlib import Path

from tritongen.triton.model_config import DynamicBatching, InstanceGroup, ModelConfig, ModelInput, ModelOutput
from tritongen.triton.render import render_config

MODEL_PY = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "x").as_numpy()
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("y", x.copy())]))
        return responses
"""

HOLD_MODELS = ("mix_hold_a", "mix_hold_b")
HOLD_US = 20_000
"""The queue delay: each request's latency is this plus the path's fixed overhead."""


def write_hold_model(model_dir: Path) -> Path:
    """A batching model that holds every request ``HOLD_US`` in its queue, then echoes ``x`` as ``y``."""
    (model_dir / "1").mkdir(parents=True)
    (model_dir / "1" / "model.py").write_text(MODEL_PY)
    config = ModelConfig(
        name=model_dir.name,
        backend="python",
        max_batch_size=4,
        input=[ModelInput(name="x", data_type="TYPE_FP32", dims=[4])],
        output=[ModelOutput(name="y", data_type="TYPE_FP32", dims=[4])],
        dynamic_batching=DynamicBatching(max_queue_delay_microseconds=HOLD_US),
        instance_group=[InstanceGroup(count=1, kind="KIND_CPU")],
    )
    (model_dir / "config.pbtxt").write_text(render_config(config))
    return model_dir


def write_hold_models(repo: Path) -> None:
    """Both hold models into ``repo``."""
    for name in HOLD_MODELS:
        write_hold_model(repo / name)
