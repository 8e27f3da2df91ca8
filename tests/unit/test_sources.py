"""Sources: --input-spec parsing, source kinds, and specs checked against ONNX models (no torch needed).

The PyTorch factory and TorchScript file sources are tested in test_sources_torch.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tritongen.errors import SourceError
from tritongen.sources.input_spec import check_specs_match, input_tensors, parse_input_spec, parse_input_specs
from tritongen.sources.model_source import load_source, source_kind
from tritongen.sources.onnx_source import load_onnx


def test_input_spec_parses_names_types_and_dims() -> None:
    spec = parse_input_spec("input_ids:int64:-1,128")
    assert (spec.name, spec.data_type, spec.shape) == ("input_ids", "TYPE_INT64", (-1, 128))
    assert parse_input_spec("x:float32:-1,3").data_type == "TYPE_FP32"
    assert parse_input_spec("x:TYPE_FP16:4").data_type == "TYPE_FP16"
    assert spec.describe() == "input_ids:INT64:-1,128"


@pytest.mark.parametrize(
    "text",
    [
        "x",
        "x:FP32",
        "x:FP33:-1,3",
        "x:FP32:-1,0",
        "x:FP32:-2",
        "x:FP32:a,b",
        "1x:FP32:3",
        "a/b:FP32:3",
    ],
)
def test_malformed_input_specs_are_one_line_errors(text: str) -> None:
    with pytest.raises(SourceError) as info:
        parse_input_spec(text)
    assert "\n" not in str(info.value)


def test_a_scalar_input_spec_is_rank_0_served_as_one_value() -> None:
    for text in ("sr:INT64:scalar", "sr:INT64:", "sr:INT64:[]"):
        spec = parse_input_spec(text)
        assert spec.shape == () and spec.describe() == "sr:INT64:scalar"
    (tensor,) = input_tensors([parse_input_spec("sr:INT64:scalar")], batched=True)
    assert tensor.dims == (1,) and tensor.scalar


def test_repeated_input_spec_names_are_refused() -> None:
    with pytest.raises(SourceError, match="twice"):
        parse_input_specs(["x:FP32:-1,3", "x:FP32:-1,3"])


def test_source_kind_by_form(tmp_path: Path) -> None:
    assert source_kind("m.onnx") == "onnx"
    assert source_kind("m.pt") == "torchscript"
    assert source_kind("support.torch_factories:mlp") == "pytorch"
    with pytest.raises(SourceError, match="cannot tell"):
        source_kind("model.bin")


def test_spec_contradicting_an_onnx_model_is_refused(example_models: dict[str, Path]) -> None:
    onnx_source = load_onnx(example_models["mlp"])
    check_specs_match(parse_input_specs(["input:FP32:-1,16"]), onnx_source.signature, "mlp")
    with pytest.raises(SourceError, match="contradicts"):
        check_specs_match(parse_input_specs(["input:FP32:-1,8"]), onnx_source.signature, "mlp")
    with pytest.raises(SourceError, match="contradicts"):
        check_specs_match(parse_input_specs(["input:INT64:-1,16"]), onnx_source.signature, "mlp")
    with pytest.raises(SourceError, match="does not have"):
        load_source(str(example_models["mlp"]), ["pixels:FP32:-1,16"])
