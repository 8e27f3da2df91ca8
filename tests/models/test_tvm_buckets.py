"""TVM shape buckets end to end: one library per bucket, the served wrapper padding and slicing.

Built from the small text encoder example (``input_ids``/``attention_mask`` [batch, seq]
-> ``embedding`` [batch, 8]); every answer is compared with ONNX Runtime on the source.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tritongen.convert.artifact import Artifact, OnnxBuild
from tritongen.convert.tvm import LIBRARY, METADATA, TvmOptions, tvm_unavailable_reason, write_tvm_artifact
from tritongen.convert.tvm.samples import bucket_feeds, bucket_shapes
from tritongen.errors import ConversionError
from tritongen.sources.onnx_source import load_onnx

pytestmark = pytest.mark.skipif(tvm_unavailable_reason() is not None, reason=str(tvm_unavailable_reason()))

MAX_BATCH = 4
PAD = ("seq=attention_mask:1",)


def _feed(batch: int, seq: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    mask = (rng.random((batch, seq)) > 0.3).astype(np.int64)
    mask[:, 0] = 1
    return {"input_ids": rng.integers(0, 1000, (batch, seq), dtype=np.int64), "attention_mask": mask}


def _build(example: Path, out: Path, options: TvmOptions) -> Artifact:
    source = load_onnx(example)
    return write_tvm_artifact(OnnxBuild(source.path, source.signature, out, "local", MAX_BATCH), options)


class Served:
    """The written ``model.py`` loaded in-process as the Python backend would, counting bucket use."""

    def __init__(self, version_dir: Path) -> None:
        spec = importlib.util.spec_from_file_location(f"tvm_buckets_{id(self)}", version_dir / "model.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        config = {
            "max_batch_size": MAX_BATCH,
            "input": [{"name": "input_ids"}, {"name": "attention_mask"}],
            "output": [{"name": "embedding"}],
            "instance_group": [{"count": 1, "kind": "KIND_CPU"}],
            "parameters": {"intra_op_thread_count": {"string_value": "1"}},
        }
        self.model = module.TritonPythonModel()
        self.model.initialize(
            {
                "model_config": json.dumps(config),
                "model_repository": str(version_dir.parent),
                "model_version": version_dir.name,
                "model_instance_kind": "CPU",
            }
        )
        self.used: Counter[str] = Counter()
        self.model.buckets = [
            (dims, label, self._counted(label, fn)) for dims, label, fn in self.model.buckets
        ]
        if self.model.main is not None:
            self.model.main = self._counted("symbolic", self.model.main)

    def _counted(self, label: str, function: Any) -> Any:
        def run(*args: Any) -> Any:
            self.used[label] += 1
            return function(*args)

        return run

    def run(self, feed: dict[str, np.ndarray]) -> np.ndarray:
        (out,) = self.model.run(feed)
        return np.asarray(out)


@pytest.fixture(scope="module")
def padded(example_models: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The text encoder with buckets batch 1, 4 × seq 8, 16 (seq padded through the mask)."""
    root = tmp_path_factory.mktemp("buckets")
    _build(example_models["text"], root / "m", TvmOptions(buckets="batch=1,4;seq=8,16", pads=PAD))
    yield root / "m" / "1"
    sys.modules.pop("tritongen_runtime", None)


def _ort(example: Path) -> Any:
    import onnxruntime as ort

    return ort.InferenceSession(str(example), providers=["CPUExecutionProvider"])


def test_every_bucket_has_a_library_and_the_metadata_says_how_requests_fit(padded: Path) -> None:
    facts = json.loads((padded / METADATA).read_text())
    assert facts["metadata_version"] == 2
    assert facts["library"] == LIBRARY and (padded / LIBRARY).is_file()
    plan = facts["buckets"]
    assert plan["dims"] == {"batch": [1, 4], "seq": [8, 16]}
    assert plan["padded"] == {"seq": {"input": "attention_mask", "axis": 1, "alias": "seq"}}
    assert plan["strict"] is False
    labels = [lib["label"] for lib in plan["libraries"]]
    assert labels == ["1x8", "1x16", "4x8", "4x16"]
    for lib in plan["libraries"]:
        assert (padded / lib["library"]).is_file()
    assert plan["libraries"][2]["shapes"] == {"input_ids": [4, 8], "attention_mask": [4, 8]}
    assert facts["outputs"][0]["shape"][0] == "batch"
    assert facts["tuning"] is None


@pytest.mark.parametrize(
    ("batch", "seq", "bucket"),
    [
        (1, 8, "1x8"),
        (1, 3, "1x8"),
        (2, 8, "4x8"),
        (3, 5, "4x8"),
        (4, 16, "4x16"),
        (1, 9, "1x16"),
        (3, 12, "4x16"),
    ],
)
def test_a_request_runs_on_the_smallest_bucket_padded_and_sliced_back(
    padded: Path, example_models: dict[str, Path], batch: int, seq: int, bucket: str
) -> None:
    served = Served(padded)
    feed = _feed(batch, seq, seed=batch * 100 + seq)
    got = served.run(feed)
    (want,) = _ort(example_models["text"]).run(None, feed)
    assert got.shape == want.shape == (batch, want.shape[1])
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    assert served.used == {bucket: 1}


