"""The shared-memory kind: a model's tensors through system shared memory, one response each.

``--shared-memory system``: the load processes put each request's inputs and outputs in
regions of POSIX shared memory registered with the server (a server on this host), named
after a prefix chosen here; after each run whatever a killed process left registered is
unregistered and removed (:mod:`tritongen.loadtest.shared_memory`).
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from tritongen.client.endpoint import TritonEndpoint
from tritongen.loadtest.kinds.base import LoadKind, ModelConfig, Requests
from tritongen.loadtest.kinds.tensor_requests import INPUTS_FILE, model_interface, write_tensor_requests
from tritongen.loadtest.shared_memory import prepare_shared_memory, release_regions

if TYPE_CHECKING:
    from tritongen.loadtest.spec import LoadSpec


class SharedMemoryKind(LoadKind):
    """Tensors through system shared memory."""

    name = "shared-memory"
    option = "--shared-memory system"

    def given(self, spec: LoadSpec) -> str | None:
        """``--shared-memory system``, when given."""
        return self.option if spec.shared_memory == "system" else None

    def claims(self, spec: LoadSpec, config: ModelConfig) -> bool:
        """``--shared-memory system`` (a sequence or decoupled model is claimed before)."""
        del config
        return self.given(spec) is not None

    def prepare(
        self, spec: LoadSpec, endpoint: TritonEndpoint, config: ModelConfig, folder: Path
    ) -> Requests:
        """The model's tensors, and the name prefix of the run's regions, checked with the server.

        Raises:
            ConfigError: a streaming or sequence model, expected outputs (they would land in shared
                memory), an output of unknown size, a server that cannot map this host's memory.
            SourceError: the data file is unreadable, or its data does not fit the model.
        """
        interface = model_interface(spec, endpoint)
        model_config = config()
        path = folder / INPUTS_FILE
        rows, _, _ = write_tensor_requests(spec, interface, path)
        prefix = prepare_shared_memory(
            endpoint, interface, model_config, rows, spec.output_shared_memory_size
        )
        options = {"shared-memory": "system", "shm-prefix": prefix}
        if spec.output_shared_memory_size is not None:
            options["output-shm-size"] = str(spec.output_shared_memory_size)
        release = partial(release_regions, endpoint, prefix)
        return Requests(interface=interface, rows=rows, path=path, options=options, release=release)


KIND = SharedMemoryKind()
