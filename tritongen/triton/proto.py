"""The one reader of ``config.pbtxt``: Triton's protobuf schema, then the typed model.

Every config text is parsed here: a file (:func:`read_config_file`, :func:`read_config`),
text (:func:`parse_model_config` to the protobuf message, :func:`parse_config_text` to the
typed :class:`ModelConfig`), and a config a server reports (:func:`config_from_served`). A
syntax error keeps its line and column.
"""

from __future__ import annotations

import re
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from tritongen.errors import ConfigError
from tritongen.triton.model_config import ModelConfig

CONFIG_FILE = "config.pbtxt"
_TWICE = re.compile(r'Message type "([\w.]+)" should not have multiple "(\w+)" fields\.?')


class ConfigSyntaxError(Exception):
    """The text is not a valid ``inference.ModelConfig``: where, and what the parser said."""

    def __init__(self, line: int | None, column: int | None, detail: str) -> None:
        super().__init__(detail)
        self.line = line
        self.column = column
        self.detail = detail


def parse_model_config(text: str) -> Any:
    """Parse ``text`` into an ``inference.ModelConfig`` message.

    Raises:
        ConfigSyntaxError: the first syntax error (1-based line and column where known).
    """
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2

    message = model_config_pb2.ModelConfig()
    try:
        text_format.Parse(text, message)
    except text_format.ParseError as e:
        line, column = e.GetLine(), e.GetColumn()
        detail = str(e)
        prefix = f"{line}:{column} : "
        raise ConfigSyntaxError(line, column, _plain(detail.removeprefix(prefix))) from e
    return message


def _plain(detail: str) -> str:
    """The parser's complaint about a repeated singular field, in words users search for."""
    twice = _TWICE.fullmatch(detail)
    if twice is None:
        return detail
    where = twice.group(1).removeprefix("inference.")
    return f'field "{twice.group(2)}" is given twice (in {where}); it may appear once'


@dataclass(frozen=True)
class ConfigFile:
    """A model directory's ``config.pbtxt``, read once: its text and the message it parses to."""

    path: Path
    text: str | None
    """None: there is no file, or it cannot be read as UTF-8."""
    message: Any | None
    """The ``inference.ModelConfig`` message; None when there is no text or it is not a valid config."""

    def as_dict(self) -> dict[str, Any] | None:
        """The message as JSON (protobuf field names, as a server reports a config), or None."""
        if self.message is None:
            return None
        from google.protobuf import json_format

        found: dict[str, Any] = json_format.MessageToDict(self.message, preserving_proto_field_name=True)
        return found


def read_config_file(model_dir: Path) -> ConfigFile:
    """``model_dir/config.pbtxt`` as it is (``message`` None: missing, unreadable or not a valid config)."""
    path = model_dir / CONFIG_FILE
    try:
        text: str | None = path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return ConfigFile(path, text=None, message=None)
    try:
        message = parse_model_config(text or "")
    except (ConfigSyntaxError, ValueError, TypeError, RecursionError, OverflowError):
        message = None
    return ConfigFile(path, text, message)


_MODELLED_FIELDS = [name for name in ModelConfig.model_fields if name != "passthrough"]


def parse_config_text(
    text: str, source: str = CONFIG_FILE, default_name: str | None = None, lenient: bool = False
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
