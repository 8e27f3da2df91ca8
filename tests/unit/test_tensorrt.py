"""The TensorRT target: profiles, commands, versions, and a real plan where TensorRT exists."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from tritongen.convert import tensorrt as trt_mod
from tritongen.convert.artifact import OnnxBuild
from tritongen.convert.tensorrt import (
    ShapeProfile,
    TensorRtOptions,
    TensorRtUnavailableError,
    check_plan_matches_image,
    onnx_dim_names,
    shape_profiles,
    tensorrt_commands,
    tensorrt_version_for_image,
    trtexec_command,
    write_tensorrt_artifact,
)
from tritongen.convert.tensorrt import builder as builder_mod
from tritongen.convert.tensorrt import runner as runner_mod
from tritongen.convert.tensorrt import versions as versions_mod
from tritongen.deploy.compose import check_repository_plans, plan_tensorrt_version
from tritongen.errors import ConfigError, ConversionError
from tritongen.examples.models import write_example
from tritongen.sources.signature import Signature, TensorSpec

MLP = Signature(
    inputs=(TensorSpec("input", "TYPE_FP32", (16,)),),
    outputs=(TensorSpec("logits", "TYPE_FP32", (4,)),),
    batched=True,
)


TEXT = Signature(
    inputs=(TensorSpec("input_ids", "TYPE_INT64", (-1,)), TensorSpec("attention_mask", "TYPE_INT64", (-1,))),
    outputs=(TensorSpec("embedding", "TYPE_FP32", (32,)),),
    batched=True,
)


FIXED = Signature(
    inputs=(TensorSpec("x", "TYPE_FP32", (3, 8)),),
    outputs=(TensorSpec("y", "TYPE_FP32", (3, 8)),),
    batched=False,
)


@pytest.fixture
def no_tensorrt(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pretend neither the tensorrt module nor trtexec exists (true here, forced elsewhere)."""
    monkeypatch.setattr(builder_mod, "import_tensorrt", lambda: None)
    monkeypatch.setattr(runner_mod, "import_tensorrt", lambda: None)
    monkeypatch.setattr(builder_mod.shutil, "which", lambda name: None)


def test_static_profile_without_batch() -> None:
    profiles = shape_profiles(FIXED, 0, TensorRtOptions())
    assert profiles == {"x": ShapeProfile((3, 8), (3, 8), (3, 8), dynamic=False)}


def test_dynamic_batch_runs_to_max_batch() -> None:
    profiles = shape_profiles(MLP, 32, TensorRtOptions())
    assert profiles["input"] == ShapeProfile((1, 16), (32, 16), (32, 16), dynamic=True)


def test_opt_batch_size() -> None:
    profiles = shape_profiles(MLP, 32, TensorRtOptions(opt_batch_size=8))
    assert profiles["input"].opt == (8, 16)


def test_dynamic_seq_default_and_overrides() -> None:
    default = shape_profiles(TEXT, 16, TensorRtOptions())
    assert default["input_ids"] == ShapeProfile((1, 1), (16, 128), (16, 512), dynamic=True)
    by_axis = shape_profiles(TEXT, 16, TensorRtOptions(dims={"input_ids:1": (8, 64, 256)}))
    assert by_axis["input_ids"].max == (16, 256)
    assert by_axis["attention_mask"].max == (16, 512)
    names = {"input_ids": ("batch", "seq"), "attention_mask": ("batch", "seq")}
    by_name = shape_profiles(TEXT, 16, TensorRtOptions(dims={"seq": (8, 64, 256)}), names)
    assert (
        by_name["input_ids"] == by_name["attention_mask"] == ShapeProfile((1, 8), (16, 64), (16, 256), True)
    )


def test_dim_names_come_from_the_onnx_file(tmp_path: Path) -> None:
    path = write_example("text", tmp_path / "text.onnx")
    assert onnx_dim_names(path) == {"input_ids": ("batch", "seq"), "attention_mask": ("batch", "seq")}


def test_max_batch_zero_fixes_a_leading_batch_dim() -> None:
    assert shape_profiles(MLP, 0, TensorRtOptions())["input"] == ShapeProfile((1, 16), (1, 16), (1, 16), True)


