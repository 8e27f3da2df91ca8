"""Verification: output comparison, tolerances, batches and --verify-data files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tritongen.convert.verify import (
    Tolerance,
    compare_outputs,
    load_verify_data,
    verification_batches,
    verify_artifact,
)
from tritongen.errors import SourceError
from tritongen.sources.signature import Signature, TensorSpec

SIG = Signature(
    inputs=(TensorSpec("ids", "TYPE_INT64", (-1,)), TensorSpec("x", "TYPE_FP32", (4,))),
    outputs=(TensorSpec("y", "TYPE_FP32", (4,)),),
    batched=True,
)
TOL = Tolerance(atol=1e-4, rtol=1e-3)


def test_compare_reports_abs_and_rel_and_applies_both_terms() -> None:
    want = np.array([[100.0, 1e-6, 1.0]])
    got = want + np.array([[0.05, 5e-5, 2e-3]])
    ((max_abs, max_rel, ok, _, _),) = compare_outputs(["y"], [got], [want], TOL)
    assert max_abs == pytest.approx(0.05)
    assert max_rel == pytest.approx(2e-3)  # 1e-6 is below atol: judged by the absolute term only
    assert not ok  # 2e-3 at 1.0 exceeds 1e-4 + 1e-3
    ((_, _, ok, _, _),) = compare_outputs(["y"], [want + 5e-5], [want], TOL)
    assert ok


def test_nan_matches_only_nan_and_shapes_must_agree() -> None:
    want = np.array([np.nan, 1.0])
    assert compare_outputs(["y"], [want.copy()], [want], TOL)[0][2]
    assert not compare_outputs(["y"], [np.array([np.nan, np.nan])], [np.array([1.0, 1.0])], TOL)[0][2]
    with pytest.raises(ValueError, match="shape"):
        compare_outputs(["y"], [np.zeros((2, 3))], [np.zeros((3, 2))], TOL)


def test_random_batches_cover_sizes_and_dynamic_dims() -> None:
    batches = verification_batches(SIG, max_batch_size=4)
    sizes = {(b["ids"].shape[0], b["ids"].shape[1]) for b in batches}
    assert len(batches) == 3
    assert all(size <= 4 for size, _ in sizes)
    assert len({dim for _, dim in sizes}) >= 2
    assert all(b["x"].dtype == np.float32 and b["ids"].dtype == np.int64 for b in batches)


def test_verify_data_is_split_into_batches(tmp_path: Path) -> None:
    path = tmp_path / "data.npz"
    np.savez(path, ids=np.ones((10, 5), dtype=np.int32), x=np.zeros((10, 4), dtype=np.float32))
    batches = load_verify_data(path, SIG, max_rows=4)
    assert [b["ids"].shape for b in batches] == [(4, 5), (4, 5), (2, 5)]
    assert batches[0]["ids"].dtype == np.int64


@pytest.mark.parametrize(
    ("arrays", "match"),
    [
        ({"x": np.zeros((2, 4), np.float32)}, "no array 'ids'"),
        ({"ids": np.zeros((2, 5), np.float32), "x": np.zeros((2, 4), np.float32)}, "dtype|is float32"),
        ({"ids": np.zeros((2, 5), np.int64), "x": np.zeros((2, 3), np.float32)}, "shape"),
        ({"ids": np.zeros((2, 5), np.int64), "x": np.zeros((3, 4), np.float32)}, "rows"),
    ],
)
def test_verify_data_that_does_not_fit_is_refused(
    tmp_path: Path, arrays: dict[str, np.ndarray], match: str
) -> None:
    path = tmp_path / "data.npz"
    np.savez(path, **arrays)
    with pytest.raises(SourceError, match=match):
        load_verify_data(path, SIG, max_rows=4)


def test_unreadable_verify_data(tmp_path: Path) -> None:
    path = tmp_path / "data.npz"
    path.write_bytes(b"junk")
    with pytest.raises(SourceError, match="cannot read"):
        load_verify_data(path, SIG, 4)


def test_verify_artifact_names_the_failing_output_and_crashes() -> None:
    batches = verification_batches(SIG, max_batch_size=4)

    def reference(feed: dict[str, np.ndarray]) -> list[np.ndarray]:
        return [feed["x"] * 2]

    good = verify_artifact("onnx", reference, reference, "ref", SIG, batches, TOL)
    assert good.passed and good.samples == sum(b["x"].shape[0] for b in batches)
    off = verify_artifact("tvm", lambda f: [f["x"] * 2 + 0.01], reference, "ref", SIG, batches, TOL)
    assert not off.passed and "output 'y'" in off.failure()
    assert off.outputs[0].max_abs == pytest.approx(0.01, rel=1e-3)

    def crash(feed: dict[str, np.ndarray]) -> list[np.ndarray]:
        raise RuntimeError("kernel missing")

    broken = verify_artifact("tvm", crash, reference, "ref", SIG, batches, TOL)
    assert not broken.passed and "kernel missing" in broken.failure()


def test_shaped_batches_cover_a_specialised_shape() -> None:
    from tritongen.convert.verify import shaped_batches

    (batch,) = shaped_batches(SIG, {"ids": (32, 128), "x": (32, 4)})
    assert batch["ids"].shape == (32, 128) and batch["ids"].dtype == np.int64
    assert shaped_batches(SIG, {}) == [] and shaped_batches(SIG, {"ids": (2, 3)}) == []


def test_verify_data_in_perf_analyzers_json_is_batched_by_shape(tmp_path: Path) -> None:
    import json

    from tritongen.pipeline.verify_data import verify_data_feeds
    from tritongen.sources.signature import Signature, TensorSpec

    signature = Signature(
        inputs=(TensorSpec("ids", "TYPE_INT64", (-1,)), TensorSpec("text", "TYPE_STRING", (1,))),
        outputs=(TensorSpec("out", "TYPE_FP32", (1,)),),
        batched=True,
    )
    entries = [{"ids": [k] * length, "text": [f"t{k}"]} for k, length in enumerate([2, 2, 2, 3, 2])]
    path = tmp_path / "verify.json"
    path.write_text(json.dumps({"data": entries}))
    feeds = verify_data_feeds(path, signature, max_rows=2)
    assert [feed["ids"].shape for feed in feeds] == [(2, 2), (1, 2), (1, 3), (1, 2)]
    assert feeds[0]["ids"].dtype == np.int64 and feeds[0]["text"].tolist() == [[b"t0"], [b"t1"]]
    assert feeds[2]["ids"].tolist() == [[3, 3, 3]]
    unbatched = Signature(signature.inputs, signature.outputs, batched=False)
    assert [feed["ids"].shape for feed in verify_data_feeds(path, unbatched, max_rows=1)][:2] == [(2,), (2,)]
