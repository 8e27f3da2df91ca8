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


def test_a_module_that_needs_32_pixels_is_probed_on_the_ladder_or_at_the_given_shape() -> None:
    source = load_source("support.torch_factories:strided", ["image:FP32:-1,3,-1,-1"])
    assert source.torch is not None and source.torch.sample_shapes == {"image": (2, 3, 32, 32)}
    assert [t.dims for t in source.signature.outputs] == [(6, -1, -1)]  # found dynamic at 32 and 64
    given = load_source(
        "support.torch_factories:strided", ["image:FP32:-1,3,-1,-1"], shapes={"image": (3, 64, 96)}
    )
    assert given.torch is not None and given.torch.sample_shapes == {"image": (2, 3, 64, 96)}
    assert [t.dims for t in given.signature.outputs] == [(6, -1, -1)]  # the second probe doubles them
    with pytest.raises(SourceError) as refused:
        load_source("support.torch_factories:strided", ["image:FP32:-1,3,-1,17"])
    line = refused.value.one_line()
    assert "rejects random inputs at every size tried" in line and "--shape image=1,3,320,17" in line


def test_value_arguments_are_frozen_with_constant_or_named_in_one_line(tmp_path: Path) -> None:
    from support.real_models import scale_int

    with pytest.raises(SourceError) as refused:
        load_source("support.torch_factories:resampled", ["x:FP32:-1,4"])
    assert "forward() takes 'rate: int'" in refused.value.message
    assert refused.value.hint == "freeze it with --constant rate=VALUE"
    source = load_source("support.torch_factories:resampled", ["x:FP32:-1,4"], constants={"rate": "8000"})
    assert source.torch is not None and source.torch.adapt is not None
    (out,) = source.torch.module(torch.ones(2, 4)).numpy()[:1]
    assert out.tolist() == [0.5] * 4
    path = scale_int(tmp_path / "scale_int.pt")
    frozen = load_source(str(path), ["x:FP32:-1,16"], constants={"sr": "32000"})
    assert "'sr' frozen at 32000 (--constant)" in frozen.signature.notes
    with pytest.raises(SourceError, match="--constant names 'rate', which is not an argument"):
        load_source(str(path), ["x:FP32:-1,16"], constants={"rate": "1"})


def test_a_scalar_tensor_argument_is_served_as_dims_1() -> None:
    source = load_source("support.torch_factories:resampled", ["x:FP32:-1,4", "rate:INT64:scalar"])
    assert source.signature.batched and [t.dims for t in source.signature.inputs] == [(4,), (1,)]
    assert source.torch is not None
    out = source.torch.module(torch.ones(3, 4), torch.tensor([[16000], [1], [1]]))
    assert out.tolist() == [[1.0] * 4] * 3  # the first row's value for the whole request


def test_state_kept_between_calls_is_refused_unless_the_answers_ignore_it(tmp_path: Path) -> None:
    from support.real_models import accumulator, counter

    with pytest.raises(SourceError) as refused:
        load_source(str(accumulator(tmp_path / "acc.pt")), ["x:FP32:-1,16"])
    assert "keeps state in self.total between calls" in refused.value.message
    assert "\n" not in refused.value.one_line()
    with pytest.raises(SourceError, match="keeps state in its buffers"):
        load_source("support.torch_factories:running_mean", ["x:FP32:-1,4"])
    served = load_source(str(counter(tmp_path / "counter.pt")), ["x:FP32:-1,16"])
    assert any("writes self.calls, but its answers do not depend on it" in n for n in served.signature.notes)
