"""Bad input, tried through the CLI: one line, a non-zero exit, nothing half-written.

Every case here is a row of the error table in docs/errors.md (the test checks that too), so
the table lists what is tried, not what is hoped.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from typer.testing import CliRunner

from tritongen.cli.main import app

from support.cli_output import error_line
from support.paths import ROOT

runner = CliRunner()


@dataclass(frozen=True)
class Case:
    row: str
    """The row of docs/errors.md's error table (its first cell) this case backs."""
    args: tuple[str, ...]
    """The command line: ``@name`` is a bad file, ``OUT`` the output directory, ``REPO`` the examples."""
    message: str
    """Part of the one error line."""

    def argv(self, files: dict[str, Path], out: Path) -> list[str]:
        def one(arg: str) -> str:
            if arg.startswith("@"):
                return str(files[arg[1:]])
            return arg.replace("OUT", str(out)).replace("REPO", str(ROOT / "model_repository"))

        return [one(arg) for arg in self.args]


def _identity_model(op: str, domain: str = "") -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])
    graph = helper.make_graph([helper.make_node(op, ["x"], ["y"], domain=domain)], "g", [x], [y])
    opsets = [helper.make_opsetid("", 17)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    return helper.make_model(graph, opset_imports=opsets)


@pytest.fixture(scope="module")
def bad(example_models: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The bad files, next to a good ONNX model."""
    root = tmp_path_factory.mktemp("bad")
    good = example_models["mlp"].read_bytes()
    files = {"mlp": example_models["mlp"]}
    for name, data in {
        "garbage.onnx": b"\x08\x07 not onnx at all " * 40,
        "truncated.onnx": good[: len(good) // 3],
        "empty.onnx": b"",
        "fake.pt": b"PK\x03\x04 this is not a TorchScript archive",
    }.items():
        (root / name).write_bytes(data)
        files[name] = root / name
    onnx.save(_identity_model("NoSuchOp"), root / "unknown_op.onnx")
    onnx.save(_identity_model("FancyOp", "com.example"), root / "custom_op.onnx")
    np.savez(root / "short.npz", input=np.zeros((4, 7), np.float32))
    templates = {
        "undefined": "name: {{ config.name | q }}\nmax_batch_size: {{ not_a_variable }}\n",
        "syntax": "name: {{ config.name | q }}\n{% if config.name %}\nno endif\n",
    }
    for name, text in templates.items():
        (root / name).mkdir()
        (root / name / "config.pbtxt.j2").write_text(text)
    for name in ("unknown_op.onnx", "custom_op.onnx", "short.npz", "undefined", "syntax"):
        files[name] = root / name
    # A Python model without model.py: Triton 2.51 never finishes loading it.
    hang = root / "hang_repo"
    shutil.copytree(ROOT / "model_repository" / "mlp_onnx", hang / "mlp_onnx")
    (hang / "mlp_onnx" / "1" / "model.py").unlink()
    files["hang_repo"] = hang
    return files


ONNX = "corrupt / truncated / empty ONNX"


SPEC = "malformed `--input-spec`"


NAME = "name with `..`, `/`, an absolute path or shell characters"


PREFERRED = "preferred batch > max batch"


NEGATIVE = "negative delay or duration"


TEMPLATE = "user template with an undefined variable or a syntax error"


MISSING = "path that does not exist"


CONVERT = ("convert", "@mlp", "--repo", "OUT")


CASES = [
    Case(ONNX, ("convert", "@garbage.onnx", "--repo", "OUT"), "is not a readable ONNX model"),
    Case(ONNX, ("convert", "@truncated.onnx", "--repo", "OUT"), "truncated.onnx"),
    Case(ONNX, ("convert", "@empty.onnx", "--repo", "OUT"), "empty.onnx"),
    Case("ONNX with an operator that does not exist", ("convert", "@unknown_op.onnx", "--repo", "OUT"),
         "No Op registered for NoSuchOp"),
    Case("ONNX with custom-domain operators", ("convert", "@custom_op.onnx", "--repo", "OUT"),
         "com.example::FancyOp"),
    Case("TorchScript file that is not TorchScript",
         ("convert", "@fake.pt", "--repo", "OUT", "--input-spec", "x:FP32:-1,4"),
         "is not a loadable TorchScript file"),
    Case(SPEC, (*CONVERT, "--input-spec", "input:FP32"), "is not NAME:DTYPE:DIMS"),
    Case(SPEC, (*CONVERT, "--input-spec", "input:FP99:-1,16"), "unknown data type 'FP99'"),
    Case(SPEC, (*CONVERT, "--input-spec", "input:FP32:-1,x"), "dim 'x'"),
    Case("`--input-spec` the model contradicts", (*CONVERT, "--input-spec", "input:FP32:-1,8"),
         "contradicts"),
    Case(NAME, (*CONVERT, "--name", "../evil"), "path separator"),
    Case(NAME, (*CONVERT, "--name", "/etc/x"), "path separator"),
    Case(NAME, (*CONVERT, "--name", "a;rm -rf ~"), "contains"),
    Case(NAME, (*CONVERT, "--name", "$(id)"), "contains '$'"),
    Case(NAME, (*CONVERT, "--name", "a`b`"), "contains '`'"),
    Case(PREFERRED, (*CONVERT, "--max-batch-size", "8", "--preferred-batch-sizes", "4,16"),
         "exceed --max-batch-size 8"),
    Case(PREFERRED, ("tune", "mlp_onnx", "--repo", "REPO", "--max-batch-size", "32",
                     "--preferred-batch-sizes", "64", "--out", "OUT"), "exceed max_batch_size 32"),
    Case(NEGATIVE, (*CONVERT, "--max-queue-delay-us", "-1"), "negative"),
    Case(NEGATIVE, ("tune", "mlp_onnx", "--repo", "REPO", "--max-queue-delay-us", "0,-100", "--out", "OUT"),
         "below 0"),
    Case(NEGATIVE, ("loadtest", "mlp_onnx", "--duration", "-3s", "--json", "OUT/x.json"),
         "is not a duration"),
    Case(TEMPLATE, (*CONVERT, "--templates", "@undefined"), "config.pbtxt.j2:2"),
    Case(TEMPLATE, (*CONVERT, "--templates", "@syntax"), "config.pbtxt.j2:"),
    Case("verification data of the wrong shape", (*CONVERT, "--verify-data", "@short.npz"),
         "has shape [4, 7], the model wants [batch,16]"),
    Case("static INT8 without calibration data", (*CONVERT, "--precision", "int8"),
         "needs representative calibration data"),
    Case("calibration data that does not fit the model",
         (*CONVERT, "--precision", "int8", "--calibration-data", "@short.npz"),
         "has shape [4, 7], the model wants [batch,16]"),
    Case("`--keep-fp32` that matches no node", (*CONVERT, "--precision", "fp16", "--keep-fp32", "attention*"),
         "matches no node"),
    Case(MISSING, ("serve", "OUT/missing"), "does not exist"),
    Case(MISSING, ("compare", "OUT/missing.onnx", "--out", "OUT"), "does not exist"),
    Case(MISSING, ("report", "OUT/missing.json", "-o", "OUT/r.html"), "does not exist"),
    Case(MISSING, ("tune", "m", "--repo", "OUT/missing", "--out", "OUT"), "does not exist"),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=lambda c: re.sub(r"\W+", "-", c.message)[:40])
def test_bad_input_is_one_line_and_writes_nothing(bad: dict[str, Path], tmp_path: Path, case: Case) -> None:
    out = tmp_path / "out"
    result = runner.invoke(app, case.argv(bad, out))
    assert result.exit_code == 1, result.stdout + result.stderr
    assert case.message in error_line(result.stderr)
    assert not out.exists() or list(out.iterdir()) == [], "something was written"


@pytest.mark.parametrize(
    "command",
    [
        ("loadtest", "mlp_onnx", "--serve", "@hang_repo", "--json", "OUT/x.json"),
        ("tune", "mlp_onnx", "--repo", "@hang_repo", "--out", "OUT"),
        ("infer", "mlp_onnx", "--serve", "@hang_repo"),
        ("serve", "@hang_repo"),
    ],
    ids=lambda c: c[0],
)
def test_a_config_that_would_hang_the_server_is_refused_before_starting_it(
    bad: dict[str, Path], tmp_path: Path, command: tuple[str, ...]
) -> None:
    out = tmp_path / "out"
    result = runner.invoke(app, Case("", command, "").argv(bad, out))
    assert result.exit_code == 1
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines[-1].startswith("error: 1 config error(s)") and "Triton would refuse" in lines[-1]
    assert any("model.py" in line for line in lines[:-1]), "the finding says what is missing"
    assert not out.exists()


def test_torchscript_rejecting_the_input_spec(bad: dict[str, Path], tmp_path: Path) -> None:
    torch = pytest.importorskip("torch", reason="the torch extra is not installed")
    module = torch.nn.Sequential(torch.nn.Linear(4, 3)).eval()
    source = tmp_path / "linear.pt"
    torch.jit.trace(module, torch.zeros(1, 4)).save(str(source))
    out = tmp_path / "out"
    for spec, message in (
        ("x:FP32:-1,5", "mat1 and mat2 shapes cannot be multiplied"),
        ("x:INT64:-1,4", "must have the same dtype"),
    ):
        result = runner.invoke(app, ["convert", str(source), "--repo", str(out), "--input-spec", spec])
        assert result.exit_code == 1
        line = error_line(result.stderr)
        assert "rejects inputs shaped as --input-spec says" in line and message in line
        assert not out.exists()


def test_the_error_table_lists_every_case() -> None:
    page = (ROOT / "docs" / "errors.md").read_text(encoding="utf-8")
    missing = sorted({case.row for case in CASES} - set(re.findall(r"^\| (.+?) \|", page, re.M)))
    assert not missing, f"the error table of docs/errors.md lacks rows: {missing}"
