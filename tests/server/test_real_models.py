"""Models as users bring them, built in code (``support.real_models``), on the real embedded server.

Each goes convert -> served by the shared server -> infer -> a 2 s load test -> compare, with
the options its trait needs and no other; the models that cannot be served as they are, are
refused in one line (exit 1, nothing written).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tritongen.cli.main import app
from tritongen.client.repository import RepositoryControl
from tritongen.server.local import LocalTritonServer

from support.cli_output import error_line
from support.real_models import write_model

pytestmark = pytest.mark.slow
runner = CliRunner()
LOAD = ["--duration", "2s", "--max-duration", "2s", "--warmup", "0.5s", "--concurrency", "1"]
COMPARE = ["--duration", "0.5s", "--warmup", "0.5s", "--window", "0.25s", "--max-duration", "0.5s"]


@dataclass(frozen=True)
class Case:
    """One corpus model: the convert options its trait needs, the shapes a request takes, what to check."""

    model: str
    convert: list[str] = field(default_factory=list)
    formats: str = "onnx"
    shapes: list[str] = field(default_factory=list)
    json_check: str = ""
    """A fragment the convert JSON (dumped) must hold."""
    compared: str = ""
    """The formats compared (default: the last one built; two where the pair is the point)."""

    @property
    def compare_formats(self) -> str:
        return self.compared or self.formats.split(",")[-1]


CASES = [
    Case("detector", shapes=["--shape", "image=3,64,64"], json_check='"chosen_by": "ladder"'),
    Case(
        "vad",
        formats="onnx,tvm",
        compared="onnx,tvm",
        shapes=["--shape", "input=1,512", "--shape", "state=2,1,16"],
        json_check='"input": [\n        1,\n        65',
    ),
    Case("gain"),
    Case("filetype"),
    Case("half", json_check='"atol": 0.01'),
    Case("external"),
    Case("doubled"),
    Case(
        "scale_int",
        ["--input-spec", "x:FP32:-1,16", "--constant", "sr=8000"],
        "onnx,torchscript",
        compared="onnx,torchscript",
    ),
    Case("counter", ["--input-spec", "x:FP32:-1,16"], "onnx,torchscript"),
    Case("gain_ts", ["--input-spec", "x:FP32:-1,16", "--input-spec", "gain:FP32:scalar"], "onnx,torchscript"),
    Case("half_ts", ["--input-spec", "x:FP16:-1,16"], "onnx,torchscript"),
]


def _run(*args: str | Path) -> tuple[int, str, str]:
    result = runner.invoke(app, [str(a) for a in args], env={"COLUMNS": "200"})
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def repository(served_repository: Path, triton_server: LocalTritonServer) -> Iterator[Path]:
    """The shared server's repository; the models a test converts into it are unloaded and removed after."""
    before = {p.name for p in served_repository.iterdir()}
    yield served_repository
    control = RepositoryControl(triton_server.http_url)
    try:
        for path in served_repository.iterdir():
            if path.name not in before:
                if control.index().get(path.name) == "READY":
                    control.unload(path.name)
                shutil.rmtree(path)
    finally:
        control.close()


@pytest.mark.parametrize("case", CASES, ids=[c.model for c in CASES])
def test_a_model_as_users_bring_it_converts_serves_and_is_measured(
    case: Case, repository: Path, triton_server: LocalTritonServer, tmp_path: Path
) -> None:
    source = write_model(case.model, tmp_path / "src")
    name = f"rm_{case.model}"
    converted = tmp_path / "convert.json"
    code, out, err = _run(
        "convert", source, "--name", name, "--repo", repository, "--formats", case.formats, *case.convert,
        "--json", converted,
    )  # fmt: skip
    assert code == 0, out + err
    document = json.loads(converted.read_text())
    assert all(o["status"] == "built" and o["verification"]["passed"] for o in document["outcomes"])
    assert case.json_check in json.dumps(document, indent=2)
    models = [o["model"] for o in document["outcomes"]]
    control = RepositoryControl(triton_server.http_url)
    try:
        for model in models:
            control.load(model)
    finally:
        control.close()
    url = ["--url", triton_server.http_url]
    code, out, err = _run("infer", models[0], *url, *case.shapes)
    assert code == 0, out + err
    result = tmp_path / "load.json"
    code, out, err = _run(
        "loadtest", models[0], *url, "--metrics-url", triton_server.metrics_url, *case.shapes, *LOAD,
        "--json", result,
    )  # fmt: skip
    assert code == 0, out + err
    (run,) = json.loads(result.read_text())["runs"]
    assert run["requests"] > 0 and run["errors"] == 0
    code, out, err = _run(
        "compare", source, "--name", name, *url, "--metrics-url", triton_server.metrics_url,
        "--repo", repository, "--formats", case.compare_formats, *COMPARE, "--concurrency", "1",
        "--rounds", "1", "--out", tmp_path / "cmp", *case.shapes,
    )  # fmt: skip
    assert code == 0, out + err
    engines = json.loads((tmp_path / "cmp" / "compare.json").read_text())["engines"]
    measured = [e for e in engines if e["format"] in case.compare_formats.split(",")]
    assert measured and all(e["status"] == "ok" and e["errors"] == 0 for e in measured), measured


@pytest.mark.parametrize(
    ("model", "options", "words"),
    [
        ("accumulator", ["--input-spec", "x:FP32:-1,16"], "keeps state in self.total between calls"),
        ("scale_int", ["--input-spec", "x:FP32:-1,16"], "forward() takes 'sr: int', a Python value Triton"),
        (
            "detector",
            ["--shape", "image=1,3,8,8"],
            "the source fails at the shapes given (image[1, 3, 8, 8])",
        ),
        ("vad", ["--constant", "state=0"], "--constant state: the input has dynamic dims [2,-1,16]"),
    ],
)
def test_what_cannot_be_served_as_it_is_is_refused_in_one_line(
    model: str, options: list[str], words: str, tmp_path: Path
) -> None:
    source = write_model(model, tmp_path / "src")
    repo = tmp_path / "repo"
    code, out, err = _run("convert", source, "--repo", repo, *options)
    assert code == 1 and words in error_line(err), out + err
    assert not repo.exists() or not any(repo.iterdir())


def test_tvm_refuses_ai_onnx_ml_ops_by_name_and_the_other_engines_build(tmp_path: Path) -> None:
    source = write_model("filetype", tmp_path / "src")
    code, out, err = _run("convert", source, "--repo", tmp_path / "repo", "--formats", "onnx,tvm")
    assert code == 1
    assert "tvm failed: TVM cannot import the ai.onnx.ml ops 'LabelEncoder', 'Scaler'" in err, out + err
    assert (tmp_path / "repo" / "filetype_onnx" / "config.pbtxt").is_file()
    assert not (tmp_path / "repo" / "filetype_tvm").exists()
    assert "BlockBuilder" not in out + err and "[E:onnxruntime" not in out + err  # engines' logs elsewhere
