"""The config a server runs, as tritongen's typed config, and when it differs from the model's file.

Triton completes a config on load: a model directory without ``config.pbtxt`` gets its
backend from the model file, and the backend fills in inputs, outputs and batching (the
Python backend through ``TritonPythonModel.auto_complete_config``). For such a model only
the server knows the config; ``GET /v2/models/NAME/config`` reports it as JSON with
Triton's field names, which converts through Triton's protobuf schema.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tritongen.errors import ConfigError
from tritongen.triton.autofill import autofill, numeric_versions, python_auto_complete, undeclared_tensors
from tritongen.triton.config_text import ConfigSyntaxError, parse_model_config
from tritongen.triton.model_config import ModelConfig
from tritongen.triton.proto import parse_config_text

CONFIG_FILE = "config.pbtxt"


def config_from_served(data: dict[str, Any], source: str = "the served config") -> ModelConfig:
    """Convert the JSON config a server reports (model-config API) to a :class:`ModelConfig`.

    Fields this protobuf schema does not know (a newer server) are dropped; fields
    tritongen does not model are kept as passthrough text.

    Raises:
        ConfigError: the JSON is not a Triton model config.
    """
    from google.protobuf import json_format, text_format
    from tritonclient.grpc import model_config_pb2

    message = model_config_pb2.ModelConfig()
    try:
        json_format.ParseDict(data, message, ignore_unknown_fields=True)
    except (json_format.ParseError, TypeError, ValueError) as e:
        raise ConfigError(
            f"{source} is not a Triton model config: {e}", "check the server is a Triton Inference Server"
        ) from e
    return parse_config_text(text_format.MessageToString(message), source)


def server_completes(model_dir: Path) -> str | None:
    """Why the server's config, not ``config.pbtxt``, describes the model (None: the file does).

    The server completes the config when there is no file, when the file declares no
    inputs or no outputs (the backend fills them in), or when a Python model's
    ``auto_complete_config`` may change it on every load.
    """
    path = model_dir / CONFIG_FILE
    if not path.exists():
        return f"no {CONFIG_FILE}"
    try:
        message = parse_model_config(path.read_text(encoding="utf-8"))
    except (ConfigSyntaxError, OSError, UnicodeDecodeError, ValueError):
        return None  # reading the file reports the problem
    if message.platform == "ensemble":
        return None
    missing = undeclared_tensors(message)  # the condition lint's note uses too
    if missing:
        return f"{CONFIG_FILE} declares no {missing}"
    backend = message.backend or (autofill(model_dir).backend if not message.platform else "")
    versions, _ = numeric_versions(model_dir)
    if backend == "python" and versions:
        model_py = model_dir / str(max(versions)) / (message.default_model_filename or "model.py")
        if python_auto_complete(model_py) is True:
            return f"{model_py.relative_to(model_dir)} completes it in auto_complete_config"
    return None
