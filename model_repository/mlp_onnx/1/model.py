"""Triton Python-backend model serving ``model.onnx`` with ONNX Runtime (written by tritongen).

Batching across requests lives in ``tritongen_runtime.py`` beside this file. The
``intra_op_thread_count`` config parameter sets ONNX Runtime's threads per instance.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tritongen_runtime import Array, BatchingModel


def _as_ort_input(array: Array) -> Array:
    if array.dtype == np.object_:  # Triton BYTES arrive as bytes; ONNX Runtime wants str
        decode = np.vectorize(lambda v: v.decode() if isinstance(v, bytes) else v, otypes=[object])
        decoded: Array = decode(array)
        return decoded
    return array


class TritonPythonModel(BatchingModel):
    """ONNX Runtime session behind Triton's Python backend."""

    def load(self, args: dict[str, Any]) -> None:
        """Create the session: the CUDA provider on GPU instances (refused where it is missing), else CPU."""
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = self.threads
        options.inter_op_num_threads = 1
        providers: list[Any] = ["CPUExecutionProvider"]
        if self.on_gpu and "CUDAExecutionProvider" in ort.get_available_providers():
            providers = [("CUDAExecutionProvider", {"device_id": self.device_id}), "CPUExecutionProvider"]
        path = os.path.join(self.version_dir, "model.onnx")
        self.session = ort.InferenceSession(path, sess_options=options, providers=providers)
        if self.on_gpu and "CUDAExecutionProvider" not in self.session.get_providers():
            raise RuntimeError(
                "KIND_GPU instance, but ONNX Runtime here has no working CUDAExecutionProvider "
                f"(it has {', '.join(ort.get_available_providers())}): set the instance kind to KIND_CPU, "
                "or serve the model with the container target"
            )

    def run(self, feed: dict[str, Array]) -> list[Array]:
        """Run one batch."""
        outputs: list[Array] = self.session.run(
            self.output_names, {name: _as_ort_input(value) for name, value in feed.items()}
        )
        return outputs

    def finalize(self) -> None:
        """Release the session."""
        self.session = None
