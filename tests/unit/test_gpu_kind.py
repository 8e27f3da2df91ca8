"""``--kind gpu``: which engines get KIND_GPU instances on which target, and one-line refusals elsewhere."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from tritongen.cli.main import app
from tritongen.convert.artifact import Artifact
from tritongen.convert.wrappers import wrapper_runner
from tritongen.errors import ConfigError
from tritongen.pipeline.configs import model_config_for
from tritongen.pipeline.gpu_kind import check_render_kind, tvm_target_kind
from tritongen.sources.signature import Signature, TensorSpec
from tritongen.triton.batching import BatchingOptions
from tritongen.triton.proto import read_config

from support.cli_output import error_line

torch = pytest.importorskip("torch", reason="the torch extra is not installed")


runner = CliRunner()


MLP_SPECS = ("--input-spec", "input:FP32:-1,16", "--output-names", "logits")


MLP_SIGNATURE = Signature(
    inputs=(TensorSpec(name="input", data_type="TYPE_FP32", dims=(16,)),),
    outputs=(TensorSpec(name="logits", data_type="TYPE_FP32", dims=(4,)),),
    batched=True,
)


no_cuda_torch = pytest.mark.skipif(torch.cuda.is_available(), reason="torch has CUDA here: nothing to refuse")


def _run(*args: str | Path) -> tuple[int, str, str]:
    result = runner.invoke(app, [str(a) for a in args])
    return result.exit_code, result.stdout, result.stderr


def _nothing_written(repo: Path) -> None:
    """No model directory and no staging leftovers."""
    assert not repo.exists() or list(repo.iterdir()) == []


@pytest.fixture(scope="module")
def local_models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example MLP (PyTorch factory) built for the local target as ONNX and TorchScript, on CPU."""
    repo = tmp_path_factory.mktemp("gpu_kind") / "repo"
    code, out, err = _run(
        "convert", "tritongen.examples.torch_models:mlp", "--name", "mlp", "--repo", repo,
        "--formats", "onnx,torchscript", *MLP_SPECS,
    )  # fmt: skip
    assert code == 0, err + out
    return repo


