"""Responses checked against ``validation_data`` on the real server: HTTP, gRPC, batches, sequences."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from tritongen.cli.main import app
from tritongen.client.endpoint import TritonEndpoint
from tritongen.server.local import LocalTritonServer

from support.cli_output import error_line
from support.sequence_model import SEQUENCE_MODEL
from support.shm_model import SHM_MODEL
from support.streaming_model import STREAMING_MODEL

runner = CliRunner()
QUICK = ["--duration", "1s", "--warmup", "0.5s", "--window", "0.5s", "--max-duration", "1s"]
MODEL = "mlp_onnx"
ENTRIES = 5
WRONG = 2
"""The entry whose expected output is made wrong (element 1)."""


def _loadtest(server: LocalTritonServer, protocol: str, *args: str | Path) -> tuple[int, str, str]:
    url = server.http_url if protocol == "http" else server.grpc_url
    result = runner.invoke(
        app,
        [
            "loadtest",
            *map(str, args),
            "--url",
            url,
            "--protocol",
            protocol,
            "--metrics-url",
            server.metrics_url,
        ],
    )
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(scope="module")
def mlp_data(triton_server: LocalTritonServer, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Entries of the MLP with its own outputs as expected values, as a document (nothing written)."""
    rng = np.random.default_rng(7)
    endpoint = TritonEndpoint(triton_server.http_url, "http", timeout_s=10)
    data, expected = [], []
    try:
        for _ in range(ENTRIES):
            x = rng.standard_normal((1, 16)).astype(np.float32)
            outputs = endpoint.infer(MODEL, {"input": x}, ("logits",)).outputs
            data.append({"input": x[0].tolist()})
            expected.append({"logits": np.asarray(outputs["logits"])[0].tolist()})
    finally:
        endpoint.close()
    return {"data": data, "validation_data": expected}