@pytest.mark.parametrize(
    ("signature", "max_batch", "options", "match"),
    [
        (MLP, 8, TensorRtOptions(opt_batch_size=16), "exceeds max_batch_size"),
        (MLP, 0, TensorRtOptions(opt_batch_size=4), "needs a max_batch_size"),
        (FIXED, 4, TensorRtOptions(), "max_batch_size must be 0"),
        (TEXT, 8, TensorRtOptions(dims={"sequence": (1, 2, 3)}), "names no input dim"),
        (MLP, 8, TensorRtOptions(dims={"input:1": (1, 2, 3)}), "fixed at 16"),
    ],
)
def test_profile_errors(signature: Signature, max_batch: int, options: TensorRtOptions, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        shape_profiles(signature, max_batch, options)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"precision": "fp8"}, "unknown TensorRT precision"),
        ({"precision": "int8"}, "calibration data or a TensorRT calibration cache"),
        ({"precision": "int8", "calibration_data": Path("a"), "calibration_cache": Path("b")}, "two ways"),
        ({"calibration_data": Path("a")}, "INT8 only"),
        ({"keep_fp32_layers": ("l1",)}, "needs --precision fp16 or int8"),
        ({"opt_batch_size": 0}, "at least 1"),
        ({"workspace_mb": 0}, "must be positive"),
        ({"dims": {"seq": (4, 2, 8)}}, "min<=opt<=max"),
        ({"trt_version": "ten"}, "cannot read TensorRT version"),
        ({"precision": "int8", "calibration_cache": Path("c"), "trt_version": "11.1"}, "no implicit INT8"),
    ],
)
def test_option_validation(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ConfigError, match=match) as info:
        TensorRtOptions(**kwargs)  # type: ignore[arg-type]
    assert "\n" not in info.value.one_line()


def test_trtexec_fp32_dynamic_batch() -> None:
    argv = trtexec_command(
        Path("m.onnx"), Path("1/model.plan"), shape_profiles(MLP, 32, TensorRtOptions()), TensorRtOptions()
    )
    assert argv == [
        "trtexec",
        "--onnx=m.onnx",
        "--saveEngine=1/model.plan",
        "--minShapes=input:1x16",
        "--optShapes=input:32x16",
        "--maxShapes=input:32x16",
        "--skipInference",
    ]


def test_trtexec_static_model_takes_no_shapes() -> None:
    argv = trtexec_command("m.onnx", "p.plan", shape_profiles(FIXED, 0, TensorRtOptions()), TensorRtOptions())
    assert not any(a.startswith(("--minShapes", "--optShapes", "--maxShapes")) for a in argv)


def test_trtexec_two_dynamic_inputs() -> None:
    argv = trtexec_command("m.onnx", "p.plan", shape_profiles(TEXT, 8, TensorRtOptions()), TensorRtOptions())
    assert "--maxShapes=input_ids:8x512,attention_mask:8x512" in argv


def test_trtexec_fp16_keep_fp32_workspace_timing_cache() -> None:
    options = TensorRtOptions(
        precision="fp16", keep_fp32_layers=("fc1", "softmax"), workspace_mb=2048, timing_cache=Path("t.cache")
    )
    argv = trtexec_command("m.onnx", "p.plan", shape_profiles(MLP, 8, options), options)
    for flag in (
        "--fp16",
        "--precisionConstraints=obey",
        "--layerPrecisions=fc1:fp32,softmax:fp32",
        "--memPoolSize=workspace:2048M",
        "--timingCacheFile=t.cache",
    ):
        assert flag in argv
    assert "--int8" not in argv


def test_trtexec_int8_with_a_calibration_cache() -> None:
    options = TensorRtOptions(precision="int8", calibration_cache=Path("calib.cache"))
    argv = trtexec_command("m.onnx", "p.plan", shape_profiles(MLP, 8, options), options)
    assert {"--int8", "--fp16", "--calib=calib.cache"} <= set(argv)


def test_trtexec_int8_with_data_builds_the_qdq_model_without_calib() -> None:
    options = TensorRtOptions(precision="int8", calibration_data=Path("data.npz"))
    argv = trtexec_command("qdq.onnx", "p.plan", shape_profiles(MLP, 8, options), options)
    assert "--int8" in argv
    assert not any(a.startswith("--calib") for a in argv)


def test_strongly_typed_tensorrt_takes_no_precision_flags() -> None:
    options = TensorRtOptions(precision="fp16", keep_fp32_layers=("fc1",), trt_version="11.1.0")
    argv = trtexec_command("m.onnx", "p.plan", shape_profiles(MLP, 8, options), options)
    assert not any(a in argv for a in ("--fp16", "--int8", "--precisionConstraints=obey"))
    assert trt_mod.needs_prepared_onnx(options)


