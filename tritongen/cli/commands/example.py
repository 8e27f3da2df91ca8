"""``tritongen example``: write a small built-in ONNX model, MiniLM sample inputs, or a tiny Llama."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Annotated

import typer

from tritongen.cli.boundary import user_errors
from tritongen.cli.console import console
from tritongen.cli.options.groups import reworded
from tritongen.cli.options.output import OutputPath
from tritongen.errors import ConfigError
from tritongen.examples.models import EXAMPLES, write_example
from tritongen.io.files import STAGING_PREFIX

MINILM = "minilm"
TINY_LLAMA = "tiny-llama"


def example_command(
    name: Annotated[
        str,
        typer.Argument(
            help=f"Example model: {', '.join(EXAMPLES)}; or {MINILM} for tokenized sentences "
            "(an .npz for --verify-data) to go with the tritongen.examples.minilm:encoder factory; "
            f"or {TINY_LLAMA}, a random-weight Llama directory an LLM server (vLLM) serves."
        ),
    ],
    output: Annotated[
        Path | None,
        reworded(
            OutputPath,
            "Where to write it (default NAME.onnx, minilm.npz, or the folder tiny-llama).",
            show_default=False,
        ),
    ] = None,
    count: Annotated[int, typer.Option("--count", help="Sentences to tokenize (minilm).", min=1)] = 32,
    # Not compare's --seq (the value of every dynamic dim of the requests it measures): the
    # length the written sample sentences are padded to.
    seq: Annotated[int, typer.Option("--seq", help="Sequence length to pad to (minilm).", min=2)] = 128,
) -> None:
    """Write a small example model built in code, or MiniLM inputs (nothing is downloaded)."""
    with user_errors():
        if name not in (*EXAMPLES, MINILM, TINY_LLAMA):
            raise ConfigError(
                f"unknown example {name!r}", f"choose from: {', '.join((*EXAMPLES, MINILM, TINY_LLAMA))}"
            )
        if name == TINY_LLAMA:
            path = _tiny_llama(output or Path(TINY_LLAMA))
        elif name == MINILM:
            from tritongen.examples.minilm import write_sample_data

            path = write_sample_data(output or Path(f"{MINILM}.npz"), count=count, seq_len=seq)
        else:
            path = write_example(name, output or Path(f"{name}.onnx"))
    console.print(f"wrote {path}", highlight=False, markup=False)


def _tiny_llama(directory: Path) -> Path:
    """The tiny Llama's folder; a folder that holds anything already is refused (nothing is overwritten).

    Raises:
        ConfigError: ``directory`` is a file or a folder that is not empty, or cannot be written.
    """
    from tritongen.examples.tiny_llama import write_tiny_llama

    if directory.is_file() or (directory.is_dir() and any(directory.iterdir())):
        raise ConfigError(f"{directory} already exists", "give --output a new or empty folder")
    try:
        directory.parent.mkdir(parents=True, exist_ok=True)
        partial = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=directory.parent))
        try:
            write_tiny_llama(partial)
            os.replace(partial, directory)  # whole or not at all
        finally:
            shutil.rmtree(partial, ignore_errors=True)
    except OSError as e:
        raise ConfigError(
            f"cannot write under {directory.parent}: {e.strerror}", "choose a writable --output"
        ) from e
    return directory
