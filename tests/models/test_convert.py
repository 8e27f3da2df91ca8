"""``convert`` end to end: every source kind into every format, verified, then served for real."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from tritongen.cli.main import app
from tritongen.client.endpoint import TritonEndpoint
from tritongen.io.files import STAGING_PREFIX
from tritongen.server.local import LocalTritonServer
from tritongen.triton.proto import read_config

torch = pytest.importorskip("torch", reason="the torch extra is not installed")

runner = CliRunner()
POOLED_SPECS = ("--input-spec", "input_ids:INT64:-1,-1", "--input-spec", "attention_mask:INT64:-1,-1")


def _run(*args: str | Path) -> tuple[int, str, str]:
    result = runner.invoke(app, [str(a) for a in args])
    return result.exit_code, result.stdout, result.stderr


def _metadata(model_dir: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((model_dir / "tritongen.json").read_text())
    return data


def _no_leftovers(repo: Path) -> None:
    if repo.exists():
        assert not [p for p in repo.iterdir() if p.name.startswith(STAGING_PREFIX)]


def _formats_here() -> list[str]:
    from tritongen.convert.formats import unavailable_reason

    return [f for f in ("onnx", "torchscript", "tvm") if unavailable_reason(f, "pytorch") is None]


@pytest.fixture(scope="module")
def built_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The pooled toy encoder (PyTorch factory) built into every format this machine can build."""
    repo = tmp_path_factory.mktemp("convert") / "repo"
    formats = ",".join(_formats_here())
    code, out, err = _run(
        "convert", "support.torch_factories:pooled", "--name", "pooled", "--repo", repo, "--formats", formats,
        *POOLED_SPECS, "--max-batch-size", "8",
    )  # fmt: skip
    assert code == 0, err + out
    assert "verification against the source" in out
    return repo


def test_every_format_is_written_and_verified(built_repo: Path) -> None:
    for fmt in _formats_here():
        model = built_repo / f"pooled_{fmt}"
        meta = _metadata(model)
        assert meta["source"]["kind"] == "pytorch"
        assert meta["verification"]["passed"], meta["verification"]
        assert meta["verification"]["samples"] >= 12
        outputs = {o["name"]: o for o in meta["verification"]["outputs"]}
        assert set(outputs) == {"pooled", "scores"}
        assert all(o["max_abs_err"] <= 1e-4 for o in outputs.values())
        config = read_config(model / "config.pbtxt")
        assert config.name == f"pooled_{fmt}"
        assert config.backend == "python"
        assert config.max_batch_size == 8
        assert [list(o.dims) for o in config.output] == [[8], [-1, 3]]
    _no_leftovers(built_repo)


def test_exported_onnx_is_one_file_with_symbolic_dims(built_repo: Path) -> None:
    import onnx

    version = built_repo / "pooled_onnx" / "1"
    assert sorted(p.name for p in version.iterdir() if p.suffix in (".onnx", ".data")) == ["model.onnx"]
    model = onnx.load(str(version / "model.onnx"))
    dims = {
        i.name: [d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim] for i in model.graph.input
    }
    assert dims == {"input_ids": ["batch", "dim1"], "attention_mask": ["batch", "dim1"]}


@pytest.fixture(scope="module")
def server(built_repo: Path) -> Iterator[LocalTritonServer]:
    with LocalTritonServer(built_repo, http_port=0, grpc_port=0, metrics_port=0) as server:
        yield server