def test_input_names_with_colons_are_quoted() -> None:
    signature = Signature(
        (TensorSpec("input:0", "TYPE_FP32", (4,)),), (TensorSpec("y", "TYPE_FP32", (4,)),), True
    )
    argv = trtexec_command(
        "m.onnx", "p.plan", shape_profiles(signature, 2, TensorRtOptions()), TensorRtOptions()
    )
    assert "--minShapes='input:0':1x4" in argv


def test_compose_line_uses_container_paths(tmp_path: Path) -> None:
    options = TensorRtOptions(precision="fp16", timing_cache=tmp_path / "t.cache", opt_batch_size=4)
    profiles = shape_profiles(MLP, 16, options)
    commands = tensorrt_commands(
        tmp_path / "src.onnx", tmp_path / "repo" / "mlp_trt", profiles, options, version=2
    )
    assert commands.trtexec[1] == f"--onnx={tmp_path / 'src.onnx'}"
    assert commands.trtexec[2] == f"--saveEngine={tmp_path / 'repo' / 'mlp_trt' / '2' / 'model.plan'}"
    assert commands.compose_line().startswith(
        "docker compose run --rm trt-build /usr/src/tensorrt/bin/trtexec "
        "--onnx=/models/mlp_trt/trt-build/model.onnx --saveEngine=/models/mlp_trt/2/model.plan "
    )
    assert "--timingCacheFile=/models/mlp_trt/trt-build/timing.cache" in commands.compose
    assert "--optShapes=input:4x16" in commands.compose
    assert not commands.prepared_onnx


def test_unavailable_tensorrt_names_both_commands(tmp_path: Path, no_tensorrt: None) -> None:
    source = write_example("mlp", tmp_path / "mlp.onnx")
    model_dir = tmp_path / "staging" / "mlp_trt"
    with pytest.raises(TensorRtUnavailableError) as info:
        write_tensorrt_artifact(
            OnnxBuild(source, MLP, model_dir, "container", 8),
            TensorRtOptions(),
            repo_model_dir=tmp_path / "repo" / "mlp_trt",
        )
    error = info.value
    assert isinstance(error, ConversionError)
    assert "TensorRT is not available" in error.message
    assert error.hint is not None
    assert error.commands.trtexec_line() in error.hint
    assert error.commands.compose_line() in error.hint
    assert f"--saveEngine={tmp_path / 'repo' / 'mlp_trt' / '1' / 'model.plan'}" in error.hint
    assert "\n" not in error.one_line()
    assert not model_dir.exists()


def test_dry_run_writes_build_inputs_and_returns_commands(tmp_path: Path) -> None:
    source = write_example("mlp", tmp_path / "mlp.onnx")
    model_dir = tmp_path / "mlp_trt"
    options = TensorRtOptions(precision="fp16", dry_run=True, cuda_graphs=True)
    artifact = write_tensorrt_artifact(OnnxBuild(source, MLP, model_dir, "container", 8), options)
    assert artifact.platform == "tensorrt_plan"
    assert artifact.files == ("trt-build/model.onnx",)
    assert (model_dir / "trt-build" / "model.onnx").read_bytes() == source.read_bytes()
    assert (model_dir / "1").is_dir()
    commands = artifact.engine["commands"]
    assert isinstance(commands, dict)
    assert commands["compose"].startswith("docker compose run --rm trt-build")
    assert "--fp16" in commands["trtexec"]
    assert artifact.engine["precision"] == "fp16"
    assert artifact.engine["cuda_graphs"] is True
    json.dumps(artifact.engine)


def test_local_target_is_refused(tmp_path: Path) -> None:
    source = write_example("mlp", tmp_path / "mlp.onnx")
    with pytest.raises(ConversionError, match="no TensorRT backend"):
        write_tensorrt_artifact(
            OnnxBuild(source, MLP, tmp_path / "m", "local", 8), TensorRtOptions(dry_run=True)
        )


def test_unknown_keep_fp32_layer_is_refused(tmp_path: Path) -> None:
    source = write_example("mlp", tmp_path / "mlp.onnx")
    options = TensorRtOptions(precision="fp16", keep_fp32_layers=("no_such_node",), dry_run=True)
    with pytest.raises(ConfigError, match="no_such_node"):
        write_tensorrt_artifact(OnnxBuild(source, MLP, tmp_path / "m", "container", 8), options)


