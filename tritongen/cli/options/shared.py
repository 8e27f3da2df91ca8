"""Options several commands share, declared once.

An alias carries the words of the command that takes it as it is; a command that tells the
option its own way rewords it (:func:`tritongen.cli.groups.reworded`), keeping the flag, its
type of value and its limits.
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from tritongen.convert.formats import FORMATS


class ProtocolChoice(str, Enum):
    """Wire protocol."""

    http = "http"
    grpc = "grpc"


Templates = Annotated[
    Path | None,
    typer.Option("--templates", help="Directory of Jinja templates overriding the built-in ones."),
]
ModelName = Annotated[str, typer.Argument(help="Served model name, e.g. mlp_onnx.")]
Url = Annotated[
    str | None,
    typer.Option("--url", help="Server address (default localhost:8000, or :8001 for gRPC)."),
]
Protocol = Annotated[ProtocolChoice, typer.Option("--protocol", help="http or grpc.")]
Shapes = Annotated[
    list[str] | None,
    typer.Option("--shape", help="NAME=DIMS for dynamic dims, e.g. input_ids=128 (repeatable)."),
]
Serve = Annotated[
    Path | None,
    typer.Option("--serve", help="Start the embedded server on this repository for the call."),
]

SkipFailed = Annotated[
    bool,
    typer.Option(
        "--skip-failed",
        help="Serve the models that load and leave out the others, one line each (default: "
        "refuse to serve when any model fails).",
    ),
]

LoadTimeout = Annotated[
    float | None,
    typer.Option(
        "--load-timeout",
        "--ready-timeout",
        min=0,
        show_default=False,
        help="Seconds the embedded server may take to start and load its models (default 120 plus 15 "
        "per model; 900 with a local language model). Past it the start fails, naming the models "
        "still loading, and the server's log is kept.",
    ),
]

AdminKey = Annotated[
    str | None,
    typer.Option(
        "--admin-key",
        envvar="TRITONGEN_ADMIN_KEY",
        help="Key of a --url server whose repository API is restricted (printed by `serve --host`).",
    ),
]
MetricsUrl = Annotated[
    str | None,
    typer.Option("--metrics-url", help="Prometheus endpoint (default: the server host, port 8002)."),
]
Repo = Annotated[Path, typer.Option("--repo", help="Model repository holding MODEL.")]
ModelNameOption = Annotated[str | None, typer.Option("--name", help="Model name (default: the file name).")]
Formats = Annotated[
    str,
    typer.Option(
        "--formats",
        help=f"Formats to build, comma-separated: {', '.join(FORMATS)}; "
        "or all (what this machine can build).",
    ),
]
WorkDir = Annotated[Path | None, typer.Option("--out", help="Trial directory (default tune-MODEL).")]
Force = Annotated[bool, typer.Option("--force", help="Replace model directories that already exist.")]
Image = Annotated[
    str | None,
    typer.Option("--image", help="Triton image (default: the release matching tritonclient)."),
]
SloP99 = Annotated[float | None, typer.Option("--slo-p99-ms", help="P99 latency budget in ms.")]
FindMax = Annotated[
    bool, typer.Option("--find-max", help="Search for the most load within the SLO from the one level given.")
]
Arrival = Annotated[
    str,
    typer.Option(
        "--arrival",
        help="Open-loop arrivals: constant, poisson or gamma:CV (CV above 1: bursts), seeded by --seed.",
    ),
]
