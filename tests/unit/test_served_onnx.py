"""The served copy of an ONNX graph: scalars as ``[1]``, ``--constant`` inputs frozen, external data copied.

Each adapted graph runs in ONNX Runtime and answers what the source answers for the same values.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import onnx
import pytest

from tritongen.convert.onnx import adapted_runner, onnx_runner, write_onnx_artifact
from tritongen.convert.served_onnx import write_served_onnx
from tritongen.convert.wrappers import SCALARS_PARAMETER
from tritongen.convert.wrappers.tritongen_runtime import SCALARS_PARAMETER as RUNTIME_PARAMETER
from tritongen.convert.wrappers.tritongen_runtime import batch_key, group_by_shape
from tritongen.errors import ConfigError
from tritongen.sources.model_source import load_source, without_batching
from tritongen.sources.onnx_source import load_onnx

from support.real_models import external, gain, vad


def _served(source_path: Path, tmp_path: Path, constants: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    source = load_source(str(source_path), constants=constants or {})
    served = write_served_onnx(source_path, source.adaptation, tmp_path / "served" / "model.onnx")
    reference = adapted_runner(
        onnx_runner(source_path, source.signature), source.adaptation, source.signature
    )
    return source, onnx_runner(served, source.signature), reference


def test_a_scalar_beside_a_batch_on_axis_1_is_served_as_dims_1_without_batching(tmp_path: Path) -> None:
    source, served, reference = _served(vad(tmp_path / "vad.onnx"), tmp_path)
    signature = source.signature
    assert not signature.batched and [t.dims for t in signature.inputs] == [(-1, -1), (2, -1, 16), (1,)]
    assert "'state' carries the batch (batch) on axis 1 ([2,batch,16])" in signature.notes[0]
    rng = np.random.default_rng(0)
    feed = {
        "input": rng.standard_normal((3, 80)).astype(np.float32),
        "state": rng.standard_normal((2, 3, 16)).astype(np.float32),
        "sr": np.array([16000], dtype=np.int64),
    }
    for got, want in zip(served(feed), reference(feed), strict=True):
        np.testing.assert_array_equal(got, want)
    graph = onnx.load(str(tmp_path / "served" / "model.onnx")).graph
    sr = next(v for v in graph.input if v.name == "sr")
    assert [d.dim_value for d in sr.type.tensor_type.shape.dim] == [1]


def test_a_scalar_on_a_batching_model_takes_the_first_row(tmp_path: Path) -> None:
    source, served, reference = _served(gain(tmp_path / "gain.onnx"), tmp_path)
    assert source.signature.batched and source.adaptation.batched
    feed = {"x": np.ones((4, 16), dtype=np.float32), "gain": np.array([[3.0]] * 4, dtype=np.float32)}
    (got,) = served(feed)
    np.testing.assert_array_equal(got, reference(feed)[0])
    assert float(got[0, 0]) == 3.0
    unbatched = without_batching(source, "one value per request")
    assert [t.dims for t in unbatched.signature.inputs] == [(-1, 16), (1,)]
    assert not unbatched.adaptation.batched and unbatched.signature.notes[-1] == "one value per request"


def test_a_constant_freezes_an_input_and_leaves_the_signature(tmp_path: Path) -> None:
    path = vad(tmp_path / "vad.onnx")
    source, served, reference = _served(path, tmp_path, {"sr": "8000"})
    assert [t.name for t in source.signature.inputs] == ["input", "state"]
    assert "'sr' frozen at 8000 (--constant)" in source.signature.notes
    feed = {"input": np.ones((1, 70), dtype=np.float32), "state": np.zeros((2, 1, 16), dtype=np.float32)}
    np.testing.assert_array_equal(served(feed)[0], reference(feed)[0])
    for constants, words in (
        ({"rate": "1"}, "--constant names 'rate', which is not an input of"),
        ({"sr": "fast"}, "--constant sr: 'fast' is not an int"),
        ({"state": "0"}, "--constant state: the input has dynamic dims [2,-1,16]"),
    ):
        with pytest.raises(ConfigError) as refused:
            load_source(str(path), constants=constants)
        assert words in refused.value.message


def test_external_weights_are_copied_beside_the_model_and_never_parsed(tmp_path: Path) -> None:
    path = external(tmp_path / "src" / "external.onnx")
    source = load_onnx(path)
    assert source.model.graph.initializer[0].data_location == onnx.TensorProto.EXTERNAL  # not loaded
    artifact = write_onnx_artifact(path, tmp_path / "external_onnx", "local")
    assert "1/external.weights" in artifact.files
    copied = tmp_path / "external_onnx" / "1" / "external.weights"
    digest = hashlib.sha256((tmp_path / "src" / "external.weights").read_bytes()).hexdigest()
    assert hashlib.sha256(copied.read_bytes()).hexdigest() == digest and copied.stat().st_nlink == 1
    feed = {"x": np.ones((2, 64), dtype=np.float32)}
    runner = onnx_runner(tmp_path / "external_onnx" / "1" / "model.onnx", source.signature)
    np.testing.assert_array_equal(runner(feed)[0], onnx_runner(path, source.signature)(feed)[0])


def test_requests_with_other_scalar_values_do_not_share_a_batch() -> None:
    assert SCALARS_PARAMETER == RUNTIME_PARAMETER
    feeds = [
        {"x": np.ones((1, 16), np.float32), "gain": np.array([[2.0]], np.float32)},
        {"x": np.ones((2, 16), np.float32), "gain": np.array([[3.0], [3.0]], np.float32)},
        {"x": np.ones((1, 16), np.float32), "gain": np.array([[2.0]], np.float32)},
    ]
    keys = [batch_key(f, ["x", "gain"], ["gain"]) for f in feeds]
    assert group_by_shape(keys) == [[0, 2], [1]]
    assert group_by_shape([batch_key(f, ["x", "gain"], []) for f in feeds]) == [[0, 1, 2]]
