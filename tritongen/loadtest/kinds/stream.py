"""The stream kind: a decoupled model's requests over gRPC streams, any number of responses each.

What ``--load-kind auto`` picks for a model whose config makes it decoupled
(``model_transaction_policy { decoupled: true }``). Each request is in flight until its final
response; the load generator records the time to the first response, between responses and
the counts of responses (:mod:`tritongen.loadtest.streaming`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from tritongen.client.endpoint import TritonEndpoint
from tritongen.errors import ConfigError
from tritongen.loadtest.kinds.base import LoadKind, ModelConfig, Requests, RunView
from tritongen.loadtest.kinds.tensor_requests import INPUTS_FILE, model_interface, write_tensor_requests
from tritongen.loadtest.sequences import check_sequence_model
from tritongen.loadtest.shared_memory import refuse_shared_memory
from tritongen.loadtest.streaming import add_streaming_figures, check_streaming, is_decoupled

if TYPE_CHECKING:
    from tritongen.loadtest.result import RunResult
    from tritongen.loadtest.spec import LoadSpec


class StreamKind(LoadKind):
    """A decoupled model's requests, each over a gRPC stream until its final response."""

    name = "stream"

    def claims(self, spec: LoadSpec, config: ModelConfig) -> bool:
        """A decoupled model."""
        del spec
        return is_decoupled(config())

    def prepare(
        self, spec: LoadSpec, endpoint: TritonEndpoint, config: ModelConfig, folder: Path
    ) -> Requests:
        """The model's tensors, sent over gRPC streams.

        Raises:
            ConfigError: a model that is not decoupled, a load over HTTP, a sequence model,
                expected outputs (streamed responses are not checked), or shared memory.
            SourceError: the data file is unreadable, or its data does not fit the model.
        """
        interface = model_interface(spec, endpoint)
        model_config = config()
        check_sequence_model(spec.model, model_config, sequences=False)
        if not check_streaming(spec.model, spec.protocol, model_config):
            raise ConfigError(
                f"--load-kind stream: '{spec.model}' is not decoupled, so it answers each request once",
                "drop --load-kind stream (auto loads it with one response per request)",
            )
        path = folder / INPUTS_FILE
        rows, _, _ = write_tensor_requests(spec, interface, path, streaming=True)
        refuse_shared_memory(spec.model, spec.shared_memory)
        return Requests(interface=interface, rows=rows, path=path, options={"streaming": "1"})

    def add_figures(self, result: RunResult, run: RunView) -> None:
        """Responses per second and per request (the streams' latencies are in ``latencies_us``)."""
        del run
        add_streaming_figures(result)


KIND = StreamKind()
