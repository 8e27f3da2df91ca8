"""Options several commands share, declared once."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated

import typer


class ProtocolChoice(str, Enum):
    """Wire protocol."""

    http = "http"
    grpc = "grpc"


Templates = Annotated[
    Path | None,
    typer.Option(
        "--templates", help="Directory of Jinja templates overriding the built-in ones.", show_default=False
    ),
]
ModelName = Annotated[str, typer.Argument(help="Served model name, e.g. mlp_onnx.")]
Url = Annotated[
    str | None,
    typer.Option(
        "--url", help="Server address (default localhost:8000, or :8001 for gRPC).", show_default=False
    ),
]
Protocol = Annotated[ProtocolChoice, typer.Option("--protocol", help="http or grpc.")]
Shapes = Annotated[
    list[str] | None,
    typer.Option(
        "--shape", help="NAME=DIMS for dynamic dims, e.g. input_ids=128 (repeatable).", show_default=False
    ),
]
Serve = Annotated[
    Path | None,
    typer.Option(
        "--serve", help="Start the embedded server on this repository for the call.", show_default=False
    ),
]

AdminKey = Annotated[
    str | None,
    typer.Option(
        "--admin-key",
        envvar="TRITONGEN_ADMIN_KEY",
        help="Key of a --url server whose repository API is restricted (printed by `serve --host`).",
        show_default=False,
    ),
]
