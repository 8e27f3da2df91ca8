"""``tritongen serve``: the embedded Triton server on this machine, until Ctrl-C."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from tritongen.cli.boundary import stop_on_signals, user_errors
from tritongen.cli.console import console, err_console, say
from tritongen.cli.options.parsing import parse_name_list
from tritongen.cli.options.shared import LoadTimeout, SkipFailed
from tritongen.cli.serving import show_finding, show_left_out
from tritongen.client.repository import ADMIN_HEADER
from tritongen.convert.llm.formats import LLM_START_TIMEOUT_S, local_llm_models
from tritongen.errors import ModelLoadError
from tritongen.server.embedded import lint_before_serving, models_that_lint
from tritongen.server.local import RESTRICTED_APIS, LocalTritonServer, is_loopback


def serve_command(
    repo: Annotated[Path, typer.Argument(help="Model repository to serve.")] = Path("model_repository"),
    http_port: Annotated[
        int, typer.Option("--http-port", help="HTTP port (0 picks a free one).", min=0)
    ] = 8000,
    grpc_port: Annotated[
        int, typer.Option("--grpc-port", help="gRPC port (0 picks a free one).", min=0)
    ] = 8001,
    metrics_port: Annotated[
        int, typer.Option("--metrics-port", help="Prometheus metrics port (0 picks a free one).", min=0)
    ] = 8002,
    models: Annotated[str | None, typer.Option("--models", help="Load only these models, e.g. a,b.")] = None,
    host: Annotated[str, typer.Option("--host", help="Address to bind.")] = "127.0.0.1",
    load_timeout: LoadTimeout = None,
    lint: Annotated[
        bool, typer.Option("--lint/--no-lint", help="Check the configs with `tritongen lint` first.")
    ] = True,
    skip_failed: SkipFailed = False,
) -> None:
    """Serve REPO with the embedded Triton server (CPU) until Ctrl-C.

    Bound to an address other machines reach, the model-repository, shared-memory, logging
    and trace APIs answer only requests carrying a key generated for this run.
    """
    admin_key = None if is_loopback(host) else secrets.token_urlsafe(24)
    with user_errors():
        named, refused = _linted(repo, list(parse_name_list(models)), lint, skip_failed)
        if load_timeout is None and local_llm_models(repo, named):
            load_timeout = LLM_START_TIMEOUT_S  # an LLM engine takes minutes to start on a CPU
        server = LocalTritonServer(
            repo,
            http_port=http_port,
            grpc_port=grpc_port,
            metrics_port=metrics_port,
            host=host,
            models=named or None,
            load_timeout_s=load_timeout,
            admin_key=admin_key,
            require_all_models=not skip_failed,
        )
        _start(server)
        failures = {**refused, **server.load_failures}
        _left_out(failures)
        if skip_failed and not server.ready_models():
            server.stop()
            raise ModelLoadError(failures, "no model of the repository loaded: fix them (see above)")
        _serve_until_stopped(server)
    console.print("stopped", highlight=False)


def _linted(repo: Path, named: list[str], lint: bool, skip_failed: bool) -> tuple[list[str], dict[str, str]]:
    """The models to load (none named: all) and those lint left out, with why (``--skip-failed``).

    Raises:
        ConfigError: a config error without ``--skip-failed``, or errors in every model.
    """
    if lint and skip_failed:
        kept, refused = models_that_lint(repo, named, on_finding=show_finding)
        return (kept if refused else named), refused
    if lint:
        lint_before_serving(
            repo, named, "fix them (see above), or start anyway with --no-lint", on_finding=show_finding
        )
    return named, {}


def _start(server: LocalTritonServer) -> None:
    """Start the server; a model that fails to load is named with the server's reason, one line each."""
    try:
        with err_console.status("starting the embedded Triton server"):
            server.start()  # Ctrl-C here stops the half-started server and exits 130
    except ModelLoadError as e:
        for name, reason in sorted(e.reasons.items()):
            line = f"[red]model {escape(name)}:[/] {escape(reason)}"
            err_console.print(line, soft_wrap=True, highlight=False)
        raise


def _left_out(failures: dict[str, str]) -> None:
    """One line per model ``--skip-failed`` left out: its name and the first line of why."""
    for name, reason in sorted(failures.items()):
        show_left_out(name, (reason.strip().splitlines() or ["did not load"])[0])


def _serve_until_stopped(server: LocalTritonServer) -> None:
    """Keep the server up until Ctrl-C or SIGTERM; exit 1 if it dies on its own."""
    with stop_on_signals() as stopping:
        try:
            _print_ready(server)
            while not stopping.wait(0.5):
                if not server.is_running():
                    err_console.print(
                        f"[bold red]error:[/] the Triton server exited unexpectedly. See {server.log_path}.",
                        soft_wrap=True,
                    )
                    raise typer.Exit(1)
        finally:
            with err_console.status("stopping"):
                server.stop()


def _print_ready(server: LocalTritonServer) -> None:
    table = Table(title="embedded Triton server ready", show_header=True)
    table.add_column("endpoint")
    table.add_column("address")
    table.add_row("HTTP", f"http://{server.http_url}")
    table.add_row("gRPC", server.grpc_url)
    table.add_row("metrics", server.metrics_url)
    console.print(table)
    say(f"models ready: {', '.join(server.ready_models())}")
    if server.admin_key is not None:
        console.print(
            f"bound to {server.host}: the {RESTRICTED_APIS} APIs need the header "
            f"{ADMIN_HEADER}: {server.admin_key} (shown once)",
            soft_wrap=True,
            highlight=False,
        )
    say(f"pid {server.pid}; log {server.log_path}; Ctrl-C to stop")
