"""One request end to end (``tritongen infer``): the embedded server if asked, inputs from metadata."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tritongen.client.endpoint import DEFAULT_PORTS, InferResult, TritonEndpoint
from tritongen.client.input_data import InputPlan, input_steps
from tritongen.errors import ConfigError
from tritongen.server.embedded import ServingHooks
from tritongen.workflows.serving import serving_if_asked


@dataclass(frozen=True)
class InferRequest:
    """The request to send: to which model and server, with which inputs."""

    model: str
    plan: InputPlan
    url: str | None = None
    """The server (None: localhost on the protocol's port, or the embedded one with ``serve``)."""
    protocol: str = "http"
    serve: Path | None = None
    """Start the embedded server on this repository with just ``model`` for the request."""
    load_timeout_s: float | None = None
    """With ``serve``: how long its start and load may take (None: derived)."""
    batch_size: int = 1
    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    files: dict[str, Path] = field(default_factory=dict)
    """Inputs given as ``.npy`` files, by name."""
    seed: int = 0
    step: int = 0
    """Which entry of an input-data file to send."""
    warmup: int = 1
    """Untimed requests sent first."""
    timeout_s: float = 30.0
    """How long each request may wait for its answer."""


@dataclass(frozen=True)
class InferOutcome:
    """What was sent and what came back."""

    inputs: dict[str, np.ndarray]  # type: ignore[type-arg]
    result: InferResult


def infer_once(request: InferRequest, serving: ServingHooks | None = None) -> InferOutcome:
    """Serve if asked, build the inputs from the model's metadata, warm up, and time one request.

    Raises:
        ConfigError: ``step`` is outside the input data, or the inputs do not fit the model.
        ServerError: the server or the model cannot be reached.
    """
    model = request.model
    with serving_if_asked(request.serve, [model], serving, load_timeout_s=request.load_timeout_s) as server:
        url = request.url or f"localhost:{DEFAULT_PORTS[request.protocol]}"
        if server is not None:
            url = server.http_url if request.protocol == "http" else server.grpc_url
        endpoint = TritonEndpoint(url, request.protocol, timeout_s=request.timeout_s)  # type: ignore[arg-type]
        try:
            interface = endpoint.interface(model)
            steps = input_steps(
                interface,
                request.plan,
                batch_size=request.batch_size,
                shapes=request.shapes,
                seed=request.seed,
                files=request.files,
            )
            if not 0 <= request.step < len(steps):
                raise ConfigError(
                    f"--step {request.step} is out of range: the input data has {len(steps)} step(s)",
                    f"give 0 to {len(steps) - 1}",
                )
            arrays = steps[request.step]
            for _ in range(request.warmup):
                endpoint.infer(model, arrays, interface.outputs)
            return InferOutcome(arrays, endpoint.infer(model, arrays, interface.outputs))
        finally:
            endpoint.close()
