"""Lint on configs written as Triton's documentation and examples write them: nothing to warn about."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from tritongen.cli.main import app
from tritongen.lint.repository import lint_paths, lint_text
from tritongen.triton.pbtxt.written import normalized, written_fields

from support.lint_idioms import MODELS, write_idioms

runner = CliRunner()


def test_configs_written_as_tritons_examples_lint_without_warnings(tmp_path: Path) -> None:
    repository = write_idioms(tmp_path / "repo")
    report = lint_paths([repository])
    assert sorted(report.models) == sorted(MODELS)
    alarms = [f"{f.model}: {f.rule}: {f.message}" for f in report.findings if f.severity != "info"]
    assert alarms == []
    strict = runner.invoke(app, ["lint", str(repository), "--strict"])
    assert strict.exit_code == 0, strict.stdout


def test_an_instance_count_left_out_is_triton_default_and_a_written_zero_is_a_warning() -> None:
    head = 'name: "m"\nbackend: "python"\ninput [{ name: "x" data_type: TYPE_FP32 dims: [1] }]\n'
    head += 'output [{ name: "y" data_type: TYPE_FP32 dims: [1] }]\n'
    left_out = head + "instance_group [{ kind: KIND_CPU }, { kind: KIND_CPU count: 2 }]\n"
    assert not [f for f in lint_text(left_out) if f.rule == "instance-group.count"]
    written = head + "instance_group { kind: KIND_CPU count: 2 }\ninstance_group { count: 0 }\n"
    (finding,) = [f for f in lint_text(written) if f.rule == "instance-group.count"]
    assert finding.field == "instance_group[1].count" and finding.line == 5
    assert "count 0 is written, but Triton runs its default instead" in finding.message


def test_written_fields_index_every_element_in_either_list_syntax() -> None:
    text = (
        "max_batch_size: 8  # a comment { [\n"
        "instance_group [{ kind: KIND_CPU }, { count: 2 }]\n"
        "input { name: 'a' dims: [1, 2] }\ninput < name: \"b\" >\n"
        'parameters { key: "k" value: { string_value: "v" } }\n'
    )
    written = written_fields(text)
    assert written is not None
    assert {"max_batch_size[0]", "instance_group[0].kind[0]", "instance_group[1].count[0]"} <= written
    assert "instance_group[0].count[0]" not in written
    assert {"input[0].dims[1]", "input[1].name[0]", "parameters[0].value[0].string_value[0]"} <= written
    assert normalized("instance_group[1].count") == "instance_group[1].count[0]"
    assert written_fields("input { name: ") is None  # not text the tree follows
