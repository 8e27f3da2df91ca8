"""The config a model starts from when Triton completes it: read from a server that has loaded it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tritongen.client.control import ModelControl
from tritongen.errors import ServerError
from tritongen.server.embedded import ServingHooks
from tritongen.server.local import LocalTritonServer
from tritongen.triton.model_config import ModelConfig
from tritongen.triton.proto import read_config
from tritongen.triton.served import config_from_served, server_completes


@dataclass(frozen=True)
class BaseConfig:
    """A model's config as a command starts from it, and why it came from the server if it did."""

    config: ModelConfig
    note: str | None = None
    """Where the server completes the config: why, and what the server reports (None: the file was read)."""


def base_config(
    repo: Path,
    model: str,
    url: str | None = None,
    admin_key: str | None = None,
    hooks: ServingHooks | None = None,
) -> BaseConfig:
    """``repo/model/config.pbtxt``, or the config the server reports where the server completes it.

    The server is the one at ``url`` (the model is loaded there if it is not), else the
    embedded server started on ``repo`` with just ``model`` for the call (``hooks`` told of
    the wait).

    Raises:
        TritongenError: the file is unusable, or the server cannot load the model or report its config.
    """
    model_dir = repo / model
    why = server_completes(model_dir)
    if why is None:
        return BaseConfig(read_config(model_dir / "config.pbtxt"))
    if url is None:
        with (hooks or ServingHooks()).wait(f"reading the config the server fills in for {model}"):
            server = LocalTritonServer(repo, http_port=0, grpc_port=0, metrics_port=0, models=[model])
            with server:
                served = _served(server.http_url, model, admin_key=None)
    else:
        served = _served(url, model, admin_key)
    config = config_from_served(served, f"the config the server reports for '{model}'")
    instances = sum(group.count for group in config.instance_group) or 1
    note = (
        f"{why}: using the config the server reports (max batch {config.max_batch_size}, "
        f"{len(config.input)} input(s), {len(config.output)} output(s), "
        f"{'dynamic batching, ' if config.dynamic_batching is not None else ''}{instances} instance(s))"
    )
    return BaseConfig(config, note)


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
