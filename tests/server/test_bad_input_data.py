"""Bad input data for a served model: wrong dtype, shape or name, one line from loadtest and infer."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from typer.testing import CliRunner

from tritongen.cli.main import app
from tritongen.server.local import LocalTritonServer

from support.paths import ROOT

runner = CliRunner()


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


def _one_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, f"expected one line, got {stderr!r}"
    assert lines[0].startswith("error: ")
    return lines[0]


def test_input_data_of_the_wrong_dtype_or_shape(triton_server: LocalTritonServer, tmp_path: Path) -> None:
    url = ["--url", triton_server.http_url]
    arrays = {
        "dtype": (np.zeros((4, 16), np.int64), "holds int64, input 'input' takes float32"),
        "shape": (np.zeros((4, 7), np.float32), "has shape [4, 7], input 'input' takes [batch, 16]"),
        "name": (np.zeros((4, 16), np.float32), "no array for input(s) input"),
    }
    for what, (array, message) in arrays.items():
        npz, npy = tmp_path / f"{what}.npz", tmp_path / f"{what}.npy"
        np.savez(npz, **{"nope" if what == "name" else "input": array})
        np.save(npy, array)
        result_json = tmp_path / f"{what}.json"
        result = runner.invoke(
            app,
            [
                "loadtest",
                "mlp_onnx",
                *url,
                "--input-data",
                str(npz),
                "--duration",
                "1s",
                "--json",
                str(result_json),
            ],
        )
        assert result.exit_code == 1 and message in _one_line(result.stderr)
        assert not result_json.exists()
        if what != "name":
            result = runner.invoke(app, ["infer", "mlp_onnx", *url, "--input", f"input={npy}"])
            assert result.exit_code == 1 and message in _one_line(result.stderr)
    pickled = tmp_path / "object.npy"
    np.save(pickled, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    result = runner.invoke(app, ["infer", "mlp_onnx", *url, "--input", f"input={pickled}"])
    assert result.exit_code == 1 and "allow_pickle=False" in _one_line(result.stderr)
