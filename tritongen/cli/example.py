"""``tritongen example``: write one of the small built-in ONNX models, or MiniLM sample inputs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tritongen.cli.common import console, user_errors
from tritongen.cli.groups import reworded
from tritongen.cli.output_options import OutputPath
from tritongen.examples.models import EXAMPLES, write_example

MINILM = "minilm"


def example_command(
    name: Annotated[
        str,
        typer.Argument(
            help=f"Example model: {', '.join(EXAMPLES)}; or {MINILM} for tokenized sentences "
            "(an .npz for --verify-data) to go with the tritongen.examples.minilm:encoder factory."
        ),
    ],
    output: Annotated[
        Path | None,
        reworded(OutputPath, "Where to write it (default NAME.onnx, or minilm.npz).", show_default=False),
    ] = None,
    count: Annotated[int, typer.Option("--count", help="Sentences to tokenize (minilm).", min=1)] = 32,
    # Not compare's --seq (the value of every dynamic dim of the requests it measures): the
    # length the written sample sentences are padded to.
    seq: Annotated[int, typer.Option("--seq", help="Sequence length to pad to (minilm).", min=2)] = 128,
) -> None:
    """Write a small example ONNX model built in code, or MiniLM inputs (nothing is downloaded)."""
    with user_errors():
        if name == MINILM:
            from tritongen.examples.minilm import write_sample_data

            path = write_sample_data(output or Path(f"{MINILM}.npz"), count=count, seq_len=seq)
        else:
            path = write_example(name, output or Path(f"{name}.onnx"))
    console.print(f"wrote {path}", highlight=False, markup=False)
