"""Locust users that send inference requests to one Triton model over HTTP.

Run on its own::

    TRITONGEN_MODEL=mlp_onnx locust -f loadtests/locustfile.py --host http://127.0.0.1:8000

The model's inputs are read from the server's metadata once per user; dynamic dims are
set to 1 and the batch size comes from ``TRITONGEN_BATCH_SIZE`` (default 1). Payloads
are built once, not per request.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
from locust import HttpUser, task

_NUMPY = {
    "BOOL": np.bool_,
    "UINT8": np.uint8,
    "INT8": np.int8,
    "INT16": np.int16,
    "INT32": np.int32,
    "INT64": np.int64,
    "FP16": np.float16,
    "FP32": np.float32,
    "FP64": np.float64,
}


class TritonHttpUser(HttpUser):
    """Closed-loop user: one request at a time, as fast as the server answers."""

    def on_start(self) -> None:
        """Read the model metadata and build the request body once."""
        self.model = os.environ.get("TRITONGEN_MODEL", "model")
        batch = int(os.environ.get("TRITONGEN_BATCH_SIZE", "1"))
        meta = self.client.get(f"/v2/models/{self.model}", name="metadata").json()
        config = self.client.get(f"/v2/models/{self.model}/config", name="config").json()
        batched = int(config.get("max_batch_size", 0)) > 0
        rng = np.random.default_rng(0)
        inputs: list[dict[str, Any]] = []
        for tensor in meta["inputs"]:
            shape = [max(int(d), 1) for d in tensor["shape"]]
            if batched:
                shape[0] = batch
            dtype = _NUMPY.get(tensor["datatype"], np.float32)
            data = rng.random(shape) if np.issubdtype(dtype, np.floating) else rng.integers(0, 2, shape)
            inputs.append(
                {
                    "name": tensor["name"],
                    "shape": shape,
                    "datatype": tensor["datatype"],
                    "data": np.asarray(data, dtype=dtype).flatten().tolist(),
                }
            )
        self.body = {"inputs": inputs}

    @task
    def infer(self) -> None:
        """Send one inference request."""
        self.client.post(f"/v2/models/{self.model}/infer", json=self.body, name=self.model)
