"""Running a built plan in-process on the GPU (TensorRT with CUDA tensors from torch)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from tritongen.convert.artifact import Array, Runner
from tritongen.convert.tensorrt.builder import import_tensorrt
from tritongen.convert.tensorrt.commands import PLAN_FILE
from tritongen.errors import ConversionError
from tritongen.sources.signature import TRITON_TO_NUMPY, Signature


def tensorrt_runner(version_dir: Path, signature: Signature) -> Runner | None:
    """Run ``<version_dir>/model.plan`` in-process (TensorRT + CUDA torch); None where this machine cannot."""
    trt = import_tensorrt()
    plan = version_dir / PLAN_FILE
    if trt is None or not plan.is_file():
        return None
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    engine = trt.Runtime(trt.Logger(trt.Logger.WARNING)).deserialize_cuda_engine(plan.read_bytes())
    if engine is None:
        return None
    return _context_runner(torch, engine.create_execution_context(), signature)


def _context_runner(torch: Any, context: Any, signature: Signature) -> Runner:
    """A :data:`Runner` over one execution context: inputs copied to the GPU, outputs back."""

    def run(inputs: dict[str, Array]) -> list[Array]:
        keep = []
        for spec in signature.inputs:
            tensor = torch.from_numpy(np.ascontiguousarray(inputs[spec.name])).cuda()
            keep.append(tensor)
            context.set_input_shape(spec.name, tuple(tensor.shape))
            context.set_tensor_address(spec.name, tensor.data_ptr())
        outputs = []
        for spec in signature.outputs:
            dtype = torch.from_numpy(np.empty(0, dtype=TRITON_TO_NUMPY[spec.data_type])).dtype
            tensor = torch.empty(tuple(context.get_tensor_shape(spec.name)), dtype=dtype, device="cuda")
            context.set_tensor_address(spec.name, tensor.data_ptr())
            outputs.append(tensor)
        stream = torch.cuda.current_stream()
        if not context.execute_async_v3(stream.cuda_stream):
            raise ConversionError("TensorRT could not run the plan", "check the inputs against the profiles")
        stream.synchronize()
        return [tensor.cpu().numpy() for tensor in outputs]

    return run
