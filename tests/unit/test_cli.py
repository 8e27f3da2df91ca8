"""The CLI through Typer's CliRunner: what users type, what lands on disk, what they read."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from tritongen.cli.main import app
from tritongen.io.files import STAGING_PREFIX
from tritongen.triton.proto import read_config

from support.cli_output import error_line
from support.compose_schema import check_compose_schema

runner = CliRunner()


def _run(*args: str | Path) -> tuple[int, str, str]:
    result = runner.invoke(app, [str(a) for a in args])
    return result.exit_code, result.stdout, result.stderr


def _no_leftovers(repo: Path) -> None:
    assert not [p for p in repo.iterdir() if p.name.startswith(STAGING_PREFIX)]


def test_help_lists_commands() -> None:
    code, out, _ = _run("--help")
    assert code == 0
    for command in ("convert", "render", "compose", "example"):
        assert command in out


def test_version() -> None:
    code, out, _ = _run("--version")
    assert code == 0
    assert out.startswith("tritongen ")


def test_convert_local_writes_python_backend_model(example_models: dict[str, Path], tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    code, out, err = _run(
        "convert", example_models["mlp"], "--name", "mlp", "--repo", repo,
        "--preferred-batch-sizes", "4,8,16", "--max-queue-delay-us", "500", "--instances", "2",
    )  # fmt: skip
    assert code == 0, err
    model = repo / "mlp_onnx"
    assert sorted(str(p.relative_to(model)) for p in model.rglob("*") if p.is_file()) == [
        "1/model.onnx", "1/model.py", "1/tritongen_runtime.py", "config.pbtxt", "tritongen.json",
    ]  # fmt: skip
    assert (model / "1" / "model.onnx").read_bytes() == example_models["mlp"].read_bytes()
    config = read_config(model / "config.pbtxt")
    assert config.name == "mlp_onnx"
    assert config.backend == "python"
    assert config.max_batch_size == 32
    assert [(t.name, t.data_type, t.dims) for t in config.input] == [("input", "TYPE_FP32", [16])]
    assert config.dynamic_batching is not None
    assert config.dynamic_batching.preferred_batch_size == [4, 8, 16]
    assert config.dynamic_batching.max_queue_delay_microseconds == 500
    assert [(g.count, g.kind) for g in config.instance_group] == [(2, "KIND_CPU")]
    meta = json.loads((model / "tritongen.json").read_text())
    assert meta["target"] == "local" and meta["format"] == "onnx"
    assert "mlp_onnx" in out
    _no_leftovers(repo)


def test_convert_container_uses_native_onnxruntime(example_models: dict[str, Path], tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    code, _, err = _run(
        "convert", example_models["text"], "--name", "text", "--repo", repo, "--target", "container"
    )
    assert code == 0, err
    config = read_config(repo / "text_onnx" / "config.pbtxt")
    assert config.backend == "onnxruntime"
    assert not (repo / "text_onnx" / "1" / "model.py").exists()
    assert [(g.kind) for g in config.instance_group] == ["KIND_GPU"]
    assert [t.dims for t in config.input] == [[-1], [-1]]


def test_convert_static_model_gets_no_batching(example_models: dict[str, Path], tmp_path: Path) -> None:
    code, _, err = _run("convert", example_models["fixed"], "--repo", tmp_path)
    assert code == 0, err
    config = read_config(tmp_path / "fixed_onnx" / "config.pbtxt")
    assert config.max_batch_size == 0
    assert config.dynamic_batching is None
    assert config.input[0].dims == [3, 8]


def test_max_batch_size_zero_keeps_the_batch_dim(example_models: dict[str, Path], tmp_path: Path) -> None:
    code, _, err = _run("convert", example_models["mlp"], "--repo", tmp_path, "--max-batch-size", "0")
    assert code == 0, err
    config = read_config(tmp_path / "mlp_onnx" / "config.pbtxt")
    assert config.max_batch_size == 0
    assert config.input[0].dims == [-1, 16]
    assert config.dynamic_batching is None


def test_existing_model_needs_force(example_models: dict[str, Path], tmp_path: Path) -> None:
    assert _run("convert", example_models["mlp"], "--repo", tmp_path)[0] == 0
    before = (tmp_path / "mlp_onnx" / "config.pbtxt").read_text()
    code, _, err = _run("convert", example_models["mlp"], "--repo", tmp_path, "--instances", "3")
    assert code == 1
    assert "already exists" in error_line(err) and "--force" in err
    assert (tmp_path / "mlp_onnx" / "config.pbtxt").read_text() == before
    code, _, err = _run("convert", example_models["mlp"], "--repo", tmp_path, "--instances", "3", "--force")
    assert code == 0, err
    assert read_config(tmp_path / "mlp_onnx" / "config.pbtxt").instance_group[0].count == 3
    _no_leftovers(tmp_path)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--preferred-batch-sizes", "4,64", "--max-batch-size", "32"], "exceed --max-batch-size 32"),
        (["--preferred-batch-sizes", "64"], "exceed max_batch_size 32"),
        (["--max-queue-delay-us", "-1"], "negative"),
        (["--name", "../evil"], "path separator"),
        (["--name", "a b"], "contains ' '"),
        (["--name", "x;reboot"], "contains ';'"),
        (["--formats", "pytorch"], "format 'pytorch' is not supported"),
        (["--kind", "gpu"], "embedded server runs on CPU"),
        (["--instances", "0"], "at least 1"),
    ],
)
def test_bad_options_fail_cleanly(
    example_models: dict[str, Path], tmp_path: Path, args: list[str], expected: str
) -> None:
    repo = tmp_path / "repo"
    code, _, err = _run("convert", example_models["mlp"], "--repo", repo, *args)
    assert code == 1
    assert expected in error_line(err)
    assert not repo.exists() or list(repo.iterdir()) == []


def test_batching_a_static_model_is_refused(example_models: dict[str, Path], tmp_path: Path) -> None:
    code, _, err = _run("convert", example_models["fixed"], "--repo", tmp_path, "--max-batch-size", "8")
    assert code == 1
    assert "cannot batch" in error_line(err)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("content", [b"", b"not onnx at all" * 50, None])
def test_bad_source_files(tmp_path: Path, example_models: dict[str, Path], content: bytes | None) -> None:
    source = tmp_path / "model.onnx"
    if content is None:
        source.write_bytes(example_models["mlp"].read_bytes()[:300])  # truncated
    else:
        source.write_bytes(content)
    repo = tmp_path / "repo"
    code, _, err = _run("convert", source, "--repo", repo)
    assert code == 1
    assert "model.onnx" in error_line(err)
    assert not repo.exists()


def test_missing_source(tmp_path: Path) -> None:
    code, _, err = _run("convert", tmp_path / "missing.onnx", "--repo", tmp_path / "repo")
    assert code == 1
    assert "does not exist" in error_line(err)


def test_unwritable_repository(example_models: dict[str, Path], tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    code, _, err = _run("convert", example_models["mlp"], "--repo", blocker / "repo")
    assert code == 1
    assert "cannot create repository" in error_line(err)


def test_read_only_repository(
    example_models: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An existing repository the OS says is not writable (a read-only mount, say): one line, nothing written.

    Root passes every permission check but a read-only mount's, so ``os.access`` answers for the
    repository as a read-only mount would; the test then runs the same for any user.
    """
    repo = tmp_path / "repo"
    repo.mkdir()
    real_access = os.access

    def access(path: str | os.PathLike[str], mode: int, **kwargs: object) -> bool:
        if Path(path) == repo and mode & os.W_OK:
            return False
        return real_access(path, mode, **kwargs)

    monkeypatch.setattr(os, "access", access)
    code, _, err = _run("convert", example_models["mlp"], "--repo", repo)
    monkeypatch.undo()
    assert code == 1
    assert f"repository {repo} is not writable" in error_line(err)
    assert list(repo.iterdir()) == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores directory permission bits")
