"""Rendering through the Jinja template and parsing back through Triton's protobuf schema."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tritongen.errors import ConfigError, TemplateError
from tritongen.triton.model_config import (
    DynamicBatching,
    InstanceGroup,
    ModelConfig,
    ModelInput,
    ModelOutput,
)
from tritongen.triton.proto import parse_config_text
from tritongen.triton.render import render_config
from tritongen.triton.templates import builtin_templates_dir

from support.full_config import full_config


def test_every_modelled_field_survives_the_round_trip() -> None:
    config = full_config()
    # The fixture must really set every top-level field, or this test proves less than it claims.
    unset = [name for name in ModelConfig.model_fields if getattr(config, name) in (None, [], {}, "", 0)]
    assert unset == []
    text = render_config(config)
    assert parse_config_text(text) == config


def test_rendered_text_parses_with_the_real_protobuf_schema() -> None:
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2

    message = text_format.Parse(render_config(full_config()), model_config_pb2.ModelConfig())
    assert message.dynamic_batching.preferred_batch_size == [4, 8, 16]
    assert message.instance_group[0].kind == model_config_pb2.ModelInstanceGroup.KIND_GPU
    assert message.parameters["unicode ☃"].string_value == 'naïve\n"quoted"\\'
    assert message.model_transaction_policy.decoupled is True
    assert message.optimization.execution_accelerators.gpu_execution_accelerator[0].name == "tensorrt"


def test_unmodelled_fields_are_kept_through_parse_and_render() -> None:
    text = 'name: "m"\nbackend: "python"\nsequence_batching { max_sequence_idle_microseconds: 5000 }\n'
    config = parse_config_text(text)
    assert "max_sequence_idle_microseconds: 5000" in config.passthrough
    again = parse_config_text(render_config(config))
    assert again.passthrough == config.passthrough


def test_parse_error_names_line_and_column() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config_text('name: "m"\nmax_batch_size: 4\nbogus_field: 1\n', "x/config.pbtxt")
    assert info.value.message.startswith("x/config.pbtxt:3:")
    assert "bogus_field" in info.value.message


def test_semantic_rule_in_parsed_config_is_reported() -> None:
    text = 'name: "m"\nmax_batch_size: 4\ndynamic_batching { preferred_batch_size: [8] }\n'
    with pytest.raises(ConfigError, match="exceed max_batch_size 4"):
        parse_config_text(text)


def test_user_template_overrides_builtin(tmp_path: Path) -> None:
    builtin = (builtin_templates_dir() / "config.pbtxt.j2").read_text()
    (tmp_path / "config.pbtxt.j2").write_text("# my own template\n" + builtin)
    text = render_config(full_config(), tmp_path)
    assert text.startswith("# my own template")


def test_template_that_drops_a_field_is_caught(tmp_path: Path) -> None:
    builtin = (builtin_templates_dir() / "config.pbtxt.j2").read_text()
    dropped = builtin.replace("  optional: true\n", "")
    assert dropped != builtin
    (tmp_path / "config.pbtxt.j2").write_text(dropped)
    with pytest.raises(ConfigError, match="parses to a different config: input should be"):
        render_config(full_config(), tmp_path)


def test_template_syntax_error_names_the_line(tmp_path: Path) -> None:
    (tmp_path / "config.pbtxt.j2").write_text('name: "x"\n{% if config.name %}\nno endif here\n')
    with pytest.raises(TemplateError) as info:
        render_config(full_config(), tmp_path)
    assert "config.pbtxt.j2:" in info.value.message
    assert "syntax error" in info.value.message


def test_template_undefined_variable_names_the_line(tmp_path: Path) -> None:
    (tmp_path / "config.pbtxt.j2").write_text('name: "x"\n\nmax_batch_size: {{ not_a_variable }}\n')
    with pytest.raises(TemplateError) as info:
        render_config(full_config(), tmp_path)
    assert "config.pbtxt.j2:3" in info.value.message
    assert "not_a_variable" in info.value.message


def test_missing_templates_dir_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(TemplateError, match="does not exist"):
        render_config(full_config(), tmp_path / "nope")


_names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,12}", fullmatch=True)
_types = st.sampled_from(["TYPE_FP32", "TYPE_FP16", "TYPE_INT64", "TYPE_INT8", "TYPE_BOOL", "TYPE_STRING"])
_dims = st.lists(st.one_of(st.just(-1), st.integers(1, 4096)), min_size=1, max_size=4)


@st.composite
def _configs(draw: st.DrawFn) -> ModelConfig:
    max_batch = draw(st.integers(0, 256))
    names = draw(st.lists(_names, min_size=2, max_size=6, unique=True))
    split = draw(st.integers(1, len(names) - 1))
    batching = None
    if max_batch > 0 and draw(st.booleans()):
        sizes = draw(st.lists(st.integers(1, max_batch), max_size=4, unique=True))
        batching = DynamicBatching(
            preferred_batch_size=sizes,
            max_queue_delay_microseconds=draw(st.integers(0, 10**6)),
            preserve_ordering=draw(st.booleans()),
        )
    return ModelConfig(
        name=draw(_names),
        backend=draw(st.sampled_from(["python", "onnxruntime", "pytorch"])),
        max_batch_size=max_batch,
        input=[ModelInput(name=n, data_type=draw(_types), dims=draw(_dims)) for n in names[:split]],
        output=[ModelOutput(name=n, data_type=draw(_types), dims=draw(_dims)) for n in names[split:]],
        dynamic_batching=batching,
        instance_group=[
            InstanceGroup(
                count=draw(st.integers(1, 8)),
                kind=draw(st.sampled_from(["KIND_CPU", "KIND_GPU", "KIND_AUTO"])),
            )
        ],
        parameters=draw(st.dictionaries(_names, st.text(max_size=20), max_size=3)),
    )


@settings(max_examples=60, deadline=None)
@given(_configs())
def test_generated_configs_round_trip(config: ModelConfig) -> None:
    assert parse_config_text(render_config(config)) == config