def test_int8_calibration_writes_a_qdq_model_close_to_fp32(tmp_path: Path) -> None:
    import onnx
    import onnxruntime as ort

    source = write_example("mlp", tmp_path / "mlp.onnx")
    rng = np.random.default_rng(0)
    data_dir = tmp_path / "calib"
    data_dir.mkdir()
    for index in range(4):
        np.savez(data_dir / f"batch{index}.npz", input=rng.standard_normal((8, 16)).astype(np.float32))
    options = TensorRtOptions(precision="int8", calibration_data=data_dir, dry_run=True)
    artifact = write_tensorrt_artifact(OnnxBuild(source, MLP, tmp_path / "mlp_trt", "container", 8), options)
    qdq = tmp_path / "mlp_trt" / "trt-build" / "model.onnx"
    assert artifact.files == ("trt-build/model.onnx",)
    ops = {node.op_type for node in onnx.load(str(qdq)).graph.node}
    assert {"QuantizeLinear", "DequantizeLinear"} <= ops
    x = rng.standard_normal((8, 16)).astype(np.float32)
    expected = ort.InferenceSession(str(source), providers=["CPUExecutionProvider"]).run(None, {"input": x})[
        0
    ]
    got = ort.InferenceSession(str(qdq), providers=["CPUExecutionProvider"]).run(None, {"input": x})[0]
    assert np.abs(got - expected).max() < 0.1 * np.abs(expected).max()
    assert "--int8" in str(artifact.engine["commands"])


def test_calibration_data_must_cover_every_input(tmp_path: Path) -> None:
    source = write_example("mlp", tmp_path / "mlp.onnx")
    np.savez(tmp_path / "calib.npz", wrong=np.zeros((2, 16), np.float32))
    options = TensorRtOptions(precision="int8", calibration_data=tmp_path / "calib.npz", dry_run=True)
    with pytest.raises(ConversionError, match="no array 'input'"):
        write_tensorrt_artifact(OnnxBuild(source, MLP, tmp_path / "m", "container", 8), options)


