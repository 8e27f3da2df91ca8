"""Shared runtime of tritongen's Python-backend models (copied next to each ``model.py``).

Dynamic batching hands ``execute`` many requests at once. Requests whose non-batch
shapes agree are concatenated into one batch, run once, and the outputs are split back
per request; a failing group fails only its own requests. Subclasses implement
``load`` (build the engine) and ``run`` (one batch in, outputs in config order out).

Self-contained on purpose: in a container it runs without tritongen installed.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

try:  # Present only inside Triton's Python backend.
    import triton_python_backend_utils as pb_utils
except ImportError:  # pragma: no cover - imported by tests outside Triton
    pb_utils = None

THREADS_PARAMETER = "intra_op_thread_count"
SCALARS_PARAMETER = "tritongen_scalar_inputs"
"""Inputs (comma-separated) that are one value per request: requests with other values run apart."""
NOT_DLPACK_TYPES = ("TYPE_BOOL", "TYPE_STRING")
"""Config types whose tensors always use the backend's own numpy conversion (see ``DLPACK``)."""

Array = npt.NDArray[Any]
ShapeKey = tuple[tuple[int, ...] | bytes | None, ...]


def group_by_shape(shapes: Sequence[ShapeKey]) -> list[list[int]]:
    """Group request indices whose per-input non-batch shapes match, keeping arrival order."""
    groups: dict[ShapeKey, list[int]] = {}
    for index, key in enumerate(shapes):
        groups.setdefault(key, []).append(index)
    return list(groups.values())


def batch_key(feed: dict[str, Array], names: Sequence[str], scalars: Sequence[str]) -> ShapeKey:
    """What requests must share to run as one batch: each input's non-batch shape, and each scalar's value.

    A scalar input (one value per request, its first row) is handed to the model once per
    batch, so requests with other values must not share one.
    """
    shapes = tuple((feed[n].shape[1:] if n in feed else None) for n in names)
    values = tuple(feed[n].reshape(-1)[:1].tobytes() if n in feed else None for n in scalars)
    return shapes + values


def split_rows(array: Array, sizes: Sequence[int]) -> list[Array]:
    """Split ``array`` along axis 0 into consecutive chunks of ``sizes`` rows."""
    if sum(sizes) != array.shape[0]:
        raise ValueError(f"output has {array.shape[0]} rows, the requests sent {sum(sizes)}")
    offsets = np.cumsum(sizes)[:-1]
    return list(np.split(array, offsets, axis=0))


def intra_op_threads(config: dict[str, Any], cpus: int | None = None) -> int:
    """Threads per instance: the ``intra_op_thread_count`` parameter, else the CPUs shared fairly.

    Every instance runs in its own process, so ``count`` instances each get
    ``cpus // count`` threads (at least 1) instead of all fighting for every core.
    """
    params = config.get("parameters", {})
    value = params.get(THREADS_PARAMETER, {})
    text = value.get("string_value", "") if isinstance(value, dict) else str(value)
    if text.strip():
        threads = int(text)
        if threads > 0:
            return threads
    if cpus is None:
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    instances = sum(int(group.get("count", 1) or 1) for group in config.get("instance_group", [])) or 1
    return max(1, cpus // instances)


def output_tensor(name: str, value: Array) -> Any:
    """A response tensor.

    Under ``DLPACK``, numeric arrays go to the backend as torch tensors through DLPack (the
    stub renames the capsules it takes in a way numpy's own capsules refuse); otherwise by
    the backend's numpy path.
    """
    array = np.ascontiguousarray(value)
    if DLPACK and array.dtype.kind in "iuf":
        import torch

        return pb_utils.Tensor.from_dlpack(name, torch.from_numpy(array))
    return pb_utils.Tensor(name, array)


def _use_dlpack() -> bool:
    """Whether numeric tensors cross the backend through DLPack instead of its numpy conversion.

    The embedded server's stub converts with pybind11 built for numpy 1, which misreads numpy 2's
    dtypes; DLPack does not depend on numpy's layout. So: with numpy 2 (or when
    ``TRITONGEN_DLPACK=1``; ``0`` turns it off), where torch is importable for the outputs.
    """
    wanted = os.environ.get("TRITONGEN_DLPACK")
    if wanted is None:
        wanted = "1" if int(np.__version__.split(".")[0]) >= 2 else "0"
    if wanted != "1":
        return False
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


DLPACK = _use_dlpack()


class BatchingModel:
    """Base class of the generated ``TritonPythonModel`` classes."""

    def initialize(self, args: dict[str, Any]) -> None:
        """Read the config, then let the subclass load its engine."""
        self.config = json.loads(args["model_config"])
        self.max_batch_size = int(self.config.get("max_batch_size", 0))
        self.input_names = [t["name"] for t in self.config["input"]]
        self.output_names = [t["name"] for t in self.config["output"]]
        self.parameters = {k: v.get("string_value", "") for k, v in self.config.get("parameters", {}).items()}
        self.scalar_inputs = [n for n in self.parameters.get(SCALARS_PARAMETER, "").split(",") if n]
        self.threads = intra_op_threads(self.config)
        self.dlpack_inputs = {
            t["name"] for t in self.config["input"] if t.get("data_type") not in NOT_DLPACK_TYPES
        }
        self.on_gpu = args.get("model_instance_kind") == "GPU"
        self.device_id = int(args.get("model_instance_device_id", 0) or 0)
        self.version_dir = os.path.join(args["model_repository"], args["model_version"])
        self.load(args)

    def load(self, args: dict[str, Any]) -> None:
        """Build the engine (subclasses)."""
        raise NotImplementedError

    def run(self, feed: dict[str, Array]) -> list[Array]:
        """Run one batch; return the outputs in ``self.output_names`` order (subclasses)."""
        raise NotImplementedError

    def execute(self, requests: list[Any]) -> list[Any]:
        """Answer every request, batching together those whose shapes allow it."""
        feeds: list[dict[str, Array]] = []
        for request in requests:
            feed = {}
            for name in self.input_names:
                tensor = pb_utils.get_input_tensor_by_name(request, name)
                if tensor is not None:
                    feed[name] = (
                        np.from_dlpack(tensor) if DLPACK and name in self.dlpack_inputs else tensor.as_numpy()
                    )
            feeds.append(feed)

        if self.max_batch_size > 0:
            keys = [batch_key(f, self.input_names, self.scalar_inputs) for f in feeds]
            groups = group_by_shape(keys)
        else:
            groups = [[i] for i in range(len(requests))]

        responses: list[Any] = [None] * len(requests)
        for group in groups:
            try:
                outputs = self._run_group([feeds[i] for i in group])
            except Exception as e:  # one bad group must not fail the others
                error = pb_utils.TritonError(f"{type(self).__module__}: {e}")
                for i in group:
                    responses[i] = pb_utils.InferenceResponse(output_tensors=[], error=error)
                continue
            for i, tensors in zip(group, outputs, strict=True):
                responses[i] = pb_utils.InferenceResponse(
                    output_tensors=[
                        output_tensor(name, value)
                        for name, value in zip(self.output_names, tensors, strict=True)
                    ]
                )
        return responses

    def _run_group(self, feeds: list[dict[str, Array]]) -> list[list[Array]]:
        if len(feeds) == 1:
            return [list(self.run(feeds[0]))]
        sizes = [next(iter(feed.values())).shape[0] for feed in feeds]
        batch = {name: np.concatenate([feed[name] for feed in feeds], axis=0) for name in feeds[0]}
        per_output = [split_rows(np.asarray(result), sizes) for result in self.run(batch)]
        return [list(row) for row in zip(*per_output, strict=True)]