def _write(tmp_path: Path, document: dict[str, Any], name: str = "data.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(document))
    return path


def _error(stderr: str) -> str:
    """The one ``error:`` line (warnings about the run may come before it)."""
    (line,) = [line for line in stderr.splitlines() if line.startswith("error: ")]
    return line


def _wrong(document: dict[str, Any]) -> dict[str, Any]:
    wrong = json.loads(json.dumps(document))
    wrong["validation_data"][WRONG]["logits"][1] += 0.5
    return wrong


@pytest.mark.parametrize(
    ("protocol", "load"),
    [("http", ["--concurrency", "2"]), ("grpc", ["--concurrency", "2", "--batch-size", "2"])],
)
def test_right_outputs_are_checked_and_said_to_match(
    triton_server: LocalTritonServer, tmp_path: Path, mlp_data: dict[str, Any], protocol: str, load: list[str]
) -> None:
    data = _write(tmp_path, mlp_data)
    out, table = tmp_path / "run.json", tmp_path / "run.csv"
    code, stdout, stderr = _loadtest(
        triton_server, protocol, MODEL, *load, "--input-data", data, *QUICK, "--json", out, "--csv", table
    )
    assert code == 0, stderr + stdout
    (run,) = json.loads(out.read_text())["runs"]
    validation = run["validation"]
    # Warm-up included: every response of the run was checked, more than the measured ones.
    assert validation["validated"] >= run["requests"] > 0 and validation["mismatched"] == 0
    assert validation["outputs"] == {"logits": {"mismatched": 0, "first": None}}
    assert f"validated {validation['validated']:,} responses: all match" in stdout
    (row,) = csv.DictReader(table.open())
    assert int(row["validated"]) == validation["validated"] and row["mismatched"] == "0"


@pytest.mark.parametrize(
    ("protocol", "load"),
    [
        ("http", ["--concurrency", "2"]),  # the closed-loop HTTP engine
        ("http", ["--rate", "200"]),  # the open loop's plain HTTP transport
        ("grpc", ["--concurrency", "2", "--batch-size", "2"]),  # stacked rows, each checked
    ],
)
def test_wrong_outputs_fail_the_run_and_name_the_first_mismatch(
    triton_server: LocalTritonServer, tmp_path: Path, mlp_data: dict[str, Any], protocol: str, load: list[str]
) -> None:
    data = _write(tmp_path, _wrong(mlp_data))
    out, table, page = tmp_path / "run.json", tmp_path / "run.csv", tmp_path / "run.html"
    code, stdout, stderr = _loadtest(
        triton_server, protocol, MODEL, *load, "--input-data", data, *QUICK,
        "--json", out, "--csv", table, "--html", page,
    )  # fmt: skip
    assert code == 1, stderr + stdout
    assert "responses did not match the expected outputs" in _error(stderr)
    (run,) = json.loads(out.read_text())["runs"]
    validation = run["validation"]
    wrong = validation["outputs"]["logits"]
    assert validation["mismatched"] == wrong["mismatched"] > 0  # one output, wrong in one entry
    assert validation["mismatched"] < validation["validated"]
    first = wrong["first"]
    assert (first["entry"], first["element"]) == (f"data[{WRONG}]", 1)
    expected_value = mlp_data["validation_data"][WRONG]["logits"][1] + 0.5
    assert float(first["expected"]) == pytest.approx(expected_value, rel=1e-6)
    assert float(first["received"]) == pytest.approx(expected_value - 0.5, rel=1e-5, abs=1e-6)
    assert f"first at data[{WRONG}], element 1" in stdout
    (row,) = csv.DictReader(table.open())
    assert int(row["mismatched"]) == validation["mismatched"] and f"data[{WRONG}]" in row["first_mismatch"]
    assert f"first at data[{WRONG}], element 1" in page.read_text()


def test_a_loose_tolerance_lets_a_small_difference_pass(
    triton_server: LocalTritonServer, tmp_path: Path, mlp_data: dict[str, Any]
) -> None:
    data = _write(tmp_path, _wrong(mlp_data))
    out = tmp_path / "run.json"
    code, stdout, stderr = _loadtest(
        triton_server, "http", MODEL, "--concurrency", "1", "--input-data", data, *QUICK,
        "--atol", "0.6", "--json", out,
    )  # fmt: skip
    assert code == 0, stderr + stdout
    assert json.loads(out.read_text())["runs"][0]["validation"]["mismatched"] == 0


def _sums(stream: list[float]) -> list[dict[str, list[float]]]:
    return [{"sum": [float(sum(stream[: i + 1]))]} for i in range(len(stream))]


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_sequences_are_checked_step_by_step(
    triton_server: LocalTritonServer, tmp_path: Path, protocol: str
) -> None:
    streams = [[1.0, 2.0], [10.0, 20.0, 30.0]]
    document: dict[str, Any] = {
        "data": [[{"x": [v]} for v in stream] for stream in streams],
        "validation_data": [_sums(stream) for stream in streams],  # the model's running sum
    }
    out = tmp_path / "run.json"
    args = [
        SEQUENCE_MODEL,
        "--sequences",
        "2",
        "--input-data",
        _write(tmp_path, document),
        *QUICK,
        "--json",
        out,
    ]
    code, stdout, stderr = _loadtest(triton_server, protocol, *args)
    assert code == 0, stderr + stdout
    validation = json.loads(out.read_text())["runs"][0]["validation"]
    assert validation["validated"] > 0 and validation["mismatched"] == 0
    document["validation_data"][1][2]["sum"] = [59.0]  # the third step of the second stream
    code, stdout, stderr = _loadtest(
        triton_server, protocol, *args[:4], _write(tmp_path, document), *args[5:]
    )
    assert code == 1, stderr + stdout
    first = json.loads(out.read_text())["runs"][0]["validation"]["outputs"]["sum"]["first"]
    assert (first["entry"], first["expected"], first["received"]) == ("data[1][2]", "59", "60")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d["validation_data"].pop(), '"validation_data" has 4 entries, "data" 5'),
        (lambda d: d["validation_data"][3].update(nope=[1]), "validation_data[3] gives output 'nope'"),
        (
            lambda d: d["validation_data"][1]["logits"].append(1.0),
            "validation_data[1] output 'logits' has 5 values",
        ),
    ],
)
def test_validation_data_that_does_not_fit_is_refused_before_any_load(
    triton_server: LocalTritonServer, tmp_path: Path, mlp_data: dict[str, Any], change: Any, message: str
) -> None:
    document = json.loads(json.dumps(mlp_data))
    change(document)
    out = tmp_path / "run.json"
    code, _, stderr = _loadtest(
        triton_server, "http", MODEL, "--input-data", _write(tmp_path, document), *QUICK, "--json", out
    )
    assert code != 0 and message in error_line(stderr)
    assert not out.exists()  # nothing was sent, nothing written


def test_responses_that_cannot_be_checked_are_refused(
    triton_server: LocalTritonServer, tmp_path: Path
) -> None:
    shm = {"data": [{"x": [1.0] * 16, "n": [1]}], "validation_data": [{"y": [1.0] * 16}]}
    code, _, stderr = _loadtest(
        triton_server,
        "http",
        SHM_MODEL,
        "--shared-memory",
        "system",
        "--input-data",
        _write(tmp_path, shm),
        *QUICK,
    )
    assert code != 0 and "with --shared-memory system the outputs land in shared memory" in error_line(stderr)
    streamed = {"data": [{"plan": [1, 0, 0, 0]}], "validation_data": [{"index": [0]}]}
    code, _, stderr = _loadtest(
        triton_server, "grpc", STREAMING_MODEL, "--input-data", _write(tmp_path, streamed, "s.json"), *QUICK
    )
    assert code != 0 and f"'{STREAMING_MODEL}' is decoupled (streaming)" in error_line(stderr)
