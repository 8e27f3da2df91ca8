"""The bound on the embedded server's model loads: its default and the log lines it reads."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from tritongen.cli.main import app
from tritongen.server.loading import (
    LOAD_TIMEOUT_BASE_S,
    LOAD_TIMEOUT_PER_MODEL_S,
    default_load_timeout_s,
    still_loading,
)
from tritongen.server.local import LocalTritonServer
from tritongen.triton.repository import model_count

from support.cli_output import error_line

LOG = [
    'I1205 08:45:41.317 29001 model_lifecycle.cc:472] "loading: fast:1"',
    'I1205 08:45:41.318 29001 model_lifecycle.cc:472] "loading: slow:1"',
    'I1205 08:45:41.319 29001 model_lifecycle.cc:472] "loading: broken:1"',
    'I1205 08:45:41.320 29001 model_lifecycle.cc:472] "loading: name:with:colons:2"',
    "I1205 08:45:43.123 29001 model_lifecycle.cc:839] \"successfully loaded 'fast'\"",
    "E1205 08:45:43.124 29001 model_lifecycle.cc:642] \"failed to load 'broken' version 1: Internal: no\"",
]


def test_the_default_grows_with_the_model_count() -> None:
    assert default_load_timeout_s(1) == LOAD_TIMEOUT_BASE_S + LOAD_TIMEOUT_PER_MODEL_S
    assert default_load_timeout_s(0) == default_load_timeout_s(1)
    assert default_load_timeout_s(20) == LOAD_TIMEOUT_BASE_S + 20 * LOAD_TIMEOUT_PER_MODEL_S


def test_models_counted_are_those_named_or_every_model_folder(tmp_path: Path) -> None:
    for name in ("a", "b", "c", ".hidden"):
        (tmp_path / name).mkdir()
    (tmp_path / "README.md").write_text("not a model")
    assert model_count(tmp_path, None) == 3
    assert model_count(tmp_path, ["a"]) == 1
    assert model_count(tmp_path / "missing", None) == 0


def test_the_server_takes_the_derived_bound_unless_given_one(tmp_path: Path) -> None:
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
    assert LocalTritonServer(tmp_path).load_timeout_s == default_load_timeout_s(2)
    assert LocalTritonServer(tmp_path, models=["a"]).load_timeout_s == default_load_timeout_s(1)
    assert LocalTritonServer(tmp_path, load_timeout_s=7.5).load_timeout_s == 7.5


def test_loads_begun_and_not_ended_are_still_loading() -> None:
    assert still_loading(LOG) == ["name:with:colons", "slow"]
    assert still_loading([]) == []


def test_load_timeout_is_refused_where_no_embedded_server_starts(tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["loadtest", "mlp_onnx", "--load-timeout", "5", "--duration", "1s"])
    assert result.exit_code != 0 and "--load-timeout needs --serve REPO" in error_line(result.stderr)
    result = runner.invoke(
        app, ["tune", "mlp_onnx", "--repo", str(tmp_path), "--load-timeout", "5", "--url", "localhost:1"]
    )
    assert result.exit_code != 0 and "--load-timeout and --url exclude each other" in error_line(
        result.stderr
    )
