"""Plain Locust users with ``tritonclient.http`` (the baseline bench/loadgen.py compares against)."""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np
import tritonclient.http as httpclient
from locust import User, task


class PlainTritonUser(User):
    """One tritonclient.http client per user, Locust's own statistics."""

    def on_start(self) -> None:
        """Connect and build the request once."""
        host = (self.host or "127.0.0.1:8000").removeprefix("http://")
        self.model = os.environ.get("BENCH_MODEL", "identity")
        self.client = httpclient.InferenceServerClient(host)
        data = np.ones((1, 16), dtype=np.float32)
        tensor = httpclient.InferInput("x", list(data.shape), "FP32")
        tensor.set_data_from_numpy(data, binary_data=True)
        self.inputs = [tensor]

    @task
    def infer(self) -> None:
        """One request, reported to Locust."""
        start = time.perf_counter()
        error: Any = None
        try:
            self.client.infer(self.model, self.inputs)
        except Exception as e:
            error = e
        self.environment.events.request.fire(
            request_type="POST",
            name=self.model,
            response_time=(time.perf_counter() - start) * 1000,
            response_length=0,
            exception=error,
            context={},
        )
