"""The null kind against the real server: requests it answers at once, the load generator's own floor."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tritongen.cli.main import app
from tritongen.client.endpoint import TritonEndpoint
from tritongen.server.local import LocalTritonServer

runner = CliRunner()
SHORT = ["--duration", "2s", "--warmup", "1s", "--window", "1s", "--max-duration", "4s"]


def _loadtest(server: LocalTritonServer, *args: str) -> tuple[int, str]:
    result = runner.invoke(
        app, ["loadtest", *args, "--url", server.http_url, "--metrics-url", server.metrics_url]
    )
    return result.exit_code, result.stderr


def _inferences(server: LocalTritonServer, model: str) -> int:
    endpoint = TritonEndpoint(server.http_url)
    try:
        return int(endpoint.statistics(model).get("inference_count", 0))
    finally:
        endpoint.close()


@pytest.mark.parametrize("load", [["--concurrency", "1,4"], ["--rate", "300", "--processes", "1"]])
def test_the_null_kind_measures_requests_the_server_answers_without_the_model(
    triton_server: LocalTritonServer, tmp_path: Path, load: list[str]
) -> None:
    before = _inferences(triton_server, "mlp_onnx")
    out = tmp_path / "null.json"
    code, stderr = _loadtest(
        triton_server, "mlp_onnx", "--load-kind", "null", *load, *SHORT, "--json", str(out)
    )
    assert code == 0, stderr
    runs = json.loads(out.read_text())["runs"]
    assert len(runs) == len(load[1].split(","))
    for run in runs:
        assert run["status"] == "ok" and run["errors"] == 0 and run["batch_size"] == 1
        assert run["requests"] > 50 and run["latency_us"]["p50"] > 0
        assert not any((run["server_us"] or {}).values())  # the server ran nothing for them
    assert _inferences(triton_server, "mlp_onnx") == before


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--concurrency", "1", "--batch-size", "4"],
            "--load-kind null sends no data: --batch-size would change nothing",
        ),
        (["--concurrency", "1", "--protocol", "grpc"], "--load-kind null goes over HTTP"),
        (["--sequences", "2"], "--load-kind null does not go with --sequences"),
        (
            ["--concurrency", "1", "--shared-memory", "system"],
            "--load-kind null does not go with --shared-memory system",
        ),
    ],
)
def test_what_the_null_kind_cannot_send_is_refused_in_one_line(
    triton_server: LocalTritonServer, args: list[str], message: str
) -> None:
    code, stderr = _loadtest(triton_server, "mlp_onnx", "--load-kind", "null", *args)
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert code == 1 and len(lines) == 1 and message in lines[0], stderr


def test_a_model_the_server_does_not_have_is_refused(triton_server: LocalTritonServer) -> None:
    code, stderr = _loadtest(triton_server, "nope", "--load-kind", "null", "--concurrency", "1")
    assert code == 1 and "model 'nope' is not ready" in stderr


def test_calibrate_measures_the_client_floor_at_each_level_and_reads_the_run_against_it(
    triton_server: LocalTritonServer, tmp_path: Path
) -> None:
    out = tmp_path / "calibrated.json"
    result = runner.invoke(
        app,
        ["loadtest", "mlp_onnx", "--concurrency", "1,4", *SHORT, "--calibrate", "--json", str(out),
         "--url", triton_server.http_url, "--metrics-url", triton_server.metrics_url],
        env={"COLUMNS": "200"},
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    document = json.loads(out.read_text())
    floor = document["client_floor"]
    assert floor["kind"] == "null" and floor["mode"] == "concurrency"
    assert [level["level"] for level in floor["levels"]] == [1.0, 4.0]
    for level in floor["levels"]:
        assert 0 < level["p50_us"] <= level["p99_us"] and level["qps"] > 0
    assert len(document["runs"]) == 2  # the floor's runs are not the test's
    lines = [line for line in result.stdout.splitlines() if "client floor" in line]
    assert [line.split()[0] for line in lines] == ["c=1", "c=4"]
    assert all("the run's P50 is" in line for line in lines)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["mlp_onnx", "--protocol", "grpc"], "--calibrate does not apply with --protocol grpc"),
        (["mlp_onnx,mlp_torchscript", "--mix", "1:1"], "--calibrate measures one model's load"),
    ],
)
def test_a_load_the_floor_cannot_stand_for_is_refused_before_anything_runs(
    triton_server: LocalTritonServer, args: list[str], message: str
) -> None:
    code, stderr = _loadtest(triton_server, *args, "--concurrency", "2", *SHORT, "--calibrate")
    assert code != 0 and message in stderr
