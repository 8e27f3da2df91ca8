"""What Triton fills in for a config it completes, as lint and the served-config reader see it."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from tritongen.cli.main import app
from tritongen.errors import ConfigError
from tritongen.examples.models import write_example
from tritongen.lint.findings import Finding
from tritongen.lint.repository import lint_paths
from tritongen.triton.autofill import server_completes
from tritongen.triton.proto import config_from_served

from support.autocomplete_models import (
    MINIMAL_CONFIG,
    PLAIN_MODEL_PY,
    write_auto_model,
    write_ensemble,
    write_refused_and_doubtful,
)

runner = CliRunner()


def _by_severity(findings: list[Finding]) -> dict[str, list[Finding]]:
    grouped: dict[str, list[Finding]] = {"error": [], "warning": [], "info": []}
    for finding in findings:
        grouped[finding.severity].append(finding)
    return grouped


def test_lint_notes_an_onnx_model_without_config(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    write_example("mlp", repo / "mlp_auto" / "1" / "model.onnx")
    # An ensemble over it: the step exists, its tensors are known only once Triton fills them in.
    write_auto_model(repo / "doubler")
    write_ensemble(repo / "chain", "mlp_auto", "doubler")
    report = lint_paths([repo])
    assert sorted(report.models) == ["chain", "doubler", "mlp_auto"]
    found = _by_severity(report.findings)
    assert not found["error"] and not found["warning"], [f.text() for f in report.findings]
    notes = {f.model: f for f in found["info"]}
    assert set(notes) == {"doubler", "mlp_auto"}
    assert notes["mlp_auto"].message == (
        "no config.pbtxt: Triton fills it in: backend 'onnxruntime' from 1/model.onnx; "
        "inputs, outputs and max_batch_size from the ONNX graph"
    )
    assert "embedded server" in notes["mlp_auto"].fix  # it has only the Python backend
    assert notes["mlp_auto"].file == str(repo / "mlp_auto")
    result = runner.invoke(app, ["lint", str(repo / "mlp_auto")])
    assert result.exit_code == 0 and "clean (1 note(s))" in result.stdout


def test_lint_flags_directories_triton_refuses(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    expected = write_refused_and_doubtful(repo)
    write_example("mlp", repo / "two_versions" / "1" / "model.onnx")
    (repo / "two_versions" / "2").mkdir()  # the latest version, without its model file
    (repo / "custom.identity" / "1").mkdir(parents=True)  # Triton reads a backend from the name
    report = lint_paths([repo])
    rules = {f.model: (f.severity, f.rule) for f in report.findings if f.severity != "info"}
    assert rules == {
        **{model: ("error", rule) for model, rule in expected.items() if model != "plain_py"},
        "plain_py": ("warning", "autocomplete.python-no-io"),
        "two_versions": ("error", "files.model-file"),
        "custom.identity": ("warning", "autocomplete.backend-from-name"),
    }
    by_model = {f.model: f for f in report.findings if f.severity != "info"}
    assert "no subdirectory holding a model file" in by_model["empty_dir"].message
    assert "1/ (the first subdirectory) holds none of model.graphdef" in by_model["unknown_file"].message
    assert "line 2" in by_model["broken_py"].message
    assert by_model["two_versions"].message == "version 2 has no model.onnx"
    result = runner.invoke(app, ["lint", str(repo)])
    assert result.exit_code == 1 and "7 model(s) checked: 5 error(s), 2 warning(s)" in result.stdout
    # A directory holding neither a config nor a model file is no lint target at all.
    assert runner.invoke(app, ["lint", str(repo / "empty_dir")]).exit_code == 2


def test_when_the_server_completes_the_config(tmp_path: Path) -> None:
    assert server_completes(write_auto_model(tmp_path / "none")) == "no config.pbtxt"
    partial = write_auto_model(tmp_path / "partial", config=MINIMAL_CONFIG)
    assert server_completes(partial) == "config.pbtxt declares no inputs or outputs"
    full = 'backend: "python"\nmax_batch_size: 8\n' + (
        'input [{ name: "x" data_type: TYPE_FP32 dims: [ 4 ] }]\n'
        'output [{ name: "y" data_type: TYPE_FP32 dims: [ 4 ] }]\n'
    )
    # Declared in full, but auto_complete_config runs on every load and may change it.
    completed = write_auto_model(tmp_path / "declared", config=full)
    assert server_completes(completed) == "1/model.py completes it in auto_complete_config"
    plain = write_auto_model(tmp_path / "plain", config=full, model_py=PLAIN_MODEL_PY)
    assert server_completes(plain) is None  # the file is the config


_TENSORS = {
    "input": 'input [{ name: "x" data_type: TYPE_FP32 dims: [ 4 ] }]\n',
    "output": 'output [{ name: "y" data_type: TYPE_FP32 dims: [ 4 ] }]\n',
}


@pytest.mark.parametrize(
    ("declared", "missing"), [("input", "outputs"), ("output", "inputs"), ("", "inputs or outputs")]
)
def test_lint_and_the_served_config_agree_on_a_partial_config(
    tmp_path: Path, declared: str, missing: str
) -> None:
    """Inputs without outputs (or the reverse): lint notes that the backend completes it; so does served."""
    model = write_auto_model(
        tmp_path / "repo" / "partial", config=MINIMAL_CONFIG + _TENSORS.get(declared, "")
    )
    assert server_completes(model) == f"config.pbtxt declares no {missing}"
    found = _by_severity(lint_paths([model]).findings)
    assert not found["error"] and not found["warning"], [f.text() for f in found["error"] + found["warning"]]
    (note,) = found["info"]
    assert note.rule == "autocomplete.filled"
    assert note.message.startswith(f"the config declares no {missing}: Triton fills them in: ")
    # Both declared: neither says the server completes the tensors.
    full = write_auto_model(
        tmp_path / "repo" / "full",
        config=MINIMAL_CONFIG + "".join(_TENSORS.values()),
        model_py=PLAIN_MODEL_PY,
    )
    assert server_completes(full) is None
    assert not [f for f in lint_paths([full]).findings if f.rule.startswith("autocomplete.")]


def test_the_served_json_converts_through_tritons_schema() -> None:
    served = {
        "name": "m", "backend": "python", "max_batch_size": 8, "default_model_filename": "model.py",
        "input": [{"name": "x", "data_type": "TYPE_FP32", "format": "FORMAT_NONE", "dims": ["4"]}],
        "output": [{"name": "y", "data_type": "TYPE_FP32", "dims": [4], "label_filename": ""}],
        "instance_group": [{"name": "m", "kind": "KIND_CPU", "count": 2, "gpus": []}],
        "dynamic_batching": {"preferred_batch_size": [8], "max_queue_delay_microseconds": "100"},
        "a_field_from_a_newer_server": {"anything": True},
    }  # fmt: skip
    config = config_from_served(served)
    assert config.max_batch_size == 8 and config.input[0].dims == [4] and config.output[0].name == "y"
    assert config.dynamic_batching is not None and config.dynamic_batching.max_queue_delay_microseconds == 100
    assert [(g.kind, g.count) for g in config.instance_group] == [("KIND_CPU", 2)]
    with pytest.raises(ConfigError, match="not a Triton model config"):
        config_from_served({"max_batch_size": "many"})
