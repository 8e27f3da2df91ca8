"""A TorchScript model directory for the TorchScript wrapper (built by hand until convert makes them)."""

from __future__ import annotations

from pathlib import Path

from tritongen.convert.wrappers import write_wrapper
from tritongen.triton.model_config import DynamicBatching, InstanceGroup, ModelConfig, ModelInput, ModelOutput
from tritongen.triton.render import render_config


def write_torchscript_mlp(model_dir: Path) -> Path:
    """Trace a small MLP into ``model_dir/1/model.pt`` with a config for the Python backend."""
    import torch

    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).eval()
    version = model_dir / "1"
    version.mkdir(parents=True)
    torch.jit.trace(module, torch.zeros(1, 16)).save(str(version / "model.pt"))
    write_wrapper("torchscript_model.py", version)
    config = ModelConfig(
        name=model_dir.name,
        backend="python",
        max_batch_size=16,
        input=[ModelInput(name="input", data_type="TYPE_FP32", dims=[16])],
        output=[ModelOutput(name="logits", data_type="TYPE_FP32", dims=[4])],
        dynamic_batching=DynamicBatching(max_queue_delay_microseconds=1000),
        instance_group=[InstanceGroup(count=1, kind="KIND_CPU")],
        parameters={"intra_op_thread_count": "1"},
    )
    (model_dir / "config.pbtxt").write_text(render_config(config))
    return model_dir