@no_cuda_torch
def test_torchscript_gpu_needs_cuda_torch(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    code, _, err = _run(
        "convert", "tritongen.examples.torch_models:mlp", "--name", "mlp", "--repo", repo,
        "--formats", "torchscript", "--kind", "gpu", *MLP_SPECS,
    )  # fmt: skip
    assert code == 1
    line = error_line(err)
    assert f"torch {torch.__version__} has no CUDA" in line and "--kind cpu" in line
    _nothing_written(repo)


def test_onnx_gpu_is_refused_on_the_local_target(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    code, _, err = _run(
        "convert", "tritongen.examples.torch_models:mlp", "--repo", repo, "--formats", "onnx",
        "--kind", "gpu", *MLP_SPECS,
    )  # fmt: skip
    assert code == 1
    line = error_line(err)
    assert "ONNX Runtime in the embedded server runs on CPU" in line and "--target container" in line
    _nothing_written(repo)


@pytest.mark.parametrize("tvm_target", [None, "llvm", "aarch64"])
def test_tvm_for_a_cpu_is_refused_before_compiling(
    example_models: dict[str, Path], tmp_path: Path, tvm_target: str | None
) -> None:
    repo = tmp_path / "repo"
    extra = ["--tvm-target", tvm_target] if tvm_target else []
    code, _, err = _run(
        "convert", example_models["mlp"], "--repo", repo, "--formats", "tvm", "--kind", "gpu", *extra
    )
    assert code == 1
    # Refused up front: a compile would have printed its progress before any error line.
    line = error_line(err)
    assert "a TVM library built for llvm runs on the CPU" in line and "--tvm-target cuda" in line
    _nothing_written(repo)


def test_tvm_target_kind_reads_the_option_without_compiling() -> None:
    assert tvm_target_kind(None) == "llvm"
    assert tvm_target_kind("cuda") == "cuda"
    assert tvm_target_kind("rpi4") == "llvm"
    assert tvm_target_kind('{"kind": "cuda", "arch": "sm_90"}') == "cuda"


def test_render_gpu_on_a_local_onnx_model_changes_nothing(local_models: Path) -> None:
    model = local_models / "mlp_onnx"
    before = (model / "config.pbtxt").read_bytes()
    code, _, err = _run("render", model, "--kind", "gpu")
    assert code == 1
    assert "ONNX Runtime in the embedded server runs on CPU" in error_line(err)
    assert (model / "config.pbtxt").read_bytes() == before
    assert not (model / "config.pbtxt.bak").exists()


@no_cuda_torch
def test_render_gpu_on_a_local_torchscript_model_needs_cuda_torch(local_models: Path) -> None:
    model = local_models / "mlp_torchscript"
    before = (model / "config.pbtxt").read_bytes()
    code, _, err = _run("render", model, "--kind", "gpu")
    assert code == 1
    assert "has no CUDA" in error_line(err)
    assert (model / "config.pbtxt").read_bytes() == before


def test_render_gpu_on_a_cpu_built_tvm_model_is_refused(tmp_path: Path) -> None:
    model = tmp_path / "m_tvm"
    (model / "1").mkdir(parents=True)
    (model / "tritongen.json").write_text(json.dumps({"format": "tvm", "target": "container"}))
    facts = {"device": "cpu", "target": {"kind": "llvm", "mcpu": "znver3"}}
    (model / "1" / "tvm_metadata.json").write_text(json.dumps(facts))
    with pytest.raises(ConfigError, match="built for llvm runs on the CPU"):
        check_render_kind(model, "gpu")
    check_render_kind(model, "cpu")  # only --kind gpu is judged


def test_container_target_keeps_kind_gpu(example_models: dict[str, Path], tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    code, _, err = _run(
        "convert", example_models["mlp"], "--repo", repo, "--target", "container", "--kind", "gpu"
    )
    assert code == 0, err
    text = (repo / "mlp_onnx" / "config.pbtxt").read_text()
    assert "KIND_GPU" in text
    code, _, err = _run("render", repo / "mlp_onnx", "--kind", "gpu", "--instances", "2")
    assert code == 0, err
    assert [(g.count, g.kind) for g in read_config(repo / "mlp_onnx" / "config.pbtxt").instance_group] == [
        (2, "KIND_GPU")
    ]


def test_a_cpu_built_tvm_library_gets_cpu_instances_on_every_target() -> None:
    cpu_lib = Artifact(format="tvm", backend="python", files=(), engine={"device": "cpu"})
    cuda_lib = Artifact(format="tvm", backend="python", files=(), engine={"device": "cuda"})

    def kind(artifact: Artifact, target: Any, option: Any = None) -> str:
        config = model_config_for("m", MLP_SIGNATURE, artifact, BatchingOptions(kind=option), target)
        return config.instance_group[0].kind

    assert kind(cpu_lib, "container") == "KIND_CPU"
    assert kind(cpu_lib, "container", "auto") == "KIND_CPU"
    assert kind(cuda_lib, "container") == "KIND_GPU"
    assert kind(cuda_lib, "local", "gpu") == "KIND_GPU"
    assert kind(cuda_lib, "local") == "KIND_CPU"


@no_cuda_torch
def test_torchscript_wrapper_refuses_a_gpu_instance_without_cuda(local_models: Path) -> None:
    with pytest.raises(RuntimeError, match=r"KIND_GPU instance, but torch .* has no CUDA"):
        wrapper_runner(local_models / "mlp_torchscript" / "1", MLP_SIGNATURE, 32, device_id=0)
    run = wrapper_runner(local_models / "mlp_torchscript" / "1", MLP_SIGNATURE, 32)  # KIND_CPU still loads
    assert run({"input": np.ones((2, 16), np.float32)})[0].shape == (2, 4)


def test_onnxruntime_wrapper_refuses_a_gpu_instance_without_cuda(local_models: Path) -> None:
    import onnxruntime as ort

    version = local_models / "mlp_onnx" / "1"
    if _cuda_provider_works(ort, version / "model.onnx"):
        pytest.skip("ONNX Runtime's CUDA provider works here")
    with pytest.raises(RuntimeError, match="no working CUDAExecutionProvider"):
        wrapper_runner(version, MLP_SIGNATURE, 32, device_id=0)


def _cuda_provider_works(ort: Any, path: Path) -> bool:
    providers = [("CUDAExecutionProvider", {"device_id": 0}), "CPUExecutionProvider"]
    return "CUDAExecutionProvider" in ort.InferenceSession(str(path), providers=providers).get_providers()


def test_tvm_wrapper_refuses_a_device_its_library_cannot_use() -> None:
    tvm = pytest.importorskip("tvm", reason="apache-tvm is not installed")
    from tritongen.convert.wrappers.tvm_model import check_device

    cpu_facts = {"device": "cpu", "target": {"kind": "llvm"}}
    with pytest.raises(RuntimeError, match="KIND_GPU instance, but the TVM library is built for llvm"):
        check_device(tvm, cpu_facts, True, 0)
    assert str(check_device(tvm, cpu_facts, False, 0)) == str(tvm.cpu(0))
    if not tvm.cuda(0).exist:
        with pytest.raises(RuntimeError, match="built for CUDA, but TVM sees no CUDA GPU 0"):
            check_device(tvm, {"device": "cuda"}, True, 0)
