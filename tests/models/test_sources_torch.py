"""Sources that need torch: PyTorch factories and TorchScript files, their signatures probed."""

from __future__ import annotations

from pathlib import Path

import pytest

from tritongen.errors import SourceError
from tritongen.sources.model_source import load_source

torch = pytest.importorskip("torch", reason="the torch extra is not installed")


def test_factory_signature_is_probed_from_the_module() -> None:
    source = load_source("support.torch_factories:mlp", ["input:FP32:-1,16"])
    assert source.kind == "pytorch"
    assert source.signature.batched
    assert [(t.name, t.data_type, t.dims) for t in source.signature.outputs] == [
        ("output", "TYPE_FP32", (4,))
    ]


def test_dict_outputs_keep_their_keys_and_dynamic_dims() -> None:
    source = load_source(
        "support.torch_factories:pooled", ["input_ids:INT64:-1,-1", "attention_mask:INT64:-1,-1"]
    )
    outputs = {t.name: t.dims for t in source.signature.outputs}
    assert outputs == {"pooled": (8,), "scores": (-1, 3)}
    renamed = load_source(
        "support.torch_factories:pooled", ["input_ids:INT64:-1,-1", "attention_mask:INT64:-1,-1"], ["a", "b"]
    )
    assert [t.name for t in renamed.signature.outputs] == ["a", "b"]


@pytest.mark.parametrize(
    ("reference", "specs", "match"),
    [
        ("no_such_module_xyz:make", ["x:FP32:-1,4"], "cannot import"),
        ("support.torch_factories:missing", ["x:FP32:-1,4"], "no attribute"),
        ("support.torch_factories:not_a_module", ["x:FP32:-1,4"], "not a torch.nn.Module"),
        ("support.torch_factories:raises", ["x:FP32:-1,4"], "weights not found"),
        ("support.torch_factories:mlp", [], "--input-spec"),
        ("support.torch_factories:mlp", ["input:FP32:-1,8"], "rejects inputs"),
        (
            "support.torch_factories:pooled",
            ["attention_mask:INT64:-1,-1", "input_ids:INT64:-1,-1"],
            "order",
        ),
        ("support.torch_factories:mlp", ["input:FP32:-1,16"], None),
    ],
)
def test_factory_errors_are_clear(reference: str, specs: list[str], match: str | None) -> None:
    if match is None:
        load_source(reference, specs)
        return
    with pytest.raises(SourceError, match=match) as info:
        load_source(reference, specs)
    assert "\n" not in str(info.value)


def test_torchscript_file_source(tmp_path: Path) -> None:
    path = tmp_path / "mlp.pt"
    from support.torch_factories import mlp

    torch.jit.trace(mlp().eval(), torch.zeros(2, 16)).save(str(path))
    source = load_source(str(path), ["x:FP32:-1,16"], ["logits"])
    assert source.kind == "torchscript"
    assert [t.name for t in source.signature.outputs] == ["logits"]


def test_a_file_that_is_not_torchscript_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "model.pt"
    path.write_bytes(b"not a zip archive at all")
    with pytest.raises(SourceError, match="not a loadable TorchScript"):
        load_source(str(path), ["x:FP32:-1,16"])
