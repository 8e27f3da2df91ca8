"""``tritongen infer``: one request built from the served model's metadata."""

from __future__ import annotations

from typing import Annotated

import numpy as np
import typer
from rich.markup import escape
from rich.table import Table

from tritongen.cli.boundary import user_errors
from tritongen.cli.console import console
from tritongen.cli.options.groups import Pick, option_groups, reworded
from tritongen.cli.options.load import LoadFlags, RequestTimeout
from tritongen.cli.options.settings import settings
from tritongen.cli.options.shared import LoadTimeout, ModelName, Protocol, ProtocolChoice, Serve, Url
from tritongen.cli.serving import serving_hooks
from tritongen.client.endpoint import InferResult
from tritongen.client.inputs import parse_input_files, parse_shape_overrides
from tritongen.errors import ConfigError
from tritongen.loadtest.spec import parse_duration
from tritongen.workflows.infer import InferRequest, infer_once


@option_groups(
    load=Pick(
        only=("batch_size", "shapes", "seed", "input_data", "string_length", "input_values"),
        helps={
            "batch_size": "Batch size of the request.",
            "input_data": "random, zeros, a .json in perf_analyzer's input-data format (--step picks "
            "its entry), or an .npz with one array per input (strings for BYTES inputs).",
        },
    )
)
def infer_command(
    model: ModelName,
    load: LoadFlags,
    url: Url = None,
    protocol: Protocol = ProtocolChoice.http,
    inputs: Annotated[
        list[str] | None,
        typer.Option("--input", help="NAME=FILE.npy for an input (repeatable)."),
    ] = None,
    step: Annotated[
        int, typer.Option("--step", help="Which step (entry) of an --input-data file to send, from 0.")
    ] = 0,
    serve: Serve = None,
    load_timeout: LoadTimeout = None,
    # Not the load options' --warmup (a duration of load before measuring): a count of requests.
    warmup: Annotated[
        int,
        typer.Option(
            "--warmup", help="Untimed requests sent first (the first one pays for lazy set-up).", min=0
        ),
    ] = 1,
    timeout: Annotated[
        str,
        reworded(
            RequestTimeout,
            "How long to wait for each answer, e.g. 30s; a model that answers none within it is named.",
        ),
    ] = "30s",
) -> None:
    """Send one inference request to MODEL and print its outputs and latency."""
    with user_errors():
        request = settings(
            InferRequest,
            load,
            model=model,
            plan=load.input_plan(),
            url=url,
            protocol=protocol.value,
            serve=serve,
            load_timeout_s=load_timeout,
            shapes=parse_shape_overrides(load.shapes or []),
            files=parse_input_files(inputs or []),
            step=step,
            warmup=warmup,
            timeout_s=_timeout_s(timeout),
        )
        outcome = infer_once(request, serving_hooks())
    _print_result(model, outcome.inputs, outcome.result, warmup)


def _timeout_s(text: str) -> float:
    """``--timeout`` in seconds.

    Raises:
        ConfigError: not a positive duration.
    """
    seconds = parse_duration(text, "--timeout")
    if seconds <= 0:
        raise ConfigError("--timeout must be positive", "e.g. --timeout 30s")
    return seconds


def _preview(array: np.ndarray, count: int = 6) -> str:  # type: ignore[type-arg]
    flat = array.reshape(-1)
    shown = np.array2string(flat[:count], precision=5, separator=", ", threshold=count)
    return escape(shown[:-1] + ", …]" if flat.size > count else shown)  # strings print as [b'…']: not markup


def _print_result(model: str, arrays: dict[str, np.ndarray], result: InferResult, warmup: int) -> None:  # type: ignore[type-arg]
    after = f", after {warmup} warm-up request{'s' if warmup != 1 else ''}" if warmup else ", cold"
    table = Table(title=f"{model}: {result.latency_us / 1000:.3f} ms ({result.latency_us:.0f} µs{after})")
    table.add_column("tensor")
    table.add_column("dtype")
    table.add_column("shape")
    table.add_column("values")
    for name, array in arrays.items():
        table.add_row(f"in  {name}", str(array.dtype), str(list(array.shape)), _preview(array))
    for name, array in result.outputs.items():
        table.add_row(f"out {name}", str(array.dtype), str(list(array.shape)), _preview(array))
    console.print(table)
