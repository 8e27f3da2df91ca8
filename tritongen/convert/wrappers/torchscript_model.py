"""Triton Python-backend model serving ``model.pt`` (TorchScript) with libtorch (written by tritongen).

Batching across requests lives in ``tritongen_runtime.py`` beside this file. Inputs are
passed positionally in config order; a tuple/list output maps to the config's outputs in
order, a dict output by name. ``intra_op_thread_count`` sets torch's threads per instance.
A KIND_GPU instance runs on its CUDA device and refuses to load where torch has none.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tritongen_runtime import Array, BatchingModel


def check_cuda(torch: Any, device_id: int) -> None:
    """Refuse, in one line, a GPU instance that torch cannot place on CUDA device ``device_id``."""
    hint = "serve it on a GPU host with a CUDA build of torch, or set the instance kind to KIND_CPU"
    if torch.version.cuda is None:
        raise RuntimeError(f"KIND_GPU instance, but torch {torch.__version__} has no CUDA: {hint}")
    if not torch.cuda.is_available():
        raise RuntimeError(f"KIND_GPU instance, but torch {torch.__version__} sees no CUDA GPU: {hint}")
    count = torch.cuda.device_count()
    if device_id >= count:
        raise RuntimeError(f"KIND_GPU instance on CUDA device {device_id}, but torch sees {count}: {hint}")


class TritonPythonModel(BatchingModel):
    """A TorchScript module behind Triton's Python backend."""

    def load(self, args: dict[str, Any]) -> None:
        """Load the module on the instance's device (a GPU instance's CUDA device, else the CPU).

        Raises:
            RuntimeError: a GPU instance where torch has no CUDA or no such device.
        """
        import torch

        torch.set_num_threads(self.threads)
        with contextlib.suppress(RuntimeError):  # already set in this process
            torch.set_num_interop_threads(1)
        self.torch = torch
        self.device = torch.device("cpu")
        if self.on_gpu:
            check_cuda(torch, self.device_id)
            torch.cuda.set_device(self.device_id)
            self.device = torch.device("cuda", self.device_id)
        path = os.path.join(self.version_dir, "model.pt")
        self.module = torch.jit.load(path, map_location=self.device).eval()  # type: ignore[no-untyped-call]

    def run(self, feed: dict[str, Array]) -> list[Array]:
        """Run one batch."""
        torch = self.torch
        tensors = [torch.from_numpy(feed[name]).to(self.device) for name in self.input_names if name in feed]
        with torch.inference_mode():
            result = self.module(*tensors)
        if isinstance(result, dict):
            values = [result[name] for name in self.output_names]
        elif isinstance(result, (tuple, list)):
            values = list(result)
        else:
            values = [result]
        if len(values) != len(self.output_names):
            raise ValueError(
                f"the module returned {len(values)} outputs, the config declares {len(self.output_names)}"
            )
        return [value.detach().cpu().numpy() for value in values]

    def finalize(self) -> None:
        """Release the module."""
        self.module = None
