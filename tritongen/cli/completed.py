"""The config a command starts from when Triton completes the model's config itself."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.markup import escape

from tritongen.cli.common import console, err_console
from tritongen.client.control import ModelControl
from tritongen.errors import ServerError
from tritongen.server.local import LocalTritonServer
from tritongen.triton.model_config import ModelConfig
from tritongen.triton.proto import read_config
from tritongen.triton.served import config_from_served, server_completes


def base_config(repo: Path, model: str, url: str | None = None, admin_key: str | None = None) -> ModelConfig:
    """``repo/model/config.pbtxt``, or the config the server reports where the server completes it.

    The server is the one at ``url`` (the model is loaded there if it is not), else the
    embedded server started on ``repo`` with just ``model`` for the call. One line says
    which config was taken and why.

    Raises:
        TritongenError: the file is unusable, or the server cannot load the model or report its config.
    """
    model_dir = repo / model
    why = server_completes(model_dir)
    if why is None:
        return read_config(model_dir / "config.pbtxt")
    if url is None:
        with err_console.status(f"reading the config the server fills in for {model}"):
            server = LocalTritonServer(repo, http_port=0, grpc_port=0, metrics_port=0, models=[model])
            with server:
                served = _served(server.http_url, model, admin_key=None)
    else:
        served = _served(url, model, admin_key)
    config = config_from_served(served, f"the config the server reports for '{model}'")
    instances = sum(group.count for group in config.instance_group) or 1
    console.print(
        f"[bold]{escape(model)}[/]: {escape(why)}: using the config the server reports "
        f"(max batch {config.max_batch_size}, {len(config.input)} input(s), {len(config.output)} output(s), "
        f"{'dynamic batching, ' if config.dynamic_batching is not None else ''}{instances} instance(s))",
        highlight=False,
        soft_wrap=True,
    )
    return config


def _served(url: str, model: str, admin_key: str | None) -> dict[str, Any]:
    """The config ``model`` runs with on the server at ``url``, loading it first if it is not loaded."""
    control = ModelControl(url, model, admin_key=admin_key)
    try:
        try:
            return control.served_config()
        except ServerError:
            control.load()
            return control.served_config()
    finally:
        control.close()
