"""The TVM target: build the example models, run them in-process and in the wrapper, compare with ORT."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from tritongen.convert.artifact import OnnxBuild
from tritongen.convert.tvm import (
    LIBRARY,
    METADATA,
    TvmOptions,
    resolve_target,
    tvm_unavailable_reason,
    write_tvm_artifact,
)
from tritongen.convert.wrappers import wrapper_runner
from tritongen.errors import ConversionError
from tritongen.sources.onnx_source import load_onnx

pytestmark = pytest.mark.skipif(tvm_unavailable_reason() is not None, reason=str(tvm_unavailable_reason()))

MAX_BATCH = 32


def _ort(path: Path) -> Any:
    import onnxruntime as ort

    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def _text_feed(rng: np.random.Generator, batch: int, seq: int) -> dict[str, np.ndarray]:
    mask = (rng.random((batch, seq)) > 0.3).astype(np.int64)
    mask[:, 0] = 1
    return {"input_ids": rng.integers(0, 1000, (batch, seq), dtype=np.int64), "attention_mask": mask}


@pytest.fixture(scope="module")
def built(example_models: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The mlp and text examples compiled (untuned) into model directories."""
    root = tmp_path_factory.mktemp("tvm")
    out = {}
    for name in ("mlp", "text"):
        source = load_onnx(example_models[name])
        write_tvm_artifact(
            OnnxBuild(source.path, source.signature, root / name, "local", MAX_BATCH), TvmOptions()
        )
        out[name] = root / name
    return out


@pytest.mark.parametrize("batch", [1, 3, 32])
def test_mlp_matches_onnxruntime(built: dict[str, Path], example_models: dict[str, Path], batch: int) -> None:
    source = load_onnx(example_models["mlp"])
    run = wrapper_runner(built["mlp"] / "1", source.signature, MAX_BATCH)
    feed = {"input": np.random.default_rng(batch).standard_normal((batch, 16)).astype(np.float32)}
    (got,) = run(feed)
    (want,) = _ort(source.path).run(None, feed)
    assert got.shape == (batch, 4)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("batch", "seq"), [(1, 1), (4, 7), (2, 128)])
def test_text_encoder_matches_onnxruntime(
    built: dict[str, Path], example_models: dict[str, Path], batch: int, seq: int
) -> None:
    source = load_onnx(example_models["text"])
    run = wrapper_runner(built["text"] / "1", source.signature, MAX_BATCH)
    feed = _text_feed(np.random.default_rng(seq), batch, seq)
    (got,) = run(feed)
    (want,) = _ort(source.path).run(None, feed)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_files_and_metadata(built: dict[str, Path]) -> None:
    version = built["text"] / "1"
    for name in (LIBRARY, METADATA, "model.py", "tritongen_runtime.py"):
        assert (version / name).is_file(), name
    facts = json.loads((version / METADATA).read_text())
    assert facts["device"] == "cpu"
    assert facts["target"]["kind"] == "llvm"
    assert facts["symbolic_dims"] == ["batch", "seq"]
    assert facts["inputs"] == [
        {"name": "input_ids", "dtype": "int64", "shape": ["batch", "seq"]},
        {"name": "attention_mask", "dtype": "int64", "shape": ["batch", "seq"]},
    ]
    assert facts["outputs"] == [{"name": "embedding", "dtype": "float32", "shape": ["batch", 32]}]
    assert facts["tuning"] is None
    assert facts["buckets"] is None  # no tuning and no bucket options: the symbolic library only
    assert facts["arch"] == "x86_64" or facts["arch"] == "aarch64"
    assert facts["tvm_version"].startswith("0.")


def test_artifact_description(example_models: dict[str, Path], tmp_path: Path) -> None:
    source = load_onnx(example_models["mlp"])
    messages: list[str] = []
    artifact = write_tvm_artifact(
        OnnxBuild(source.path, source.signature, tmp_path / "m", "container", 8, version=3),
        TvmOptions(),
        progress=messages.append,
    )
    assert artifact.format == "tvm"
    assert artifact.backend == "python"
    assert set(artifact.files) == {
        "3/tvm_model.so",
        "3/tvm_metadata.json",
        "3/model.py",
        "3/tritongen_runtime.py",
    }
    assert any(r.startswith("apache-tvm==") for r in artifact.python_requirements)
    assert any(r.startswith("apache-tvm-ffi==") for r in artifact.python_requirements)
    assert "numpy<2" in artifact.python_requirements
    assert artifact.engine["symbolic_dims"] == ["batch"]
    assert messages and messages[0].startswith("TVM: compiling")


