"""Config text parsed with Triton's protobuf schema; a syntax error keeps its line and column."""

from __future__ import annotations

import re
from typing import Any

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