@pytest.mark.triton
@pytest.mark.parametrize("seq", [4, 13])
def test_every_format_serves_what_the_source_computes(server: LocalTritonServer, seq: int) -> None:
    from support.torch_factories import pooled

    module = pooled().eval()
    rng = np.random.default_rng(seq)
    ids = rng.integers(0, 50, size=(3, seq)).astype(np.int64)
    mask = np.ones((3, seq), dtype=np.int64)
    mask[0, seq // 2 :] = 0
    with torch.inference_mode():
        expected = module(torch.from_numpy(ids), torch.from_numpy(mask))
    endpoint = TritonEndpoint(server.grpc_url, "grpc")
    for fmt in _formats_here():
        result = endpoint.infer(
            f"pooled_{fmt}", {"input_ids": ids, "attention_mask": mask}, ("pooled", "scores")
        )
        for name in ("pooled", "scores"):
            err = np.abs(result.outputs[name] - expected[name].numpy()).max()
            assert err <= 1e-4, f"{fmt} {name}: {err}"
    endpoint.close()


def test_container_target_uses_native_backends(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    code, _, err = _run(
        "convert", "support.torch_factories:mlp", "--name", "mlp", "--repo", repo, "--target", "container",
        "--formats", "onnx,torchscript", "--input-spec", "input:FP32:-1,16", "--output-names", "logits",
    )  # fmt: skip
    assert code == 0, err
    assert read_config(repo / "mlp_onnx" / "config.pbtxt").backend == "onnxruntime"
    torchscript = read_config(repo / "mlp_torchscript" / "config.pbtxt")
    assert torchscript.backend == "pytorch"
    assert [o.name for o in torchscript.output] == ["logits"]
    assert sorted(p.name for p in (repo / "mlp_torchscript" / "1").iterdir()) == ["model.pt"]


def test_script_mode_and_torchscript_file_source(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    code, _, err = _run(
        "convert", "support.torch_factories:mlp", "--name", "mlp", "--repo", repo, "--formats", "torchscript",
        "--script", "--input-spec", "input:FP32:-1,16",
    )  # fmt: skip
    assert code == 0, err
    assert _metadata(repo / "mlp_torchscript")["engine"]["torchscript"] == "script"
    scripted = repo / "mlp_torchscript" / "1" / "model.pt"
    code, _, err = _run(
        "convert", scripted, "--name", "again", "--repo", repo, "--formats", "onnx,torchscript",
        "--input-spec", "input:FP32:-1,16",
    )  # fmt: skip
    assert code == 0, err
    meta = _metadata(repo / "again_onnx")
    assert meta["source"]["kind"] == "torchscript"
    assert meta["verification"]["passed"]


def test_a_wrong_artifact_stays_out_and_names_the_output(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    args = ["convert", "support.torch_factories:batch_baked", "--name", "baked", "--repo", repo]
    args += ["--formats", "onnx,torchscript", "--input-spec", "x:FP32:-1,4"]
    code, _, err = _run(*args)
    assert code == 1
    assert "verification failed: output 'output'" in err
    assert not (repo / "baked_onnx").exists() and not (repo / "baked_torchscript").exists()
    _no_leftovers(repo)
    code, _, err = _run(*args, "--keep-failed")
    assert code == 1
    meta = _metadata(repo / "baked_torchscript")
    assert meta["verification"]["passed"] is False


def test_verify_data_is_used(tmp_path: Path) -> None:
    data = tmp_path / "verify.npz"
    np.savez(data, input=np.random.default_rng(0).standard_normal((20, 16)).astype(np.float32))
    repo = tmp_path / "repo"
    code, _, err = _run(
        "convert", "support.torch_factories:mlp", "--name", "mlp", "--repo", repo, "--formats", "onnx",
        "--input-spec", "input:FP32:-1,16", "--verify-data", data, "--max-batch-size", "8",
    )  # fmt: skip
    assert code == 0, err
    assert _metadata(repo / "mlp_onnx")["verification"]["samples"] == 1 + 3 + 8 + 20


def test_torchscript_from_onnx_is_unavailable_and_others_still_build(
    example_models: dict[str, Path], tmp_path: Path
) -> None:
    repo = tmp_path / "repo"
    code, _, err = _run("convert", example_models["mlp"], "--repo", repo, "--formats", "onnx,torchscript")
    assert code == 1
    assert "torchscript unavailable" in err and "not from ONNX" in err
    assert (repo / "mlp_onnx" / "config.pbtxt").exists()
    assert not (repo / "mlp_torchscript").exists()


def test_formats_all_means_what_this_machine_builds(example_models: dict[str, Path], tmp_path: Path) -> None:
    from tritongen.convert.formats import parse_formats

    assert "torchscript" not in parse_formats("all", "onnx")
    assert parse_formats("tvm,onnx") == ("onnx", "tvm")
    repo = tmp_path / "repo"
    code, _, err = _run("convert", example_models["mlp"], "--repo", repo, "--formats", "all")
    assert code == 0, err
    assert (repo / "mlp_onnx").is_dir()


def test_tensorrt_without_tensorrt_prints_the_build_commands(
    example_models: dict[str, Path], tmp_path: Path
) -> None:
    from tritongen.convert.tensorrt import tensorrt_unavailable_reason

    if tensorrt_unavailable_reason() is None:
        pytest.skip("TensorRT is installed here; the unavailable path cannot be shown")
    repo = tmp_path / "repo"
    args = ["convert", example_models["mlp"], "--repo", repo, "--target", "container"]
    code, _, err = _run(*args, "--formats", "onnx,tensorrt", "--precision", "fp16")
    assert code == 1
    assert "tensorrt fp16 unavailable" in err
    assert "trtexec --onnx=" in err and "--fp16" in err
    assert "docker compose run --rm trt-build" in err
    assert (repo / "mlp_onnx_fp16").is_dir() and not (repo / "mlp_tensorrt_fp16").exists()
    code, out, err = _run(*args, "--formats", "tensorrt", "--dry-run", "--opt-batch-size", "8")
    assert code == 0, err
    assert "no plan built (dry run)" in out and "--optShapes=input:8x16" in out
    model = repo / "mlp_tensorrt"
    assert (model / "trt-build" / "model.onnx").is_file()
    config = read_config(model / "config.pbtxt")
    assert config.platform == "tensorrt_plan"
    assert _metadata(model)["engine"]["dry_run"] is True


def test_tensorrt_cannot_target_the_embedded_server(example_models: dict[str, Path], tmp_path: Path) -> None:
    code, _, err = _run("convert", example_models["mlp"], "--repo", tmp_path / "r", "--formats", "tensorrt")
    assert code == 1
    assert "--target container" in err


def test_random_calibration_rows_take_the_dims_the_source_runs_at(tmp_path: Path) -> None:
    from support.real_models import detector

    source = detector(tmp_path / "detector.onnx")  # runs at 32 pixels, not at 8 or 16
    out = tmp_path / "c.json"
    code, stdout, stderr = _run(
        "convert", source, "--repo", tmp_path / "repo", "--precision", "fp32,int8",
        "--calibration-data", "random", "--json", out,
    )  # fmt: skip
    assert code == 0, stdout + stderr
    document = json.loads(out.read_text())
    assert [o["status"] for o in document["outcomes"]] == ["built", "built"]
    assert document["verified_shapes"]["inputs"] == {"image": [1, 3, 32, 32]}
    assert "verified at image[1, 3, 32, 32] (free dims at 32: the source fails at 8)" in stdout
