"""The null kind: requests the server answers at once, so the figures are the load generator's own floor.

``--load-kind null``: each request is ``GET /v2/models/MODEL/ready``, sent over the same
keep-alive raw HTTP path as the tensor kind's requests (the closed-loop engine, or the open
loop at a rate). The server answers it from its model table without running the model, so a
run's latency is what the client and the loopback add to every request, and its requests/s
what the load processes can drive: the floor under every other kind's figures. It carries no
data, so the options that shape requests are refused rather than ignored.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from tritongen.client.endpoint import TritonEndpoint
from tritongen.client.inputs import ModelInterface
from tritongen.errors import ConfigError, ServerError
from tritongen.loadtest.kinds.base import LoadKind, ModelConfig, Requests

if TYPE_CHECKING:
    from tritongen.loadtest.spec import LoadSpec


class NullKind(LoadKind):
    """The model's readiness, asked over and over: the client's own floor."""

    name = "null"

    def prepare(
        self, spec: LoadSpec, endpoint: TritonEndpoint, config: ModelConfig, folder: Path
    ) -> Requests:
        """Nothing to write; the load must be HTTP, without data options, to a model the server has ready.

        Raises:
            ConfigError: gRPC, or an option that shapes requests the null kind does not send.
            ServerError: the model is not ready (or the server does not answer).
        """
        del config, folder  # the server's answer needs neither
        if spec.protocol != "http":
            raise ConfigError("--load-kind null goes over HTTP", "drop --protocol grpc")
        shaping = [
            ("--batch-size", spec.batch_size != 1),
            ("--input-data", spec.input_data != "random"),
            ("--shape", bool(spec.shapes)),
            ("--input-value", bool(spec.input_values)),
        ]
        given = [option for option, shapes in shaping if shapes]
        if given:
            raise ConfigError(
                f"--load-kind null sends no data: {', '.join(given)} would change nothing",
                f"drop {', '.join(given)}",
            )
        if not endpoint.is_model_ready(spec.model):
            raise ServerError(
                f"model '{spec.model}' is not ready on {spec.address.url}",
                "name a model the server has ready, or start the server",
            )
        return Requests(interface=ModelInterface(spec.model, 0, (), ()), rows=1, path=None)


KIND = NullKind()