def _celu_model(path: Path) -> Path:
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Celu", ["x"], ["y"]), helper.make_node("Relu", ["y"], ["z"])],
        "celu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, ["batch", 4])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def test_unsupported_op_is_named(tmp_path: Path) -> None:
    source = load_onnx(_celu_model(tmp_path / "celu.onnx"))
    with pytest.raises(ConversionError, match="TVM's ONNX frontend does not support op 'Celu'") as info:
        write_tvm_artifact(OnnxBuild(source.path, source.signature, tmp_path / "m", "local", 8), TvmOptions())
    assert info.value.hint


def test_targets_resolve_and_bad_ones_are_refused() -> None:
    host = resolve_target(None)
    assert host["kind"] == "llvm" and host["mcpu"] and host["num-cores"] >= 1
    assert resolve_target("llvm") == host
    assert resolve_target("cuda") == {"kind": "cuda"}
    assert resolve_target('{"kind": "llvm", "mcpu": "x86-64"}') == {"kind": "llvm", "mcpu": "x86-64"}
    with pytest.raises(ConversionError, match="unknown TVM target"):
        resolve_target("llvm -mcpu=znver3")


def _load_wrapper(version_dir: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"tvm_wrapper_{id(version_dir)}", version_dir / "model.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _wrapper_args(version_dir: Path, inputs: list[str], outputs: list[str]) -> dict[str, str]:
    config = {
        "max_batch_size": MAX_BATCH,
        "input": [{"name": n} for n in inputs],
        "output": [{"name": n} for n in outputs],
        "instance_group": [{"count": 1, "kind": "KIND_CPU"}],
        "parameters": {"intra_op_thread_count": {"string_value": "1"}},
    }
    return {
        "model_config": json.dumps(config),
        "model_repository": str(version_dir.parent),
        "model_version": version_dir.name,
        "model_instance_kind": "CPU",
    }


def test_wrapper_runs_in_process(built: dict[str, Path], example_models: dict[str, Path]) -> None:
    version = built["text"] / "1"
    module = _load_wrapper(version)
    model = module.TritonPythonModel()
    model.initialize(_wrapper_args(version, ["input_ids", "attention_mask"], ["embedding"]))
    assert model.threads == 1
    session = _ort(example_models["text"])
    rng = np.random.default_rng(7)
    for batch, seq in [(1, 5), (3, 16), (32, 128)]:
        feed = _text_feed(rng, batch, seq)
        feed["input_ids"] = feed["input_ids"][:, ::-1]  # a non-contiguous view must be copied
        feed["attention_mask"].setflags(write=False)  # read-only arrays cannot be shared
        (got,) = model.run(feed)
        (want,) = session.run(None, {k: np.ascontiguousarray(v) for k, v in feed.items()})
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    model.finalize()
    sys.modules.pop("tritongen_runtime", None)


def test_aligned_copy_is_shareable(built: dict[str, Path]) -> None:
    module = _load_wrapper(built["mlp"] / "1")
    array = np.arange(12, dtype=np.int32).reshape(3, 4)[:, 1:]
    copy = module.aligned_copy(array, np.dtype(np.float32))
    assert copy.ctypes.data % 64 == 0
    assert module.shareable(copy, np.dtype(np.float32))
    assert not module.shareable(array, np.dtype(np.int32))
    np.testing.assert_array_equal(copy, array.astype(np.float32))


@pytest.mark.slow
def test_tuning_spreads_over_buckets_moves_schedules_and_reuses_the_cache(
    example_models: dict[str, Path], tmp_path: Path
) -> None:
    source = load_onnx(example_models["mlp"])
    options = TvmOptions(tune_trials=4, buckets="batch=1,4", cache_dir=tmp_path / "cache")
    messages: list[str] = []
    first = write_tvm_artifact(
        OnnxBuild(source.path, source.signature, tmp_path / "a", "local", MAX_BATCH),
        options,
        progress=messages.append,
    )
    tuning = first.engine["tuning"]
    assert isinstance(tuning, dict)
    assert tuning["cache_hit"] is False
    assert 1 <= tuning["trials"] <= 4 + 4  # a round may finish past the budget
    assert tuning["buckets"] == ["1", "4"]
    # the largest bucket's schedules were moved to the smaller one, timed and kept
    moved = [m for m in messages if m.startswith("TVM: moved")]
    assert moved and not moved[0].startswith("TVM: moved 0")
    tasks = tuning["tasks"]
    assert {t["bucket"] for t in tasks} == {"1", "4"}
    assert all(t["best_us"] > 0 and t["calls"] >= 1 for t in tasks)
    assert any(m.startswith("TVM: 4 ") and "best" in m for m in messages)  # per-kernel progress
    libraries = first.engine["buckets"]["libraries"]  # type: ignore[index]
    assert [lib["tuned_kernels"] >= 1 for lib in libraries] == [True, True]
    assert all(lib["profile"]["total_ms"] > 0 for lib in libraries)
    assert f"1/{LIBRARY}" in first.files

    run = wrapper_runner(tmp_path / "a" / "1", source.signature, MAX_BATCH)
    session = _ort(source.path)
    for batch in (1, 3, 4, 5):  # 3 is padded to 4; 5 runs the symbolic library
        feed = {"input": np.random.default_rng(batch).standard_normal((batch, 16)).astype(np.float32)}
        np.testing.assert_allclose(run(feed)[0], session.run(None, feed)[0], rtol=1e-5, atol=1e-5)

    messages.clear()
    second = write_tvm_artifact(
        OnnxBuild(source.path, source.signature, tmp_path / "b", "local", MAX_BATCH),
        options,
        progress=messages.append,
    )
    tuning = second.engine["tuning"]
    assert isinstance(tuning, dict)
    assert tuning["cache_hit"] is True
    assert any("reusing cached tuning records" in m for m in messages)
    assert not any("best" in m or "phase" in m for m in messages)


def test_cli_names_the_op_and_still_builds_the_other_formats(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from tritongen.cli.main import app

    repo = tmp_path / "repo"
    source = _celu_model(tmp_path / "celu.onnx")
    result = CliRunner().invoke(app, ["convert", str(source), "--repo", str(repo), "--formats", "onnx,tvm"])
    assert result.exit_code == 1
    assert "tvm failed: TVM's ONNX frontend does not support op 'Celu'" in result.stderr
    assert (repo / "celu_onnx" / "config.pbtxt").is_file()
    assert not (repo / "celu_tvm").exists()
    assert not [p for p in repo.iterdir() if p.name.startswith(".")]


def test_container_compose_image_installs_tvm(example_models: dict[str, Path], tmp_path: Path) -> None:
    import yaml
    from typer.testing import CliRunner

    from tritongen.cli.main import app

    repo = tmp_path / "repo"
    runner = CliRunner()
    built = runner.invoke(
        app,
        [
            "convert",
            str(example_models["mlp"]),
            "--repo",
            str(repo),
            "--target",
            "container",
            "--formats",
            "tvm",
        ],
    )
    assert built.exit_code == 0, built.stderr
    compose = tmp_path / "compose.yaml"
    written = runner.invoke(app, ["compose", str(repo), "-o", str(compose)])
    assert written.exit_code == 0, written.stderr
    service = yaml.safe_load(compose.read_text())["services"]["tritonserver"]
    dockerfile = service["build"]["dockerfile_inline"]
    assert "apache-tvm==" in dockerfile and "apache-tvm-ffi==" in dockerfile


def test_an_output_dim_written_as_an_expression_builds_in_buckets(tmp_path: Path) -> None:
    from support.real_models import doubled

    source = load_onnx(doubled(tmp_path / "doubled.onnx"))
    options = TvmOptions(buckets="batch=1,4;seq=16")
    write_tvm_artifact(OnnxBuild(source.path, source.signature, tmp_path / "m", "local", 8), options)
    run = wrapper_runner(tmp_path / "m" / "1", source.signature, 8)
    x = np.arange(4 * 16, dtype=np.float32).reshape(4, 16)
    np.testing.assert_array_equal(run({"x": x})[0], np.concatenate([x, x], axis=1))


def test_ai_onnx_ml_ops_are_named_with_their_domain(tmp_path: Path) -> None:
    from support.real_models import filetype

    source = load_onnx(filetype(tmp_path / "filetype.onnx"))
    with pytest.raises(ConversionError) as refused:
        write_tvm_artifact(OnnxBuild(source.path, source.signature, tmp_path / "m", "local", 8), TvmOptions())
    assert refused.value.message.startswith("TVM cannot import the ai.onnx.ml ops 'LabelEncoder', 'Scaler'")
