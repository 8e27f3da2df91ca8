"""Live model reloads through Triton's model-control API, and a check that they took effect."""

from __future__ import annotations

import json
from typing import Any

from tritongen.client.repository import RepositoryControl
from tritongen.errors import ServerError
from tritongen.triton.model_config import ModelConfig
from tritongen.triton.proto import parse_model_config
from tritongen.triton.render import render_config


def config_json(config: ModelConfig) -> str:
    """The config as Triton's JSON form (protobuf field names), for the load API."""
    from google.protobuf import json_format

    message = parse_model_config(render_config(config))
    text: str = json_format.MessageToJson(message, preserving_proto_field_name=True, indent=None)
    return text


class ModelControl:
    """Load, reload and read the config of one model on a server in explicit model-control mode."""

    def __init__(self, url: str, model: str, admin_key: str | None = None) -> None:
        """Connect over HTTP (``host:port``); ``admin_key`` opens a restricted repository API."""
        self.url = url
        self.model = model
        self.repository = RepositoryControl(url, timeout_s=120, admin_key=admin_key)
        self.client = self.repository.client

    def load(self, config: ModelConfig | None = None) -> None:
        """Reload the model, with ``config`` instead of its config.pbtxt when given.

        Raises:
            ModelLoadError: the server refused the config (it keeps serving the old one).
            ServerError: the server cannot be reached.
        """
        text = None if config is None else config_json(config)
        self.repository.load(self.model, text, refused_hint="the candidate config was refused")

    def is_live(self) -> bool:
        """Whether the server still answers its health check."""
        try:
            return bool(self.client.is_server_live())
        except Exception:  # refused, reset, timed out: gone either way
            return False

    def served_config(self) -> dict[str, Any]:
        """The config the server runs now (model-config API)."""
        from tritonclient.utils import InferenceServerException

        try:
            served: dict[str, Any] = self.client.get_model_config(self.model)
        except InferenceServerException as e:
            raise ServerError(
                f"cannot read the config of '{self.model}': {e.message()}", "is it loaded?"
            ) from e
        return served

    def loaded_config(self) -> dict[str, Any]:
        """The config the server runs, the model loaded first if it is not.

        Raises:
            ModelLoadError: the model does not load.
            ServerError: the server cannot be reached or reports no config.
        """
        try:
            return self.served_config()
        except ServerError:
            self.load()
            return self.served_config()

    def check_serving(self, config: ModelConfig) -> None:
        """Confirm the server runs ``config``'s batching and instances, not a stale config.

        Raises:
            ServerError: the served config differs.
        """
        served = self.served_config()
        want = json.loads(config_json(config))
        differences = [key for key in ("max_batch_size",) if int(served.get(key, 0)) != int(want.get(key, 0))]
        served_batching = served.get("dynamic_batching")
        want_batching = want.get("dynamic_batching")
        if (served_batching is None) != (want_batching is None):
            differences.append("dynamic_batching")
        elif served_batching is not None and want_batching is not None:
            for key in ("preferred_batch_size", "max_queue_delay_microseconds"):
                wanted_value = _normal(want_batching.get(key))
                if key == "preferred_batch_size" and not wanted_value:
                    continue  # "let Triton decide": the server fills in its own choice
                if _normal(served_batching.get(key)) != wanted_value:
                    differences.append(f"dynamic_batching.{key}")
        counts = [int(g.get("count", 1)) for g in served.get("instance_group", [])]
        wanted = [int(g.get("count", 1)) for g in want.get("instance_group", [])]
        if wanted and counts != wanted:
            differences.append("instance_group.count")
        if differences:
            raise ServerError(
                f"'{self.model}' does not run the candidate config after reloading: "
                f"{', '.join(differences)} differ",
                "is the server in explicit model-control mode (--model-control-mode=explicit)?",
            )

    def close(self) -> None:
        """Close the connection."""
        self.repository.close()


def _normal(value: Any) -> tuple[int, ...]:
    """A config value as ints: JSON carries 64-bit ints as strings, and omits zero and empty."""
    if value is None:
        return ()
    values = value if isinstance(value, list) else [value]
    return (
        tuple(int(v) for v in values if int(v) != 0)
        if not isinstance(value, list)
        else tuple(int(v) for v in values)
    )