def test_read_only_repository_by_mode(example_models: dict[str, Path], tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    repo.chmod(0o500)
    try:
        code, _, err = _run("convert", example_models["mlp"], "--repo", repo)
    finally:
        repo.chmod(0o700)
    assert code == 1
    assert "not writable" in error_line(err)
    assert list(repo.iterdir()) == []


def test_template_error_leaves_nothing(example_models: dict[str, Path], tmp_path: Path) -> None:
    templates = tmp_path / "templates"
    templates.mkdir()
    (templates / "config.pbtxt.j2").write_text("name: {{ config.name | q }}\n{{ missing_var }}\n")
    repo = tmp_path / "repo"
    code, _, err = _run("convert", example_models["mlp"], "--repo", repo, "--templates", templates)
    assert code == 1
    assert "config.pbtxt.j2:2" in error_line(err)
    assert list(repo.iterdir()) == []


def test_render_rewrites_in_place_and_keeps_backup(example_models: dict[str, Path], tmp_path: Path) -> None:
    assert _run("convert", example_models["mlp"], "--repo", tmp_path)[0] == 0
    model = tmp_path / "mlp_onnx"
    before = (model / "config.pbtxt").read_text()
    code, out, err = _run(
        "render", model, "--preferred-batch-sizes", "8,16", "--max-queue-delay-us", "1000", "--instances", "2"
    )
    assert code == 0, err
    assert (model / "config.pbtxt.bak").read_text() == before
    config = read_config(model / "config.pbtxt")
    assert config.dynamic_batching is not None
    assert config.dynamic_batching.preferred_batch_size == [8, 16]
    assert config.dynamic_batching.max_queue_delay_microseconds == 1000
    assert config.instance_group[0].count == 2 and config.instance_group[0].kind == "KIND_CPU"
    assert "rewrote" in out
    _no_leftovers(model)


def test_render_refuses_illegal_change_and_keeps_config(
    example_models: dict[str, Path], tmp_path: Path
) -> None:
    assert _run("convert", example_models["mlp"], "--repo", tmp_path)[0] == 0
    model = tmp_path / "mlp_onnx"
    before = (model / "config.pbtxt").read_text()
    code, _, err = _run("render", model, "--max-batch-size", "8", "--preferred-batch-sizes", "16")
    assert code == 1
    assert "exceed --max-batch-size 8" in error_line(err)
    assert (model / "config.pbtxt").read_text() == before
    assert not (model / "config.pbtxt.bak").exists()


def test_render_preserves_hand_written_fields(tmp_path: Path) -> None:
    model = tmp_path / "seq"
    model.mkdir()
    (model / "config.pbtxt").write_text(
        'name: "seq"\nbackend: "python"\nmax_batch_size: 8\n'
        'input { name: "x" data_type: TYPE_FP32 dims: [ 4 ] }\n'
        'output { name: "y" data_type: TYPE_FP32 dims: [ 4 ] }\n'
        "sequence_batching { max_sequence_idle_microseconds: 5000 }\n"
    )
    code, _, err = _run("render", model, "--instances", "2")
    assert code == 0, err
    text = (model / "config.pbtxt").read_text()
    assert "max_sequence_idle_microseconds: 5000" in text
    assert read_config(model / "config.pbtxt").instance_group[0].count == 2


def test_render_missing_dir(tmp_path: Path) -> None:
    code, _, err = _run("render", tmp_path / "nope")
    assert code == 1
    assert "not a directory" in error_line(err)


def test_render_broken_config_names_position(tmp_path: Path) -> None:
    (tmp_path / "config.pbtxt").write_text('name: "m"\nmax_batch_size: "eight"\n')
    code, _, err = _run("render", tmp_path)
    assert code == 1
    assert "config.pbtxt:2:" in error_line(err)


def test_example_unknown_name(tmp_path: Path) -> None:
    code, _, err = _run("example", "resnet", "-o", tmp_path / "x.onnx")
    assert code == 1
    assert "choose from" in error_line(err)


def test_compose_binds_loopback_and_validates(example_models: dict[str, Path], tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    assert _run("convert", example_models["mlp"], "--repo", repo)[0] == 0
    out = tmp_path / "deploy" / "compose.yaml"
    code, _, err = _run("compose", repo, "-o", out)
    assert code == 0, err
    doc = yaml.safe_load(out.read_text())
    server = doc["services"]["tritonserver"]
    assert server["ports"] == ["127.0.0.1:8000:8000", "127.0.0.1:8001:8001", "127.0.0.1:8002:8002"]
    assert server["volumes"] == ["../repo:/models:ro"]
    assert "onnxruntime-gpu" in server["build"]["dockerfile_inline"]
    assert doc["services"]["locust-master"]["profiles"] == ["loadtest"]
    check_compose_schema(out)

    code, _, err = _run("compose", repo, "-o", out, "--public")
    assert code == 0, err
    assert yaml.safe_load(out.read_text())["services"]["tritonserver"]["ports"][0] == "8000:8000"


def test_compose_empty_repository(tmp_path: Path) -> None:
    code, _, err = _run("compose", tmp_path, "-o", tmp_path / "compose.yaml")
    assert code == 1
    assert "holds no models" in error_line(err)
    assert not (tmp_path / "compose.yaml").exists()
