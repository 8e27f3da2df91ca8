"""The sequence kind: a sequence (stateful) model's sequences, ``--sequences N`` of them in flight.

What ``--load-kind auto`` picks with ``--sequences``, and for a model whose config has
``sequence_batching`` (which it then refuses without ``--sequences``). Each load process
user runs one sequence at a time on a correlation ID of its own, its requests one after the
other, the first with the start flag and the last with the end flag
(:mod:`tritongen.loadtest.sequences`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from tritongen.client.endpoint import TritonEndpoint
from tritongen.client.input_data import json_stream_lengths
from tritongen.errors import ConfigError
from tritongen.loadtest.kinds.base import LoadKind, ModelConfig, Requests, RunView
from tritongen.loadtest.kinds.tensor_requests import INPUTS_FILE, model_interface, write_tensor_requests
from tritongen.loadtest.sequences import (
    add_sequence_figures,
    check_id_range,
    check_sequence_model,
    id_range_text,
    is_sequence_model,
    sequence_length,
)
from tritongen.loadtest.shared_memory import refuse_shared_memory
from tritongen.loadtest.spec import auto_processes
from tritongen.loadtest.streaming import is_decoupled

if TYPE_CHECKING:
    from tritongen.loadtest.result import RunResult
    from tritongen.loadtest.spec import LoadSpec


class SequenceKind(LoadKind):
    """Sequences of requests on correlation IDs, a closed loop of N sequences in flight."""

    name = "sequence"
    option = "--sequences N"

    def given(self, spec: LoadSpec) -> str | None:
        """``--sequences``, when given."""
        return "--sequences" if spec.sequences else None

    def claims(self, spec: LoadSpec, config: ModelConfig) -> bool:
        """``--sequences``, or a sequence model (refused in :meth:`prepare` without ``--sequences``)."""
        return spec.sequences or is_sequence_model(config())

    def prepare(
        self, spec: LoadSpec, endpoint: TritonEndpoint, config: ModelConfig, folder: Path
    ) -> Requests:
        """The model's steps (a data file's streams, each one sequence), and the length of a sequence.

        Raises:
            ConfigError: a model that is not a sequence model (or also decoupled), a load without
                ``--sequences``, an ID range too small for a level, or shared memory.
            SourceError: the data file is unreadable, or its data does not fit the model.
        """
        interface = model_interface(spec, endpoint)
        model_config = config()
        if is_sequence_model(model_config) and is_decoupled(model_config):
            raise ConfigError(
                f"'{spec.model}' is both a sequence model and decoupled (streaming): loading such a model "
                "is not supported yet (sequences are sent as plain calls, not over gRPC streams)",
                "load a model that is one or the other",
            )
        check_sequence_model(spec.model, model_config, spec.sequences)
        for level in spec.levels:
            processes = min(spec.processes or auto_processes(spec.mode, level), int(level))
            check_id_range(spec.sequence_id_range, int(level), processes)
        path = folder / INPUTS_FILE
        rows, steps, expected = write_tensor_requests(spec, interface, path, streams=sequence_streams(spec))
        refuse_shared_memory(spec.model, spec.shared_memory)
        options = {
            "sequences": "1",
            "sequence-length": str(sequence_length(spec.sequence_length, steps)),
            "sequence-ids": id_range_text(spec.sequence_id_range),
        }
        return Requests(interface=interface, rows=rows, path=path, options=options, expected=expected)

    def level_text(self, spec: LoadSpec, level: float) -> str:
        """``sequences N``: sequences in flight."""
        del spec
        return f"sequences {int(level)}"

    def add_figures(self, result: RunResult, run: RunView) -> None:
        """Sequences per second and requests per sequence (the sequence time is in ``latencies_us``)."""
        del run
        add_sequence_figures(result, True)


def sequence_streams(spec: LoadSpec) -> list[int] | None:
    """The streams of a sequence load's data file, each one sequence (``None``: the data is one series).

    Raises:
        ConfigError: a length or a batch size given with streams (each stream is a sequence of
            one-request steps).
    """
    streams = json_stream_lengths(spec.input_data)
    if streams is None:
        return None
    if spec.sequence_length is not None:
        raise ConfigError(
            f"--sequence-length {spec.sequence_length} and the streams of {spec.input_data} exclude "
            "each other: each stream is one sequence, as long as its entries",
            "drop --sequence-length, or give a flat list of entries",
        )
    if spec.batch_size != 1:
        raise ConfigError(
            f"--batch-size {spec.batch_size} with the streams of {spec.input_data}: each step of a "
            "stream is one request of its sequence",
            "use --batch-size 1",
        )
    return streams


KIND = SequenceKind()
