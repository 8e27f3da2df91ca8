"""``tritongen lint`` against a corpus of configs, with the real embedded Triton as the judge."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from tritongen.cli.main import app
from tritongen.lint.findings import Finding
from tritongen.lint.repository import lint_paths, lint_text

from support.lint_corpus import INVALID, SYNTAX, VALID, Case
from support.lint_repository import CASES, write_corpus

runner = CliRunner()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_corpus(tmp_path_factory.mktemp("lint") / "repository")


def _errors(findings: list[Finding]) -> set[str]:
    return {f.rule for f in findings if f.severity == "error"}


def test_the_corpus_covers_the_rules() -> None:
    assert len(INVALID) >= 40
    assert len({c.rule for c in INVALID}) >= 40  # distinct rules, not one rule forty times
    families = {str(c.rule).split(".")[0] for c in INVALID}
    assert {
        "name",
        "backend",
        "files",
        "versions",
        "max-batch-size",
        "io",
        "batch-input",
        "batch-output",
        "dynamic-batching",
        "sequence",
        "instance-group",
        "ensemble",
        "warmup",
        "response-cache",
    } <= families


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_lint_finds_the_broken_rule(corpus: Path, case: Case) -> None:
    report = lint_paths([corpus / case.name])
    errors = _errors(report.findings)
    if case.valid:
        assert not errors, [f.text() for f in report.findings]
    else:
        assert case.rule in errors, [f.text() for f in report.findings]
        finding = next(f for f in report.findings if f.rule == case.rule)
        assert finding.model == case.name and finding.fix and finding.message
        assert finding.file.endswith(f"{case.name}/config.pbtxt")


def test_configs_the_renderer_emits_are_clean(corpus: Path) -> None:
    report = lint_paths([corpus / "valid_rendered"])
    assert not report.findings, [f.text() for f in report.findings]


@pytest.mark.parametrize(("text", "words", "line", "column"), SYNTAX)
def test_syntax_errors_carry_line_and_column(text: str, words: str, line: int, column: int) -> None:
    findings = lint_text(text, "m", "m/config.pbtxt")
    assert len(findings) == 1 and findings[0].rule == "syntax" and findings[0].severity == "error"
    assert (findings[0].line, findings[0].column) == (line, column)
    assert words in findings[0].message
    assert findings[0].text().startswith(f"m/config.pbtxt:{line}:")


def test_cli_exit_codes_and_formats(corpus: Path, tmp_path: Path) -> None:
    result = runner.invoke(app, ["lint", str(corpus / "valid_base")])
    assert result.exit_code == 0 and "1 model(s) checked: clean" in result.stdout
    result = runner.invoke(
        app, ["lint", str(corpus / "bad_preferred_max"), str(corpus / "valid_base" / "config.pbtxt")]
    )
    assert result.exit_code == 1
    line = next(x for x in result.stdout.splitlines() if "preferred-le-max" in x)
    assert (
        "bad_preferred_max/config.pbtxt:8:20: error: bad_preferred_max: "
        "dynamic_batching.preferred_batch_size:" in line
    )
    assert "fix:" in line and "2 model(s) checked: 1 error(s)" in result.stdout
    result = runner.invoke(app, ["lint", str(corpus), "--format", "json"])
    assert result.exit_code == 1
    doc = json.loads(result.stdout)
    assert doc["schema"] == "tritongen.lint/1" and len(doc["models"]) == len(CASES) + 1
    assert {f["rule"] for f in doc["findings"]} >= {c.rule for c in INVALID}
    assert runner.invoke(app, ["lint", str(tmp_path / "missing")]).exit_code == 2
    assert runner.invoke(app, ["lint", str(tmp_path)]).exit_code == 2  # nothing to lint
    assert runner.invoke(app, ["lint", str(corpus / "valid_base"), "--format", "yaml"]).exit_code == 2
    warned = runner.invoke(app, ["lint", str(corpus / "valid_count_zero"), "--strict"])
    assert warned.exit_code == 1 and "instance-group.count" in warned.stdout


def test_findings_point_at_the_line_of_their_field() -> None:
    text = (
        'name: "m"\nbackend: "python"\nmax_batch_size: 4\n\n'
        + "dynamic_batching {\n  preferred_batch_size: [ 8 ]\n}\n"
    )
    (finding,) = lint_text(text, "m", "m/config.pbtxt")
    assert (finding.line, finding.column) == (6, 3) and finding.location == "m/config.pbtxt:6:3"
    (named,) = lint_text('name: "a b"\nbackend: "python"\n', "a b")
    assert named.rule == "name.characters" and named.severity == "warning" and named.line == 1


def test_queue_delay_far_above_the_slo_is_a_warning() -> None:
    text = (
        'name: "m"\nbackend: "python"\nmax_batch_size: 8\n'
        "dynamic_batching { max_queue_delay_microseconds: 40000 }\n"
    )
    findings = lint_text(text, "m", slo_p99_ms=50)
    assert [f.rule for f in findings if f.severity == "warning"] == ["dynamic-batching.delay-vs-slo"]
    assert not lint_text(text, "m", slo_p99_ms=200)


def test_render_refuses_a_config_that_breaks_the_rules(corpus: Path, tmp_path: Path) -> None:
    repository = tmp_path / "repo"
    model = next(c for c in VALID if c.name == "valid_base").write(repository)
    before = (model / "config.pbtxt").read_text()
    # A config.pbtxt whose warm-up does not match its inputs: any re-render keeps that error.
    broken = (
        before + 'model_warmup [{ name: "w" batch_size: 1 inputs { key: "x" value { data_type: TYPE_INT32 '
        "dims: [ 4 ] zero_data: true } } }]\n"
    )
    (model / "config.pbtxt").write_text(broken)
    result = runner.invoke(app, ["render", str(model), "--max-queue-delay-us", "100"])
    assert (
        result.exit_code == 1
        and "warmup" in result.stderr
        and "already breaks Triton's rules, so it was not changed" in result.stderr
    )
    assert (model / "config.pbtxt").read_text() == broken and not (model / "config.pbtxt.bak").exists()


FIELD_TEXT = st.sampled_from(
    [
        "name",
        "platform",
        "backend",
        "max_batch_size",
        "input",
        "output",
        "dims",
        "data_type",
        "reshape",
        "dynamic_batching",
        "preferred_batch_size",
        "sequence_batching",
        "instance_group",
        "model_warmup",
        "ensemble_scheduling",
        "step",
        "{",
        "}",
        "[",
        "]",
        ":",
        ",",
        '"x"',
        "-1",
        "0",
        "8",
        "TYPE_FP32",
        "KIND_CPU",
        "\n",
        " ",
        "#",
        "true",
        "1e400",
        "'",
    ]
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.text(max_size=200), st.lists(FIELD_TEXT, max_size=60).map(" ".join)))
def test_lint_never_crashes_on_any_text(text: str) -> None:
    findings = lint_text(text, "m")
    assert all(isinstance(f, Finding) and f.rule != "lint.internal" for f in findings)
    syntax = [f for f in findings if f.rule == "syntax"]
    assert not syntax or len(findings) == 1


def _configs() -> st.SearchStrategy[str]:
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2 as pb

    dims = st.lists(st.integers(-3, 6), max_size=4)
    types = st.sampled_from(list(pb.DataType.values()))
    tensor = st.fixed_dictionaries(
        {
            "name": st.sampled_from(["x", "y", "", "x"]),
            "data_type": types,
            "dims": dims,
            "reshape": st.one_of(st.none(), dims),
        }
    )

    def build(
        mb: int,
        inputs: list,
        outputs: list,
        preferred: list,
        levels: int,
        default: int,
        kind: int,
        gpus: list,
        count: int,
        warm: bool,
        platform: str,
        seq: bool,
    ) -> str:
        message = pb.ModelConfig(name="m", backend="python", max_batch_size=mb, platform=platform)
        for target, items in ((message.input, inputs), (message.output, outputs)):
            for item in items:
                tensor_message = target.add(name=item["name"], data_type=item["data_type"], dims=item["dims"])
                if item["reshape"] is not None:
                    tensor_message.reshape.shape.extend(item["reshape"])
        if seq:
            control = message.sequence_batching.control_input.add(name="S").control.add(kind=kind % 4)
            control.int32_false_true.extend(preferred[:3])
        else:
            message.dynamic_batching.preferred_batch_size.extend(preferred)
            message.dynamic_batching.priority_levels = levels
            message.dynamic_batching.default_priority_level = default
        message.instance_group.add(kind=kind, gpus=gpus, count=count)
        if warm and message.input:
            sample = message.model_warmup.add(name="w", batch_size=1)
            sample.inputs[message.input[0].name].dims.extend(message.input[0].dims)
        return str(text_format.MessageToString(message))

    return st.builds(
        build,
        st.integers(-2, 40),
        st.lists(tensor, max_size=3),
        st.lists(tensor, max_size=2),
        st.lists(st.integers(-2, 50), max_size=4),
        st.integers(0, 4),
        st.integers(0, 5),
        st.integers(0, 3),
        st.lists(st.integers(-2, 3), max_size=2),
        st.integers(-1, 3),
        st.booleans(),
        st.sampled_from(["", "ensemble", "onnxruntime_onnx", "python"]),
        st.booleans(),
    )


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_configs())
def test_lint_never_crashes_on_valid_looking_configs(text: str) -> None:
    findings = lint_text(text, "m")
    assert all(f.rule != "lint.internal" and f.rule != "syntax" for f in findings), [
        f.text() for f in findings
    ]
    assert all(f.message and f.fix for f in findings)
