"""Render a typed model config to config.pbtxt and prove it survives Triton's schema."""

from __future__ import annotations

from pathlib import Path

from tritongen.errors import ConfigError
from tritongen.triton.model_config import ModelConfig
from tritongen.triton.proto import parse_config_text

CONFIG_TEMPLATE = "config.pbtxt.j2"


def render_config(config: ModelConfig, templates_dir: Path | None = None) -> str:
    """Render ``config`` through ``config.pbtxt.j2`` and check the result.

    The text is parsed back with Triton's protobuf schema; if it does not parse, or
    parses to anything other than ``config``, the template is wrong and this raises.

    Raises:
        TemplateError: the template itself is broken.
        ConfigError: the rendered text does not round-trip to ``config``.
    """
    from tritongen.triton.templates import render_template

    text = render_template(CONFIG_TEMPLATE, templates_dir, config=config)
    parsed = parse_config_text(text, f"rendered {CONFIG_TEMPLATE}")
    if parsed != config:
        raise ConfigError(
            f"rendered {CONFIG_TEMPLATE} for '{config.name}' parses to a different config: "
            + _first_difference(config, parsed),
            "fix the template so that it writes every field of the config",
        )
    return text


def _first_difference(expected: ModelConfig, actual: ModelConfig) -> str:
    want = expected.model_dump()
    got = actual.model_dump()
    for key in want:
        if want[key] != got.get(key):
            return f"{key} should be {want[key]!r}, the template wrote {got.get(key)!r}"
    return "unknown difference"
