"""Options several commands share, declared once."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from tritongen.cli.common import err_console
from tritongen.errors import ConfigError
from tritongen.server.local import LocalTritonServer


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


@contextlib.contextmanager
def embedded_server(repo: Path, model: str, *others: str) -> Iterator[LocalTritonServer]:
    """The embedded server with just ``model`` (and ``others``), on free ports, for the length of one command.

    The model's config is linted first: a config Triton would refuse (or, like a Python
    model without ``model.py``, never finish loading) stops the command with one line.
    """
    models = [model, *others]
    lint_before_serving(repo, models)
    with err_console.status("starting the embedded Triton server"):
        server = LocalTritonServer(repo, http_port=0, grpc_port=0, metrics_port=0, models=models)
        server.start()
    try:
        yield server
    finally:
        server.stop()


def lint_before_serving(repo: Path, models: list[str], hint: str = "fix them (see above)") -> None:
    """Refuse to serve configs Triton would refuse; show warnings.

    Raises:
        ConfigError: a config breaks one of Triton's rules (each finding was printed).
    """
    from tritongen.lint.repository import LintUsageError, lint_paths

    paths = [repo / m for m in models] if models else [repo]
    try:
        report = lint_paths([p for p in paths if p.exists()] or [repo])
    except LintUsageError:
        return  # nothing lint can read: the server reports what is wrong
    for finding in report.findings:
        style = {"error": "red", "warning": "yellow"}.get(finding.severity, "cyan")
        err_console.print(finding.text(), style=style, soft_wrap=True, highlight=False, markup=False)
    if report.errors:
        raise ConfigError(
            f"{len(report.errors)} config error(s) in {repo}: Triton would refuse these models", hint
        )


ShowDiff = Annotated[
    bool,
    typer.Option("--diff", help="Print the change to config.pbtxt as a unified diff and write nothing."),
]
