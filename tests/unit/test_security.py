"""Safe defaults: no code made from user strings, no unsafe deserialisation, no open doors."""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

import onnx
from onnx import TensorProto, helper
from typer.testing import CliRunner

from tritongen.cli.main import app
from tritongen.triton.proto import read_config

from support.paths import ROOT

runner = CliRunner()

FORBIDDEN = {
    r"(?<![.\w])eval\(": "eval",
    r"(?<![.\w])exec\(": "exec",
    r"\bimport pickle\b|\bpickle\.loads?\(|\bcloudpickle\b|\bdill\b": "pickle",
    r"allow_pickle\s*=\s*True": "numpy pickles",
    r"shell\s*=\s*True|os\.system\(|os\.popen\(": "a shell",
    r"yaml\.load\(|yaml\.unsafe_load": "unsafe YAML",
    r"torch\.load\(": "torch.load (pickle)",
    r"\bmarshal\.loads?\(": "marshal",
}
"""What tritongen's own code must never do with data it is given."""


def _python_files() -> list[Path]:
    files = [*ROOT.joinpath("tritongen").rglob("*.py"), *ROOT.joinpath("bench").rglob("*.py")]
    return [*files, *ROOT.joinpath("loadtests").rglob("*.py")]


def test_no_eval_exec_pickle_or_shell_in_the_code() -> None:
    found = []
    for path in _python_files():
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            code = line.split("#", 1)[0]
            for pattern, what in FORBIDDEN.items():
                if re.search(pattern, code):
                    found.append(f"{path.relative_to(ROOT)}:{number}: {what}: {line.strip()}")
    assert found == []


def test_the_scan_would_see_a_forbidden_call(tmp_path: Path) -> None:
    lines = ["x = eval(text)", "exec(code)", "import pickle", "np.load(p, allow_pickle=True)",
             "subprocess.run(cmd, shell=True)", "yaml.load(f)", "torch.load(f)"]  # fmt: skip
    for line in lines:
        assert any(re.search(pattern, line) for pattern in FORBIDDEN), line
    assert not any(re.search(p, "model.eval()  # torch") for p in FORBIDDEN)
    assert not any(re.search(p, "session.exec_module(x)") for p in FORBIDDEN)


def _hostile_model(path: Path) -> tuple[str, str]:
    """An ONNX model whose tensor names try to break out of config.pbtxt and a shell."""
    inp, out = 'x" }\ninput { name: "injected', "y$(touch pwned);`id`"
    x = helper.make_tensor_value_info(inp, TensorProto.FLOAT, ["N", 4])
    y = helper.make_tensor_value_info(out, TensorProto.FLOAT, ["N", 4])
    graph = helper.make_graph([helper.make_node("Relu", [inp], [out])], "g", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8  # what the bundled ONNX Runtime reads
    onnx.save(model, path)
    return inp, out


def test_hostile_tensor_names_stay_data(tmp_path: Path) -> None:
    """Names reach config.pbtxt quoted and the generated Python only through the config JSON."""
    source = tmp_path / "hostile.onnx"
    inp, out = _hostile_model(source)
    repo = tmp_path / "repo"
    result = runner.invoke(app, ["convert", str(source), "--repo", str(repo), "--name", "hostile"])
    assert result.exit_code == 0, result.stderr
    config = read_config(repo / "hostile_onnx" / "config.pbtxt")
    assert [t.name for t in config.input] == [inp] and [t.name for t in config.output] == [out]
    version = repo / "hostile_onnx" / "1"
    wrappers = resources.files("tritongen.convert.wrappers")
    assert (version / "model.py").read_text() == wrappers.joinpath("onnxruntime_model.py").read_text()
    assert (version / "tritongen_runtime.py").read_text() == wrappers.joinpath(
        "tritongen_runtime.py"
    ).read_text()
    assert not (tmp_path / "pwned").exists() and not Path("pwned").exists()


def test_the_runtime_reads_names_from_the_config_json() -> None:
    """The one way names reach the served Python: Triton's config, parsed as JSON at load time."""
    text = resources.files("tritongen.convert.wrappers").joinpath("tritongen_runtime.py").read_text()
    assert 'json.loads(args["model_config"])' in text
