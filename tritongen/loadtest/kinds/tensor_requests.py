"""Tensor requests, as every kind that sends a model's tensors builds them (not a kind itself).

The requests are built once from the model's metadata (random or zero data, or a data file's
steps, ``--shape`` and ``--input-value`` applied) and written to one ``.npz`` that every load
process sends round-robin; steps whose data has expected outputs carry them, and every
response is then checked against them.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from tritongen.client.endpoint import TritonEndpoint
from tritongen.client.input_data import InputPlan, Step, input_steps
from tritongen.client.inputs import ModelInterface
from tritongen.client.validation_data import ExpectedOutputs, expected_outputs
from tritongen.errors import ConfigError
from tritongen.io.arrays import write_steps
from tritongen.loadtest.shapes.trace_replay import TraceReplay
from tritongen.loadtest.shapes.trace_requests import check_data_entries, refuse_prompts, trace_tensor_steps
from tritongen.loadtest.validation import check_validation

if TYPE_CHECKING:
    from tritongen.loadtest.spec import LoadSpec

INPUTS_FILE = "inputs.npz"


def model_interface(spec: LoadSpec, endpoint: TritonEndpoint) -> ModelInterface:
    """The model's inputs and outputs as the server reports them, checked against ``--batch-size``.

    Raises:
        ConfigError: a batch size above the model's.
        ServerError: the server or the model cannot be reached.
    """
    interface = endpoint.interface(spec.model)
    if interface.batched and spec.batch_size > interface.max_batch_size:
        raise ConfigError(
            f"--batch-size {spec.batch_size} exceeds max_batch_size {interface.max_batch_size} "
            f"of '{spec.model}'",
            f"use at most {interface.max_batch_size}",
        )
    return interface


def prepare_steps(spec: LoadSpec, interface: ModelInterface) -> list[Step]:
    """The requests, built once and sent round-robin: one of random or zero data, or a data file's steps.

    Raises:
        ConfigError: an unknown input, a batch size the model cannot take, or a bad ``--input-value``.
        SourceError: the data file is unreadable, or its data does not fit the model.
    """
    plan = InputPlan(source=spec.input_data, string_length=spec.string_length, values=spec.input_values)
    replay = spec.shape if isinstance(spec.shape, TraceReplay) else None
    refuse_prompts(replay)
    if replay is not None and replay.tensor_variants():  # a trace's requests: one per distinct shapes
        return trace_tensor_steps(
            replay,
            interface,
            lambda batch, shapes: input_steps(
                interface, plan, batch_size=batch, shapes=shapes, seed=spec.seed
            )[0],
        )
    steps = input_steps(interface, plan, batch_size=spec.batch_size, shapes=spec.shapes, seed=spec.seed)
    if replay is not None:
        check_data_entries(replay, len(steps))
    return steps


def write_tensor_requests(
    spec: LoadSpec,
    interface: ModelInterface,
    path: Path,
    streams: list[int] | None = None,
    streaming: bool = False,
) -> tuple[int, int, ExpectedOutputs | None]:
    """Build the requests and write them to ``path``: rows per request, steps, expected outputs.

    ``streams`` (a sequence model's data streams, each one sequence) goes with the steps;
    ``streaming``: the model's responses come over a stream, where they are not checked.

    Raises:
        ConfigError: bad input options, or expected outputs where responses cannot be checked.
        SourceError: the data file is unreadable, or its data does not fit the model.
    """
    steps = prepare_steps(spec, interface)
    rows = next((int(a.shape[0]) for a in steps[0].values()), spec.batch_size) if interface.batched else 1
    expected = expected_outputs(spec.input_data, interface, spec.batch_size)
    if expected is not None:
        check_validation(spec.model, spec.shared_memory, streaming)
        steps = [{**step, **checks} for step, checks in zip(steps, expected.steps, strict=True)]
    write_steps(path, steps, streams, (spec.atol, spec.rtol) if expected is not None else None)
    return rows, len(steps), expected
