"""Parse config.pbtxt text with Triton's own protobuf schema and convert it to the typed model."""

from __future__ import annotations

import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from tritongen.errors import ConfigError
from tritongen.triton.config_text import ConfigSyntaxError, parse_model_config
from tritongen.triton.model_config import ModelConfig

_MODELLED_FIELDS = [name for name in ModelConfig.model_fields if name != "passthrough"]


def parse_config_text(
    text: str, source: str = "config.pbtxt", default_name: str | None = None, lenient: bool = False
) -> ModelConfig:
    """Parse protobuf text into a :class:`ModelConfig`.

    ``default_name`` stands for a ``name`` the text leaves out (Triton takes the directory's).
    ``lenient`` leaves out fields the typed model does not model inside the blocks it
    models (``input { format: FORMAT_NCHW }``) instead of refusing them: for an editor that
    keeps them in the file.

    Raises:
        ConfigError: the text does not parse with Triton's schema (the message carries
            the file, line and column) or breaks one of the typed model's rules.
    """
    from google.protobuf import json_format, text_format
    from tritonclient.grpc import model_config_pb2

    try:
        message = parse_model_config(text)
    except ConfigSyntaxError as e:
        raise ConfigError(
            f"{source}:{e.line}:{e.column}: not a valid Triton model config: {e.detail}",
            "fix the field at that position (see Triton's model_config.proto)",
        ) from e
    everything = json_format.MessageToDict(message, preserving_proto_field_name=True)
    data = {key: value for key, value in everything.items() if key in _MODELLED_FIELDS}
    rest = model_config_pb2.ModelConfig()
    rest.CopyFrom(message)
    for field in _MODELLED_FIELDS:
        rest.ClearField(field)
    data["passthrough"] = text_format.MessageToString(rest).strip()
    if default_name is not None and not data.get("name"):
        data["name"] = default_name
    if lenient:
        unmodelled_fields(data, ModelConfig, prune=True)
    try:
        return ModelConfig.model_validate(data)
    except ValidationError as e:
        raise ConfigError(f"{source}: {describe_validation_error(e)}", _hint_for(e)) from e


def read_config(path: Path) -> ModelConfig:
    """Read and parse a ``config.pbtxt`` file (a missing ``name`` is its directory's, as for Triton)."""
    return parse_config_text(read_config_text(path), str(path), default_name=path.parent.name)


def read_config_text(path: Path) -> str:
    """The text of a ``config.pbtxt`` file.

    Raises:
        ConfigError: the file is missing or unreadable.
    """
    try:
        return path.read_bytes().decode("utf-8")  # as written: "\r\n" stays
    except FileNotFoundError as e:
        raise ConfigError(f"{path} does not exist", "point at a model directory holding config.pbtxt") from e
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"cannot read {path}: {e}", "check the file's permissions and encoding") from e


def unmodelled_fields(data: dict[str, Any], model: type[BaseModel], prune: bool = False) -> list[str]:
    """Paths of the keys of ``data`` (nested) that ``model`` does not model; ``prune`` drops them."""
    found: list[str] = []
    for key in list(data):
        field = model.model_fields.get(key)
        if field is None:
            found.append(key)
            if prune:
                del data[key]
            continue
        inner = _modelled_class(field.annotation)
        if inner is None:
            continue
        value = data[key]
        items = value if isinstance(value, list) else value.values() if _is_map(field.annotation) else [value]
        for item in items:
            if isinstance(item, dict):
                found += [f"{key}.{path}" for path in unmodelled_fields(item, inner, prune)]
    return found


def _modelled_class(annotation: Any) -> type[BaseModel] | None:
    """The typed block inside ``X``, ``X | None``, ``list[X]`` or ``dict[K, X]``, if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for argument in typing.get_args(annotation):
        found = _modelled_class(argument)
        if found is not None:
            return found
    return None


def _is_map(annotation: Any) -> bool:
    return typing.get_origin(annotation) is dict


def describe_validation_error(error: ValidationError) -> str:
    """Turn pydantic's multi-line report into one line: the first problem and its field path."""
    first = error.errors()[0]
    location = ".".join(str(part) for part in first["loc"])
    message = first["msg"].removeprefix("Value error, ")
    if first["type"] == "extra_forbidden":
        message = "tritongen does not model this field inside a modelled block"
    more = len(error.errors()) - 1
    suffix = f" (and {more} more)" if more else ""
    return f"{location}: {message}{suffix}" if location else f"{message}{suffix}"


def _hint_for(error: ValidationError) -> str:
    if any(item["type"] == "extra_forbidden" for item in error.errors()):
        return "edit this config by hand, or move the field out of tritongen's modelled blocks"
    return "fix the config so that it follows Triton's rules"
