"""Triton Python-backend model serving TVM Relax libraries (written by tritongen).

``tvm_metadata.json`` beside this file names the libraries: ``tvm_model.so`` takes any
shape (the symbolic library); each ``tvm_bucket_<dims>.so`` was compiled, and maybe tuned,
for one static shape (a bucket). A request runs on the smallest bucket that holds it:
extra batch rows repeat a real row, a dim declared paddable is padded with zeros (its
mask input is 0 there), and the outputs are sliced back. A request no bucket holds runs
on the symbolic library (a warning, once, in the server log), or is refused when the
buckets are strict. Batching across requests lives in ``tritongen_runtime.py``;
``intra_op_thread_count`` sets TVM's threads per instance. A library built for CUDA
runs on the instance's CUDA device; a KIND_GPU instance of a CPU-built library, or a
CUDA library where TVM sees no such GPU, refuses to load.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tritongen_runtime import Array, BatchingModel, pb_utils

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


def check_machine(path: str) -> None:
    """Refuse, in one line, a library built for another machine (``tritongen --tvm-target aarch64``).

    Reads the ELF header: ``e_machine`` at offset 18, in the byte order ``EI_DATA`` (offset 5) says.
    """
    import platform

    machines = {3: "x86", 40: "arm", 62: "x86_64", 183: "aarch64", 243: "riscv64"}
    try:
        with open(path, "rb") as f:
            header = f.read(20)
    except OSError:
        return  # loading it says what is wrong
    if len(header) < 20 or header[:4] != b"\x7fELF":
        return
    machine = int.from_bytes(header[18:20], "big" if header[5] == 2 else "little")
    built = machines.get(machine, f"e_machine {machine}")
    here = platform.machine().lower()
    here = {"amd64": "x86_64", "x64": "x86_64", "arm64": "aarch64"}.get(here, here)
    here = "arm" if here.startswith("armv") else "x86" if here in ("i386", "i486", "i586", "i686") else here
    if built != here:
        raise RuntimeError(
            f"{os.path.basename(path)} is built for {built} but this machine is {here}: convert again "
            f"with --tvm-target llvm here, or serve it on an {built} machine"
        )


def check_device(tvm: Any, facts: dict[str, Any], on_gpu: bool, device_id: int) -> Any:
    """The TVM device the libraries run on; refuse, in one line, a device they cannot use."""
    if facts.get("device") != "cuda":
        if on_gpu:
            target = facts.get("target")
            kind = target.get("kind", "llvm") if isinstance(target, dict) else "llvm"
            raise RuntimeError(
                f"KIND_GPU instance, but the TVM library is built for {kind} and runs on the CPU: "
                "convert again with --tvm-target cuda, or set the instance kind to KIND_CPU"
            )
        return tvm.cpu(0)
    device = tvm.cuda(device_id)
    if not device.exist:
        raise RuntimeError(
            f"the TVM library is built for CUDA, but TVM sees no CUDA GPU {device_id}: "
            "serve it on a GPU host, or convert again with --tvm-target llvm"
        )
    return device


def warn(message: str) -> None:
    """A warning in the server log (on stderr outside Triton)."""
    if pb_utils is not None:
        pb_utils.Logger.log_warn(message)
    else:
        sys.stderr.write(f"warning: {message}\n")


def pad_axis(array: Array, axis: int, size: int, repeat: bool) -> Array:
    """``array`` grown to ``size`` along ``axis``: with copies of its last entry, or with zeros."""
    extra = size - array.shape[axis]
    if extra <= 0:
        return array
    if repeat:
        last = np.take(array, [array.shape[axis] - 1], axis=axis)
        return np.concatenate([array, np.repeat(last, extra, axis=axis)], axis=axis)
    widths = [(0, 0)] * array.ndim
    widths[axis] = (0, extra)
    return np.pad(array, widths)


class TritonPythonModel(BatchingModel):
    """TVM Relax virtual machines (one per bucket, plus the symbolic one) behind Triton's Python backend."""

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
        self.device = check_device(tvm, self.facts, self.on_gpu, self.device_id)
        library = self.facts.get("library")
        self.main = self._function(relax, library) if library else None
        self.dtypes = {spec["name"]: np.dtype(spec["dtype"]) for spec in self.facts["inputs"]}
        self.input_dims = {spec["name"]: spec.get("shape", []) for spec in self.facts["inputs"]}
        self.output_dims = [spec.get("shape", []) for spec in self.facts["outputs"]]
        plan = self.facts.get("buckets") or {}
        self.batch_dims = set(
            plan.get("batch_dims") or ([plan["batch_dim"]] if plan.get("batch_dim") else [])
        )
        self.padded = set(plan.get("padded_dims") or plan.get("padded") or {})
        self.model_name = str(args.get("model_name") or "the TVM model")
        self.strict = bool(plan.get("strict"))
        self.buckets = [
            (lib.get("bind") or lib["dims"], lib["label"], self._function(relax, lib["library"]))
            for lib in plan.get("libraries", [])
        ]
        self.warned = False

    def _function(self, relax: Any, library: str) -> Any:
        check_machine(os.path.join(self.version_dir, library))
        module = self.tvm.runtime.load_module(os.path.join(self.version_dir, library))
        return relax.VirtualMachine(module, self.device)["main"]

    def _to_tvm(self, array: Array, dtype: np.dtype[Any]) -> Any:
        if self.on_cuda:
            return self.tvm.runtime.tensor(np.ascontiguousarray(array, dtype=dtype), device=self.device)
        if not shareable(array, dtype):
            array = aligned_copy(array, dtype)
        return self.tvm.runtime.from_dlpack(array)

    def _request_dims(self, feed: dict[str, Array]) -> dict[str, int]:
        """The value of each dynamic dim in this request, read from the inputs' shapes."""
        values: dict[str, int] = {}
        for name, array in feed.items():
            for axis, dim in enumerate(self.input_dims.get(name, [])):
                if isinstance(dim, str) and axis < array.ndim:
                    values.setdefault(dim, int(array.shape[axis]))
        return values

    def _bucket(self, dims: dict[str, int]) -> tuple[dict[str, int], Any] | None:
        """The smallest bucket holding a request with ``dims``, and its function."""
        for bucket, _label, function in self.buckets:
            fits = all(
                value <= bucket[dim] if dim in self.batch_dims or dim in self.padded else value == bucket[dim]
                for dim, value in dims.items()
                if dim in bucket
            )
            if fits:
                return bucket, function
        return None

    def _fallback(self, dims: dict[str, int]) -> Any:
        """The symbolic library for a request no bucket holds (refused under strict buckets)."""
        shape = ", ".join(f"{dim}={value}" for dim, value in sorted(dims.items()))
        largest = self.buckets[-1][1] if self.buckets else "none"
        if not self.buckets:
            return self.main
        if self.strict or self.main is None:
            raise ValueError(
                f"request ({shape}) fits no TVM bucket (largest {largest}) and the buckets are strict: "
                "convert again with a larger --tvm-buckets, or without --tvm-strict-buckets"
            )
        if not self.warned:
            self.warned = True
            warn(
                f"{self.model_name}: request ({shape}) fits no TVM bucket (largest {largest}); "
                "running it on the slower symbolic library (said once; add a bucket with --tvm-buckets)"
            )
        return self.main

    def run(self, feed: dict[str, Array]) -> list[Array]:
        """Run one batch on the smallest bucket that holds it, padded and sliced back; else symbolic."""
        names = [name for name in self.input_names if name in feed]
        dims = self._request_dims(feed)
        chosen = self._bucket(dims)
        if chosen is None:
            function = self._fallback(dims)
            bucket = dims
        else:
            bucket, function = chosen
            feed = {name: self._pad(name, feed[name], bucket) for name in names}
        result = function(*(self._to_tvm(feed[name], self.dtypes[name]) for name in names))
        values = [result] if hasattr(result, "numpy") else list(result)
        outputs = [value.numpy() for value in values] if self.on_cuda else [np.from_dlpack(v) for v in values]
        if bucket is dims:
            return outputs
        return [self._slice(index, output, dims, bucket) for index, output in enumerate(outputs)]

    def _pad(self, name: str, array: Array, bucket: dict[str, int]) -> Array:
        for axis, dim in enumerate(self.input_dims.get(name, [])):
            if isinstance(dim, str) and dim in bucket and array.shape[axis] < bucket[dim]:
                array = pad_axis(array, axis, bucket[dim], repeat=dim in self.batch_dims)
        return array

    def _slice(self, index: int, output: Array, dims: dict[str, int], bucket: dict[str, int]) -> Array:
        """``output`` of a padded run cut back to the request's own extent in every padded axis."""
        shape = self.output_dims[index] if index < len(self.output_dims) else []
        cut = []
        for axis, dim in enumerate(shape[: output.ndim]):
            padded = isinstance(dim, str) and dim in dims and dims[dim] < bucket.get(dim, 0)
            cut.append(slice(0, dims[dim] if padded else output.shape[axis]))
        return output[tuple(cut)] if cut else output

    def finalize(self) -> None:
        """Release the virtual machines."""
        self.main = None
        self.buckets = []
