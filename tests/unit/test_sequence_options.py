"""Sequence (stateful) models: requests carry a correlation ID and start/end flags, figures per sequence.

The served ``accumulate_sequence`` model (tests/sequence_model.py) keeps a running sum per
correlation ID and records every sequence that ends: its ID, the sum and count of the
values it received, and their position-weighted sum (which tells their order). The input
data is a perf_analyzer JSON file whose step ``i`` sends the value ``i`` (1, 2, 3, 4), so
every finished sequence must have received exactly its own steps, in order.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import pytest
from typer.testing import CliRunner

from tritongen.cli.main import app
from tritongen.client.address import ServerAddress
from tritongen.client.endpoint import TritonEndpoint
from tritongen.client.inputs import InputSpec, ModelInterface
from tritongen.errors import ConfigError
from tritongen.loadtest.kinds.base import Requests
from tritongen.loadtest.prepared import prepare_requests
from tritongen.loadtest.result import LoadTestReport
from tritongen.loadtest.sequences import (
    DEFAULT_SEQUENCE_LENGTH,
    check_id_range,
    check_sequence_model,
    check_sequence_settings,
    ids_needed,
    parse_id_range,
    sequence_figures,
    sequence_length,
)
from tritongen.loadtest.spec import LoadSpec
from tritongen.report.kind_tables import sequence_table

runner = CliRunner()


STEPS = [1.0, 2.0, 3.0, 4.0]


@pytest.fixture
def steps_file(tmp_path: Path) -> Path:
    path = tmp_path / "steps.json"
    path.write_text(json.dumps({"data": [{"x": [value]} for value in STEPS]}))
    return path


@pytest.mark.parametrize(
    "args",
    [
        ["--sequences", "2", "--concurrency", "2"],
        ["--sequences", "2", "--rate", "50"],
        ["--sequence-length", "3"],
        ["--sequences", "2", "--sequence-length", "0"],
        ["--sequences", "2", "--sequence-id-range", "0:10"],
        ["--sequences", "2", "--sequence-id-range", "10:5"],
    ],
)
def test_contradictory_sequence_options_are_refused_before_any_load(args: list[str]) -> None:
    # A port nothing listens on: the refusal comes before the server is asked anything.
    result = runner.invoke(app, ["loadtest", "m", *args, "--url", "127.0.0.1:9"])
    assert result.exit_code != 0
    message = (result.stderr or result.stdout).strip()
    assert len(message.splitlines()) == 1 and "cannot reach" not in message


def test_id_ranges() -> None:
    assert parse_id_range("1000:2000") == (1000, 2000)
    assert parse_id_range("7") == (7, 2**63)
    for bad in ("0:5", "5:5", "a:b", "1:" + str(2**63 + 1), ""):
        with pytest.raises(ConfigError):
            parse_id_range(bad)
    # Each process takes an equal slice; Locust spreads users evenly over the processes.
    assert ids_needed(4, 1) == 4 and ids_needed(5, 2) == 6 and ids_needed(3, 3) == 3
    check_id_range((1, 7), 5, 2)
    with pytest.raises(ConfigError, match="need 6"):
        check_id_range((1, 6), 5, 2)
    check_id_range(None, 1000, 4)


def test_the_scheduler_decides_the_load() -> None:
    sequence_config: dict[str, Any] = {"sequence_batching": {"max_sequence_idle_microseconds": 5000000}}
    check_sequence_model("acc", sequence_config, sequences=True)
    check_sequence_model("plain", {"dynamic_batching": {}}, sequences=False)
    with pytest.raises(ConfigError, match="--sequences N"):
        check_sequence_model("acc", sequence_config, sequences=False)
    with pytest.raises(ConfigError, match="no sequence_batching"):
        check_sequence_model("plain", {}, sequences=True)
    with pytest.raises(ConfigError, match="closed loop"):
        check_sequence_settings(True, "rate", None, None)


def test_sequence_figures_reach_table_and_csv(tmp_path: Path) -> None:
    latency = {"p50": 2000.0, "p90": 3000.0, "p95": 3500.0, "p99": 5000.0, "p999": 9000.0, "mean": 2500.0}
    assert sequence_figures({}, {}, 3.0) is None
    figures = sequence_figures({"sequence": latency}, {"sequences": 300, "sequence_requests": 1500}, 3.0)
    assert figures is not None
    assert figures["sequences_per_s"] == 100.0 and figures["requests_per_sequence"] == 5.0
    assert figures["sequence_p99_us"] == 5000.0 and figures["sequence_errors"] == 0
    run = {
        "mode": "concurrency", "concurrency": 4, "target_rate": None, "batch_size": 1, "duration_s": 3.0,
        "requests": 1502,
        "errors": 1, "errors_by_kind": {"http_400": 1}, "qps": 500.0, "infer_per_s": 500.0,
        "latency_us": {**latency, "max": 10000.0}, "server_us": None, "avg_batch": None, "stable": True,
        "gpu": None, "cpu": None, "latencies_us": {"sequence": latency},
        "counts": {"sequences": 300, "sequence_requests": 1500, "sequence_errors": 1},
        "sequences_per_s": 100.0, "requests_per_sequence": 5.0,
    }  # fmt: skip
    document = {"model": "acc", "rounds": 1, "runs": [run]}
    table = sequence_table(LoadTestReport.from_json(document))
    assert table is not None
    assert table.rows[0][:4] == ("seq=4", "100.0", "5", "2.00") and table.rows[0][-2:] == ("1", "1")
    assert (
        sequence_table(
            LoadTestReport.from_json({"model": "m", "runs": [{**run, "latencies_us": {}, "counts": {}}]})
        )
        is None
    )
    report = LoadTestReport.from_json({"model": "acc", "runs": [run]})
    report.write_csv(tmp_path / "run.csv")
    header, row = (line.split(",") for line in (tmp_path / "run.csv").read_text().splitlines())
    cells = dict(zip(header, row, strict=True))
    assert cells["sequences_per_s"] == "100.0" and cells["sequence_p99_us"] == "5000.0"
    assert cells["requests_per_sequence"] == "5.0" and cells["sequence_errors"] == "1"


class _Endpoint:
    """What ``prepare_requests`` asks a server, answered from ``config``; it counts the config reads."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.config_reads = 0

    def interface(self, model: str) -> ModelInterface:
        return ModelInterface(model, 8, (InputSpec("x", "FP32", (1,)),), ("y",))

    def model_config(self, model: str) -> dict[str, Any]:
        self.config_reads += 1
        return self.config


