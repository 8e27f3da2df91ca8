"""The tensor kind: a model's tensors in each request, over HTTP or gRPC, one response each.

What ``--load-kind auto`` picks for a model that is neither a sequence model nor decoupled,
without ``--shared-memory system`` or ``--api``. The load generator sends the prepared
requests as raw HTTP/1.1 (Triton's binary tensor extension) or gRPC ``ModelInfer`` calls.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from tritongen.client.endpoint import TritonEndpoint
from tritongen.loadtest.kinds.base import LoadKind, ModelConfig, Requests
from tritongen.loadtest.kinds.tensor_requests import INPUTS_FILE, model_interface, write_tensor_requests
from tritongen.loadtest.sequences import check_sequence_model
from tritongen.loadtest.streaming import refuse_decoupled

if TYPE_CHECKING:
    from tritongen.loadtest.spec import LoadSpec


class TensorKind(LoadKind):
    """Tensors per request, one response each."""

    name = "tensor"

    def claims(self, spec: LoadSpec, config: ModelConfig) -> bool:
        """Every load the kinds before it leave."""
        del spec, config
        return True

    def prepare(
        self, spec: LoadSpec, endpoint: TritonEndpoint, config: ModelConfig, folder: Path
    ) -> Requests:
        """The model's tensors, as ``--input-data`` and the shape options say.

        Raises:
            ConfigError: a sequence or decoupled model, a batch size above the model's, bad inputs.
            SourceError: the data file is unreadable, or its data does not fit the model.
        """
        interface = model_interface(spec, endpoint)
        model_config = config()
        check_sequence_model(spec.model, model_config, sequences=False)
        refuse_decoupled(spec.model, model_config)
        path = folder / INPUTS_FILE
        rows, _, expected = write_tensor_requests(spec, interface, path)
        return Requests(interface=interface, rows=rows, path=path, expected=expected)


KIND = TensorKind()
