"""The ``tritongen`` command: one Typer app, one module per command."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from tritongen import __version__
from tritongen.cli.commands.compare import compare_command
from tritongen.cli.commands.compose import compose_command
from tritongen.cli.commands.convert import convert_command
from tritongen.cli.commands.example import example_command
from tritongen.cli.commands.infer import infer_command
from tritongen.cli.commands.kubernetes import kubernetes_command
from tritongen.cli.commands.lint import lint_command
from tritongen.cli.commands.loadtest import loadtest_command
from tritongen.cli.commands.perf_analyzer import CONTEXT, perf_analyzer_command
from tritongen.cli.commands.render import render_command
from tritongen.cli.commands.report import report_command
from tritongen.cli.commands.serve import serve_command
from tritongen.cli.commands.tune import tune_command

app = typer.Typer(
    name="tritongen",
    help="From a trained model to a tuned, load-tested Triton deployment.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.command("convert")(convert_command)
app.command("render")(render_command)
app.command("compose")(compose_command)
app.command("kubernetes")(kubernetes_command)
app.command("serve")(serve_command)
app.command("infer")(infer_command)
app.command("loadtest")(loadtest_command)
app.command("perf-analyzer", context_settings=CONTEXT)(perf_analyzer_command)
app.command("pa", context_settings=CONTEXT, help="Short for perf-analyzer.")(perf_analyzer_command)
app.command("example")(example_command)
app.command("tune")(tune_command)
app.command("compare")(compare_command)
app.command("report")(report_command)
app.command("lint")(lint_command)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"tritongen {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """From a trained model to a tuned, load-tested Triton deployment."""


def main() -> None:
    """Entry point of the ``tritongen`` script."""
    app()


def perf_analyzer_main() -> None:
    """Entry point of the ``perf_analyzer`` and ``perf-analyzer`` scripts: ``tritongen perf-analyzer``.

    Scripts written for perf_analyzer run unchanged: the same options, report, CSV and exit codes.
    """
    app(args=["perf-analyzer", *sys.argv[1:]], prog_name="perf_analyzer")
