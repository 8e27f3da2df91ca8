"""Triton Python-backend model that serves ``model.onnx`` with ONNX Runtime.

Written by tritongen into ``<model>/<version>/model.py`` for the ``local`` target (the
embedded server has only the Python backend). Dynamic batching hands ``execute`` many
requests at once: requests whose non-batch shapes agree are concatenated into one
batch, run once, and the outputs are split back per request.
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


def group_by_shape(shapes: Sequence[tuple[tuple[int, ...] | None, ...]]) -> list[list[int]]:
    """Group request indices whose per-input non-batch shapes match, keeping arrival order."""
    groups: dict[tuple[tuple[int, ...] | None, ...], list[int]] = {}
    for index, key in enumerate(shapes):
        groups.setdefault(key, []).append(index)
    return list(groups.values())


def split_rows(array: npt.NDArray[Any], sizes: Sequence[int]) -> list[npt.NDArray[Any]]:
    """Split ``array`` along axis 0 into consecutive chunks of ``sizes`` rows."""
    if sum(sizes) != array.shape[0]:
        raise ValueError(f"output has {array.shape[0]} rows, the requests sent {sum(sizes)}")
    offsets = np.cumsum(sizes)[:-1]
    return list(np.split(array, offsets, axis=0))


def _as_ort_input(array: npt.NDArray[Any]) -> npt.NDArray[Any]:
    if array.dtype == np.object_:
        decode = np.vectorize(lambda v: v.decode() if isinstance(v, bytes) else v, otypes=[object])
        decoded: npt.NDArray[Any] = decode(array)
        return decoded
    return array


class TritonPythonModel:
    """ONNX Runtime session behind Triton's Python backend."""

    def initialize(self, args: dict[str, Any]) -> None:
        """Create the ONNX Runtime session for this instance."""
        import onnxruntime as ort

        config = json.loads(args["model_config"])
        self.max_batch_size = int(config.get("max_batch_size", 0))
        self.input_names = [t["name"] for t in config["input"]]
        self.output_names = [t["name"] for t in config["output"]]
        params = {k: v["string_value"] for k, v in config.get("parameters", {}).items()}

        options = ort.SessionOptions()
        threads = int(params.get("intra_op_thread_count", "0"))
        if threads > 0:
            options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1

        providers: list[Any] = ["CPUExecutionProvider"]
        if args.get("model_instance_kind") == "GPU" and (
            "CUDAExecutionProvider" in ort.get_available_providers()
        ):
            device = int(args.get("model_instance_device_id", 0))
            providers = [("CUDAExecutionProvider", {"device_id": device}), "CPUExecutionProvider"]

        path = os.path.join(args["model_repository"], args["model_version"], "model.onnx")
        self.session = ort.InferenceSession(path, sess_options=options, providers=providers)

    def execute(self, requests: list[Any]) -> list[Any]:
        """Run all requests, batching together those whose shapes allow it."""
        arrays: list[dict[str, npt.NDArray[Any]]] = []
        for request in requests:
            feed = {}
            for name in self.input_names:
                tensor = pb_utils.get_input_tensor_by_name(request, name)
                if tensor is not None:
                    feed[name] = tensor.as_numpy()
            arrays.append(feed)

        responses: list[Any] = [None] * len(requests)
        if self.max_batch_size > 0:
            keys = [
                tuple((feed[n].shape[1:] if n in feed else None) for n in self.input_names) for feed in arrays
            ]
            groups = group_by_shape(keys)
        else:
            groups = [[i] for i in range(len(requests))]

        for group in groups:
            try:
                outputs = self._run_group([arrays[i] for i in group])
            except Exception as e:  # one bad group must not fail the others
                error = pb_utils.TritonError(f"onnxruntime: {e}")
                for i in group:
                    responses[i] = pb_utils.InferenceResponse(output_tensors=[], error=error)
                continue
            for i, tensors in zip(group, outputs, strict=True):
                responses[i] = pb_utils.InferenceResponse(
                    output_tensors=[
                        pb_utils.Tensor(name, value)
                        for name, value in zip(self.output_names, tensors, strict=True)
                    ]
                )
        return responses

    def _run_group(self, feeds: list[dict[str, npt.NDArray[Any]]]) -> list[list[npt.NDArray[Any]]]:
        if len(feeds) == 1:
            feed = {k: _as_ort_input(v) for k, v in feeds[0].items()}
            return [self.session.run(self.output_names, feed)]
        sizes = [next(iter(feed.values())).shape[0] for feed in feeds]
        batch = {
            name: _as_ort_input(np.concatenate([feed[name] for feed in feeds], axis=0)) for name in feeds[0]
        }
        results = self.session.run(self.output_names, batch)
        per_output = [split_rows(np.asarray(result), sizes) for result in results]
        return [list(row) for row in zip(*per_output, strict=True)]

    def finalize(self) -> None:
        """Release the session."""
        self.session = None