def _prepare(
    config: dict[str, Any], folder: Path, protocol: str = "http", **settings: Any
) -> tuple[Requests, int]:
    endpoint = _Endpoint(config)
    spec = LoadSpec(model="acc", address=ServerAddress.parse("127.0.0.1:9", protocol), **settings)
    folder.mkdir(exist_ok=True)
    _kind, prepared = prepare_requests(spec, cast(TritonEndpoint, endpoint), folder)
    return prepared, endpoint.config_reads


def test_the_default_length_is_the_data_steps_or_twenty(steps_file: Path, tmp_path: Path) -> None:
    """perf_analyzer's default: random data (one step) must not make one-request sequences."""
    assert sequence_length(None, 1) == DEFAULT_SEQUENCE_LENGTH == 20
    assert sequence_length(None, 4) == 4 and sequence_length(6, 4) == 6 and sequence_length(3, 1) == 3
    config: dict[str, Any] = {"sequence_batching": {"max_sequence_idle_microseconds": 5000000}}
    prepared, reads = _prepare(config, tmp_path / "a", sequences=True)
    assert (
        prepared.options["sequence-length"] == "20" and reads == 1
    )  # the config is read once for every check
    prepared, _ = _prepare(config, tmp_path / "b", sequences=True, input_data=steps_file)
    assert prepared.options["sequence-length"] == str(len(STEPS))
    prepared, _ = _prepare({}, tmp_path / "c")
    assert "sequence-length" not in prepared.options


def test_a_decoupled_sequence_model_is_refused(tmp_path: Path) -> None:
    config: dict[str, Any] = {
        "sequence_batching": {"direct": {}},
        "model_transaction_policy": {"decoupled": True},
    }
    for protocol in ("grpc", "http"):
        with pytest.raises(ConfigError, match="not supported yet") as raised:
            _prepare(config, tmp_path / "x", sequences=True, protocol=protocol)
        assert "sequence model and decoupled" in raised.value.message
    assert not (tmp_path / "x" / "inputs.npz").exists()
