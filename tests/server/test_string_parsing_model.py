"""Triton's documented ``simple_string`` model as ONNX: strings in, cast to integers, strings out.

Its Cast cannot parse random strings: tritongen sees the Cast and verifies on numeric strings;
the user's data (perf_analyzer's JSON of numeric strings) verifies it too, and drives the load
test against the real server.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from tritongen.server.local import LocalTritonServer

pytestmark = pytest.mark.slow


def _simple_string(path: Path) -> Path:
    """OUTPUT0 = INPUT0 + INPUT1 and OUTPUT1 = INPUT0 - INPUT1, all [batch, 16] strings of integers."""

    def tensor(name: str) -> onnx.ValueInfoProto:
        return helper.make_tensor_value_info(name, TensorProto.STRING, ["batch", 16])

    nodes = [
        helper.make_node("Cast", ["INPUT0"], ["a"], to=TensorProto.INT32),
        helper.make_node("Cast", ["INPUT1"], ["b"], to=TensorProto.INT32),
        helper.make_node("Add", ["a", "b"], ["sum"]),
        helper.make_node("Sub", ["a", "b"], ["difference"]),
        helper.make_node("Cast", ["sum"], ["OUTPUT0"], to=TensorProto.STRING),
        helper.make_node("Cast", ["difference"], ["OUTPUT1"], to=TensorProto.STRING),
    ]
    graph = helper.make_graph(
        nodes, "simple_string", [tensor("INPUT0"), tensor("INPUT1")], [tensor("OUTPUT0"), tensor("OUTPUT1")]
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, path)
    return path


def _tritongen(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tritongen", *map(str, args)], capture_output=True, text=True, timeout=300
    )


def test_a_model_that_parses_strings_converts_with_json_data_and_serves(tmp_path: Path) -> None:
    source = _simple_string(tmp_path / "simple_string.onnx")
    repo = tmp_path / "repo"
    plain = _tritongen("convert", source, "--formats", "onnx", "--repo", repo, "--json", tmp_path / "c.json")
    assert plain.returncode == 0, plain.stderr + plain.stdout
    assert "INPUT0, INPUT1 as numeric strings (the graph casts them to numbers)" in plain.stdout
    shapes = json.loads((tmp_path / "c.json").read_text())["verified_shapes"]
    assert shapes["inputs"] == {"INPUT0": [1, 16], "INPUT1": [1, 16]} and shapes["chosen_by"] == "clues"

    data = tmp_path / "data.json"
    entries = [{"INPUT0": [str(i + k) for k in range(16)], "INPUT1": [str(2 * k) for k in range(16)]}
               for i in range(5)]  # fmt: skip
    data.write_text(json.dumps({"data": entries}))
    built = _tritongen(
        "convert", source, "--formats", "onnx", "--repo", repo, "--verify-data", data, "--force"
    )
    assert built.returncode == 0, built.stderr + built.stdout
    metadata = json.loads((repo / "simple_string_onnx" / "tritongen.json").read_text())
    assert metadata["verification"]["passed"] is True and metadata["verification"]["samples"] == 5 + 12

    validated = tmp_path / "validated.json"
    expected = [
        {"OUTPUT0": [str(int(a) + int(b)) for a, b in zip(e["INPUT0"], e["INPUT1"], strict=True)],
         "OUTPUT1": [str(int(a) - int(b)) for a, b in zip(e["INPUT0"], e["INPUT1"], strict=True)]}
        for e in entries
    ]  # fmt: skip
    validated.write_text(json.dumps({"data": entries, "validation_data": expected}))
    with LocalTritonServer(repo, http_port=0, grpc_port=0, metrics_port=0) as server:
        out = tmp_path / "run.json"
        run = _tritongen(
            "loadtest", "simple_string_onnx", "--url", server.http_url, "--metrics-url", server.metrics_url,
            "--input-data", validated, "--concurrency", "2", "--duration", "1s", "--warmup", "0.5s",
            "--window", "0.5s", "--max-duration", "1s", "--json", out,
        )  # fmt: skip
        assert run.returncode == 0, run.stderr
        (result,) = json.loads(out.read_text())["runs"]
        assert result["errors"] == 0 and result["requests"] > 0
        checked = result["validation"]  # every response's strings, as perf_analyzer checks them
        assert checked["validated"] >= result["requests"] and checked["mismatched"] == 0
        assert f"validated {checked['validated']:,} responses: all match" in run.stdout
        answered = _tritongen("infer", "simple_string_onnx", "--url", server.http_url, "--input-data", data,
                              "--step", "3")  # fmt: skip
        assert answered.returncode == 0, answered.stderr
        assert "[b'3', b'6', b'9'," in answered.stdout  # 3 + 0, 4 + 2, 5 + 4: the model parsed them
