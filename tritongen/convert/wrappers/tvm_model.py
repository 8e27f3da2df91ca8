"""Triton Python-backend model serving ``tvm_model.so`` (a TVM Relax library) (written by tritongen).

``tvm_metadata.json`` beside this file names the libraries: ``tvm_model.so`` takes any
batch size and dynamic dim; ``tvm_model_tuned.so``, when present, was tuned for one static
shape and runs requests of exactly that shape. Batching across requests lives in
``tritongen_runtime.py``. ``intra_op_thread_count`` sets TVM's threads per instance.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tritongen_runtime import Array, BatchingModel

ALIGNMENT = 64  # TVM takes a numpy array without copying only at this alignment


def aligned_copy(array: Array, dtype: np.dtype[Any]) -> Array:
    """A C-contiguous, writable, 64-byte-aligned copy of ``array`` as ``dtype``."""
    nbytes = max(1, array.size * dtype.itemsize)
    raw = np.empty(nbytes + ALIGNMENT, dtype=np.uint8)
    offset = (-raw.ctypes.data) % ALIGNMENT
    out: Array = raw[offset : offset + array.size * dtype.itemsize].view(dtype).reshape(array.shape)
    np.copyto(out, array, casting="unsafe")
    return out


def shareable(array: Array, dtype: np.dtype[Any]) -> bool:
    """Whether TVM can borrow ``array``'s memory through DLPack as it is."""
    return bool(
        array.dtype == dtype
        and array.flags.c_contiguous
        and array.flags.writeable
        and array.ctypes.data % ALIGNMENT == 0
    )


class TritonPythonModel(BatchingModel):
    """A TVM Relax virtual machine behind Triton's Python backend."""

    def load(self, args: dict[str, Any]) -> None:
        """Load the libraries on the instance's device, with this instance's thread count."""
        os.environ["TVM_NUM_THREADS"] = str(self.threads)
        import tvm
        from tvm import relax

        configure = tvm.get_global_func("runtime.config_threadpool", allow_missing=True)
        if configure is not None:
            configure(1, self.threads)  # 1: the big cores, ``threads`` workers
        with open(os.path.join(self.version_dir, "tvm_metadata.json"), encoding="utf-8") as f:
            self.facts = json.load(f)
        self.tvm = tvm
        self.on_cuda = self.facts.get("device") == "cuda"
        self.device = tvm.cuda(self.device_id) if self.on_cuda else tvm.cpu(0)
        self.main = self._function(relax, self.facts["library"])
        self.dtypes = {spec["name"]: np.dtype(spec["dtype"]) for spec in self.facts["inputs"]}
        self.tuned_main: Any = None
        self.tuned_shapes: dict[str, tuple[int, ...]] = {}
        tuning = self.facts.get("tuning") or None
        if tuning:
            self.tuned_main = self._function(relax, tuning["library"])
            self.tuned_shapes = {name: tuple(shape) for name, shape in tuning["shapes"].items()}

    def _function(self, relax: Any, library: str) -> Any:
        module = self.tvm.runtime.load_module(os.path.join(self.version_dir, library))
        return relax.VirtualMachine(module, self.device)["main"]

    def _to_tvm(self, array: Array, dtype: np.dtype[Any]) -> Any:
        if self.on_cuda:
            return self.tvm.runtime.tensor(np.ascontiguousarray(array, dtype=dtype), device=self.device)
        if not shareable(array, dtype):
            array = aligned_copy(array, dtype)
        return self.tvm.runtime.from_dlpack(array)

    def run(self, feed: dict[str, Array]) -> list[Array]:
        """Run one batch; CPU outputs are returned without a copy."""
        names = [name for name in self.input_names if name in feed]
        use_tuned = self.tuned_main is not None and all(
            feed[name].shape == self.tuned_shapes.get(name) for name in names
        )
        function = self.tuned_main if use_tuned else self.main
        result = function(*(self._to_tvm(feed[name], self.dtypes[name]) for name in names))
        values = [result] if hasattr(result, "numpy") else list(result)
        if self.on_cuda:
            return [value.numpy() for value in values]
        return [np.from_dlpack(value) for value in values]

    def finalize(self) -> None:
        """Release the virtual machines."""
        self.main = None
        self.tuned_main = None