def test_a_request_no_bucket_holds_runs_symbolic_with_one_warning(
    padded: Path, example_models: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    served = Served(padded)
    session = _ort(example_models["text"])
    for batch, seq in [(2, 17), (1, 40)]:  # longer than the longest bucket
        feed = _feed(batch, seq, seed=seq)
        np.testing.assert_allclose(served.run(feed), session.run(None, feed)[0], rtol=1e-4, atol=1e-5)
    assert served.used == {"symbolic": 2}
    warnings = [line for line in capsys.readouterr().err.splitlines() if "fits no TVM bucket" in line]
    assert len(warnings) == 1
    assert "(largest 4x16)" in warnings[0] and "--tvm-buckets" in warnings[0]
    assert warnings[0].startswith("warning: the TVM model:")  # Triton passes the model's name


def test_verification_covers_every_bucket_and_a_request_it_pads(
    padded: Path, example_models: dict[str, Path]
) -> None:
    facts = json.loads((padded / METADATA).read_text())
    shapes = [s["input_ids"] for s in bucket_shapes(facts)]
    for lib in facts["buckets"]["libraries"]:
        assert tuple(lib["shapes"]["input_ids"]) in shapes
    # one more than the next smaller bucket in each padded dim: each lands in its own bucket, padded
    assert {(1, 7), (1, 9), (2, 7), (2, 9)} <= set(shapes)
    assert len(shapes) == 8
    feeds = bucket_feeds(facts, load_onnx(example_models["text"]).signature)
    assert len(feeds) == 8
    assert all((feed["attention_mask"][:, 0] == 1).all() for feed in feeds)  # never an all-padding row


def test_strict_buckets_refuse_a_request_they_cannot_hold(
    example_models: dict[str, Path], tmp_path: Path
) -> None:
    artifact = _build(
        example_models["text"],
        tmp_path / "m",
        TvmOptions(buckets="batch=2;seq=8", pads=PAD, strict_buckets=True),
    )
    version = tmp_path / "m" / "1"
    assert not (version / LIBRARY).exists()
    assert f"1/{LIBRARY}" not in artifact.files
    served = Served(version)
    feed = _feed(1, 6)
    np.testing.assert_allclose(
        served.run(feed), _ort(example_models["text"]).run(None, feed)[0], rtol=1e-4, atol=1e-5
    )
    with pytest.raises(
        ValueError, match=r"request \(batch=1, seq=9\) fits no TVM bucket \(largest 2x8\)"
    ) as info:
        served.run(_feed(1, 9))
    assert "--tvm-strict-buckets" in str(info.value) and "\n" not in str(info.value)
    sys.modules.pop("tritongen_runtime", None)


def test_an_undeclared_dim_is_matched_exactly_never_padded(
    example_models: dict[str, Path], tmp_path: Path
) -> None:
    messages: list[str] = []
    source = load_onnx(example_models["text"])
    write_tvm_artifact(
        OnnxBuild(source.path, source.signature, tmp_path / "m", "local", MAX_BATCH),
        TvmOptions(buckets="batch=4;seq=8"),
        progress=messages.append,
    )
    assert any("dim seq is not declared paddable" in m for m in messages)
    served = Served(tmp_path / "m" / "1")
    session = _ort(example_models["text"])
    for batch, seq in [(3, 8), (3, 7)]:
        feed = _feed(batch, seq, seed=seq)
        np.testing.assert_allclose(served.run(feed), session.run(None, feed)[0], rtol=1e-4, atol=1e-5)
    assert served.used == {"4x8": 1, "symbolic": 1}
    sys.modules.pop("tritongen_runtime", None)


def test_impossible_buckets_are_refused_before_anything_is_written(
    example_models: dict[str, Path], tmp_path: Path
) -> None:
    from typer.testing import CliRunner

    from tritongen.cli.main import app

    repo = tmp_path / "repo"
    base = [
        "convert",
        str(example_models["text"]),
        "--repo",
        str(repo),
        "--formats",
        "tvm",
        "--max-batch-size",
        "4",
    ]
    cases = [
        (["--tvm-buckets", "batch=1,8"], "batch 8 is above the max batch size 4"),
        (
            ["--tvm-pad", "seq=token_type_ids:1"],
            "names input 'token_type_ids', which the model does not have",
        ),
        (["--tvm-pad", "seq=attention_mask:5"], "has no axis 5"),
    ]
    for extra, message in cases:
        result = CliRunner().invoke(app, [*base, *extra])
        assert result.exit_code == 1, result.stdout
        assert message in result.stderr
        assert not (repo / "text_tvm").exists()


def test_bucket_options_alone_need_no_tuning(example_models: dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(ConversionError, match="is above the max batch size"):
        _build(example_models["text"], tmp_path / "m", TvmOptions(buckets="batch=8"))
    assert not (tmp_path / "m").exists()


def test_a_token_id_outside_the_vocabulary_does_not_crash_the_instance(padded: Path) -> None:
    served = Served(padded)
    feed = _feed(1, 8)
    feed["input_ids"][0, 3] = 10**9  # far past the embedding table: clipped, never read out of bounds
    feed["input_ids"][0, 4] = -(10**9)
    out = served.run(feed)
    assert out.shape[0] == 1 and np.isfinite(out).all()
    sys.modules.pop("tritongen_runtime", None)


def test_strict_buckets_verify_on_their_own_shapes(example_models: dict[str, Path], tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from tritongen.cli.main import app

    repo = tmp_path / "repo"
    result = CliRunner().invoke(
        app,
        ["convert", str(example_models["text"]), "--repo", str(repo), "--formats", "tvm",
         "--max-batch-size", "4", "--tvm-buckets", "batch=1,4;seq=16", "--tvm-strict-buckets"],
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    meta = json.loads((repo / "text_tvm" / "tritongen.json").read_text())
    assert meta["verification"]["passed"] is True
