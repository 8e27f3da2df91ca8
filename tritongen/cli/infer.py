"""``tritongen infer``: one request built from the served model's metadata."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import numpy as np
import typer
from rich.table import Table

from tritongen.cli.common import console, user_errors
from tritongen.cli.options import ModelName, Protocol, ProtocolChoice, Serve, Shapes, Url, embedded_server
from tritongen.client.endpoint import DEFAULT_PORTS, InferResult, TritonEndpoint
from tritongen.client.inputs import build_inputs, parse_input_files, parse_shape_overrides


def infer_command(
    model: ModelName,
    url: Url = None,
    protocol: Protocol = ProtocolChoice.http,
    batch_size: Annotated[int, typer.Option("--batch-size", help="Batch size of the request.")] = 1,
    inputs: Annotated[
        list[str] | None,
        typer.Option("--input", help="NAME=FILE.npy for an input (repeatable).", show_default=False),
    ] = None,
    shapes: Shapes = None,
    serve: Serve = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the random inputs.")] = 0,
    warmup: Annotated[
        int,
        typer.Option(
            "--warmup", help="Untimed requests sent first (the first one pays for lazy set-up).", min=0
        ),
    ] = 1,
) -> None:
    """Send one inference request to MODEL and print its outputs and latency."""
    with user_errors(), _endpoint(url, protocol.value, serve, model) as endpoint:
        interface = endpoint.interface(model)
        arrays = build_inputs(
            interface,
            batch_size=batch_size,
            shapes=parse_shape_overrides(shapes or []),
            files=parse_input_files(inputs or []),
            seed=seed,
        )
        for _ in range(warmup):
            endpoint.infer(model, arrays, interface.outputs)
        result = endpoint.infer(model, arrays, interface.outputs)
    _print_result(model, arrays, result, warmup)


@contextlib.contextmanager
def _endpoint(url: str | None, protocol: str, serve: Path | None, model: str) -> Iterator[TritonEndpoint]:
    with contextlib.ExitStack() as stack:
        if serve is not None:
            server = stack.enter_context(embedded_server(serve, model))
            url = server.http_url if protocol == "http" else server.grpc_url
        endpoint = TritonEndpoint(url or f"localhost:{DEFAULT_PORTS[protocol]}", protocol)  # type: ignore[arg-type]
        stack.callback(endpoint.close)
        yield endpoint


def _preview(array: np.ndarray, count: int = 6) -> str:  # type: ignore[type-arg]
    flat = array.reshape(-1)
    shown = np.array2string(flat[:count], precision=5, separator=", ", threshold=count)
    return shown[:-1] + ", …]" if flat.size > count else shown


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