def test_failing_trtexec_reports_its_log_tail(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "trtexec"
    fake.write_text(
        "#!/bin/sh\necho '&&&& RUNNING TensorRT.trtexec [TensorRT v100300]'\necho '[E] bad node'\nexit 3\n"
    )
    fake.chmod(0o755)
    monkeypatch.setattr(builder_mod, "import_tensorrt", lambda: None)
    monkeypatch.setattr(builder_mod.shutil, "which", lambda name: str(fake))
    source = write_example("mlp", tmp_path / "mlp.onnx")
    with pytest.raises(ConversionError, match=r"exit code 3.*\[E\] bad node"):
        write_tensorrt_artifact(OnnxBuild(source, MLP, tmp_path / "m", "container", 8), TensorRtOptions())


def test_trtexec_build_records_the_version_from_its_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = tmp_path / "trtexec"
    fake.write_text(
        "#!/bin/sh\necho '&&&& RUNNING TensorRT.trtexec [TensorRT v100300] # trtexec'\n"
        'for a in "$@"; do case "$a" in --saveEngine=*) echo plan > "${a#--saveEngine=}";; esac; done\n'
    )
    fake.chmod(0o755)
    monkeypatch.setattr(builder_mod, "import_tensorrt", lambda: None)
    monkeypatch.setattr(builder_mod.shutil, "which", lambda name: str(fake))
    source = write_example("mlp", tmp_path / "mlp.onnx")
    artifact = write_tensorrt_artifact(
        OnnxBuild(source, MLP, tmp_path / "m", "container", 8), TensorRtOptions()
    )
    assert artifact.files == ("1/model.plan",)
    assert artifact.engine["tensorrt_version"] == "10.3.0"
    assert artifact.engine["builder"] == "trtexec"
    with pytest.raises(ConfigError, match=r"serves TensorRT 10\.8"):
        write_tensorrt_artifact(
            OnnxBuild(source, MLP, tmp_path / "n", "container", 8), TensorRtOptions(trt_version="10.8")
        )


@pytest.mark.parametrize(
    ("image", "version"),
    [
        ("nvcr.io/nvidia/tritonserver:24.08-py3", "10.3.0"),
        ("24.05", "10.0.1"),
        ("tritongen-tritonserver:25.01-py3", "10.8.0"),
        # entries read in the Triton release notes (rel-24-10, rel-24-12, rel-25-01)
        ("nvcr.io/nvidia/tritonserver:24.10-py3", "10.5.0"),
        ("nvcr.io/nvidia/tritonserver:24.12-py3", "10.7.0"),
        ("25.01", "10.8.0"),
        # releases no source gave a TensorRT line for stay unknown
        ("nvcr.io/nvidia/tritonserver:25.03-py3", None),
        ("nvcr.io/nvidia/tritonserver:26.01-py3", None),
        ("nvcr.io/nvidia/tritonserver:19.01-py3", None),
        ("my-registry:5000/triton:latest", None),
    ],
)
def test_image_tensorrt_versions(image: str, version: str | None) -> None:
    assert tensorrt_version_for_image(image) == version


def test_tensorrt_version_table_is_well_formed() -> None:
    releases = list(versions_mod.TRITON_TENSORRT_VERSIONS)
    assert releases == sorted(releases)
    for release, version in versions_mod.TRITON_TENSORRT_VERSIONS.items():
        assert re.fullmatch(r"\d{2}\.\d{2}", release)
        assert re.fullmatch(r"\d+\.\d+\.\d+", version)
    # a later release never ships an older TensorRT than an earlier one
    versions = [tuple(int(p) for p in v.split(".")) for v in versions_mod.TRITON_TENSORRT_VERSIONS.values()]
    assert versions == sorted(versions)


def test_plan_version_mismatch_is_refused() -> None:
    check_plan_matches_image("10.3.0", "nvcr.io/nvidia/tritonserver:24.08-py3")
    check_plan_matches_image("10.3.1", "24.08")
    check_plan_matches_image(None, "24.08")
    check_plan_matches_image("9.9", "nvcr.io/nvidia/tritonserver:99.01-py3")
    with pytest.raises(
        ConfigError, match=r"built with TensorRT 10\.7\.0 but .* ships TensorRT 10\.3\.0"
    ) as info:
        check_plan_matches_image("10.7.0", "nvcr.io/nvidia/tritonserver:24.08-py3")
    assert info.value.hint is not None and "trt-build" in info.value.hint


def test_repository_plans_are_checked_against_the_image(tmp_path: Path) -> None:
    model = tmp_path / "repo" / "mlp_trt"
    model.mkdir(parents=True)
    (model / "tritongen.json").write_text(json.dumps({"engine": {"tensorrt_version": "10.7.0"}}))
    assert plan_tensorrt_version(model) == "10.7.0"
    check_repository_plans(tmp_path / "repo", "24.12")
    with pytest.raises(ConfigError, match="model mlp_trt"):
        check_repository_plans(tmp_path / "repo", "nvcr.io/nvidia/tritonserver:24.08-py3")


def test_version_parsed_from_trtexec_logs() -> None:
    assert versions_mod.version_from_log("&&&& RUNNING TensorRT.trtexec [TensorRT v100300] # x") == "10.3.0"
    assert versions_mod.version_from_log("&&&& RUNNING TensorRT.trtexec [TensorRT v8601] # x") == "8.6.1"
    assert versions_mod.version_from_log("[I] TensorRT version: 10.8.0") == "10.8.0"
    assert versions_mod.version_from_log("nothing") is None


def test_cli_helpers(tmp_path: Path, no_tensorrt: None) -> None:
    assert trt_mod.parse_dim_ranges("seq=1,128,512; input_ids:1=8,64,256") == {
        "seq": (1, 128, 512),
        "input_ids:1": (8, 64, 256),
    }
    with pytest.raises(ConfigError, match="KEY=MIN,OPT,MAX"):
        trt_mod.parse_dim_ranges("seq=1,2")
    options = trt_mod.TensorRtOptions(
        precision="fp16", keep_fp32_layers=("a",), opt_batch_size=2, dry_run=True
    )
    assert options.precision == "fp16" and options.dry_run
    with pytest.raises(ConfigError, match="unknown TensorRT precision"):
        trt_mod.TensorRtOptions(precision="bf16")
    assert "not available" in str(trt_mod.tensorrt_unavailable_reason())
    assert issubclass(TensorRtUnavailableError, trt_mod.EngineUnavailableError)
    assert trt_mod.tensorrt_runner(tmp_path, MLP) is None
