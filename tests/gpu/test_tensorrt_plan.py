"""A real TensorRT plan built from the example MLP, where TensorRT and a GPU are."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest

from tritongen.convert.artifact import OnnxBuild
from tritongen.convert.tensorrt import (
    TensorRtOptions,
    write_tensorrt_artifact,
)
from tritongen.examples.models import write_example
from tritongen.sources.onnx_source import load_onnx


def _tensorrt_available() -> bool:
    return importlib.util.find_spec("tensorrt") is not None or shutil.which("trtexec") is not None


@pytest.mark.gpu
@pytest.mark.skipif(
    not _tensorrt_available(), reason="neither the tensorrt module nor trtexec is available here"
)
def test_builds_a_real_plan_from_the_example_mlp(tmp_path: Path) -> None:
    source = write_example("mlp", tmp_path / "mlp.onnx")
    signature = load_onnx(source).signature
    options = TensorRtOptions(precision="fp16", opt_batch_size=4, timing_cache=tmp_path / "timing.cache")
    artifact = write_tensorrt_artifact(
        OnnxBuild(source, signature, tmp_path / "mlp_trt", "container", 8), options
    )
    plan = tmp_path / "mlp_trt" / "1" / "model.plan"
    assert artifact.files == ("1/model.plan",)
    assert plan.stat().st_size > 0
    assert artifact.engine["builder"] in ("python", "trtexec")
    assert not (tmp_path / "mlp_trt" / "trt-build").exists()
