"""Sequence models under load on the real server: each sequence gets its own steps, in order."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tritongen.cli.main import app
from tritongen.errors import ConfigError
from tritongen.loadtest.sequences import (
    DEFAULT_SEQUENCE_LENGTH,
)
from tritongen.server.local import LocalTritonServer

from support.machine import cpu_use
from support.sequence_model import RECORD_FILE, SEQUENCE_MODEL, read_records

runner = CliRunner()


SHORT = ["--duration", "3s", "--warmup", "1s", "--window", "1s", "--max-duration", "3s"]


STEPS = [1.0, 2.0, 3.0, 4.0]


SEQUENCES = 4


def _expected(length: int) -> tuple[float, float]:
    """Sum and position-weighted sum of a sequence of ``length`` requests over STEPS, in order."""
    values = [STEPS[i % len(STEPS)] for i in range(length)]
    return sum(values), sum((i + 1) * v for i, v in enumerate(values))


def _loadtest(server: LocalTritonServer, protocol: str, *args: str) -> tuple[int, str, str]:
    url = server.http_url if protocol == "http" else server.grpc_url
    result = runner.invoke(
        app,
        ["loadtest", *args, "--url", url, "--protocol", protocol, "--metrics-url", server.metrics_url],
    )
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def steps_file(tmp_path: Path) -> Path:
    path = tmp_path / "steps.json"
    path.write_text(json.dumps({"data": [{"x": [value]} for value in STEPS]}))
    return path


@pytest.mark.slow
@pytest.mark.parametrize(
    ("protocol", "length", "extra"),
    [
        ("http", None, []),  # the length is the number of data steps
        ("grpc", 6, ["--processes", "2", "--sequence-id-range", "1000:1008"]),  # steps repeat; 2 processes
    ],
)
def test_every_sequence_gets_its_own_steps_in_order(
    triton_server: LocalTritonServer,
    served_repository: Path,
    steps_file: Path,
    tmp_path: Path,
    protocol: str,
    length: int | None,
    extra: list[str],
) -> None:
    model_dir = served_repository / SEQUENCE_MODEL
    (model_dir / RECORD_FILE).write_text("")  # the model appends: start from nothing
    out = tmp_path / "run.json"
    args = ["--sequences", str(SEQUENCES), "--input-data", str(steps_file), *SHORT, "--json", str(out)]
    args += ["--sequence-length", str(length)] if length else []
    with cpu_use() as use:
        code, stdout, stderr = _loadtest(triton_server, protocol, SEQUENCE_MODEL, *args, *extra)
    assert code == 0, stderr + stdout
    run = json.loads(out.read_text())["runs"][0]
    steps = length or len(STEPS)
    finished = run["counts"]["sequences"]
    assert run["errors"] == 0 and "sequence_errors" not in run["counts"]
    assert run["concurrency"] == SEQUENCES and finished > 50
    assert run["requests_per_sequence"] == steps
    assert run["sequences_per_s"] == pytest.approx(finished / run["duration_s"])
    # Requests in the measured windows belong to the finished sequences, except those of
    # sequences cut by either edge of the span: at most SEQUENCES unfinished at each edge.
    assert abs(run["requests"] - finished * steps) <= 2 * SEQUENCES * (steps - 1)
    sequence_us, request_us = run["latencies_us"]["sequence"], run["latency_us"]
    if use.spare:  # timings are compared where the machine had CPU to spare (support/machine.py)
        # A sequence is its requests one after the other: its mean time is `steps` request times,
        # plus the generator's own time between them (margin: -10% for edge effects, +50%).
        assert 0.9 * steps * request_us["mean"] <= sequence_us["mean"] <= 1.5 * steps * request_us["mean"]
        # Little's law: SEQUENCES in flight all the time (gaps between sequences take microseconds).
        in_flight = run["sequences_per_s"] * sequence_us["mean"] / 1e6
        assert 0.8 * SEQUENCES <= in_flight <= 1.05 * SEQUENCES

    time.sleep(0.5)  # the model writes its record as it answers the last request of a sequence
    records = read_records(model_dir)
    total, weighted = _expected(steps)
    assert records and all(record[1:] == (repr(total), steps, repr(weighted)) for record in records)
    corrids = [record[0] for record in records]
    assert all(corrid > 0 for corrid in corrids)
    if extra:  # the range, split between the two Locust processes, IDs reused once free
        assert set(corrids) <= set(range(1000, 1008))
    else:  # a fresh ID for every sequence
        assert len(set(corrids)) == len(corrids)
    # The model saw every sequence the run counted, and those of the warm-up and the edges
    # (each whole and once: the records above all match, and the IDs are fresh or in the range).
    assert finished <= len(records)
    assert "seq/s" in stdout and f"seq={SEQUENCES}" in stdout


def test_a_sequence_model_needs_sequences(triton_server: LocalTritonServer) -> None:
    code, stdout, stderr = _loadtest(triton_server, "http", SEQUENCE_MODEL, "--concurrency", "2", *SHORT)
    assert code != 0
    message = (stderr or stdout).strip()
    assert len(message.splitlines()) == 1
    assert "sequence model" in message and "--sequences N" in message


def test_sequences_need_a_sequence_model(triton_server: LocalTritonServer) -> None:
    code, stdout, stderr = _loadtest(triton_server, "grpc", "mlp_onnx", "--sequences", "2", *SHORT)
    assert code != 0
    message = (stderr or stdout).strip()
    assert len(message.splitlines()) == 1
    assert "no sequence_batching" in message and "--concurrency N" in message


def test_batching_knobs_of_a_sequence_model_go_to_its_sequence_batcher(served_repository: Path) -> None:
    from tritongen.triton.batching import BatchingOptions, apply_batching
    from tritongen.triton.proto import read_config
    from tritongen.triton.render import render_config

    config = read_config(served_repository / SEQUENCE_MODEL / "config.pbtxt")
    tuned = apply_batching(
        config, BatchingOptions(preferred_batch_sizes=(4,), max_queue_delay_us=500, instances=2), "local"
    )
    assert tuned.dynamic_batching is None  # the scheduler stays the sequence batcher
    assert "preferred_batch_size: 4" in tuned.passthrough
    assert "max_queue_delay_microseconds: 500" in tuned.passthrough
    assert "CONTROL_SEQUENCE_CORRID" in tuned.passthrough and tuned.instance_group[0].count == 2
    render_config(tuned)  # a legal config: it parses back to itself
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2

    message = model_config_pb2.ModelConfig()
    text_format.Parse(config.passthrough, message)
    message.sequence_batching.direct.SetInParent()  # the strategy is a oneof: oldest goes
    direct = config.model_copy(update={"passthrough": text_format.MessageToString(message)})
    assert (
        "max_queue_delay_microseconds: 250"
        in apply_batching(direct, BatchingOptions(max_queue_delay_us=250), "local").passthrough
    )
    with pytest.raises(ConfigError, match="direct strategy"):
        apply_batching(direct, BatchingOptions(preferred_batch_sizes=(4,)), "local")


def test_random_data_sends_sequences_of_twenty(triton_server: LocalTritonServer, tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    quick = ["--duration", "1s", "--warmup", "0.5s", "--window", "0.5s", "--max-duration", "1s"]
    code, stdout, stderr = _loadtest(
        triton_server, "grpc", SEQUENCE_MODEL, "--sequences", "2", *quick, "--json", str(out)
    )
    assert code == 0, stderr + stdout
    run = json.loads(out.read_text())["runs"][0]
    assert run["counts"]["sequences"] > 0 and run["requests_per_sequence"] == DEFAULT_SEQUENCE_LENGTH


STREAMS = [[1.0, 2.0], [10.0, 20.0, 30.0], [100.0, 200.0, 300.0, 400.0]]
"""A nested data file's streams: each one sequence, its own values in order."""


@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_each_stream_of_a_nested_data_file_is_one_sequence(
    triton_server: LocalTritonServer, served_repository: Path, tmp_path: Path, protocol: str
) -> None:
    model_dir = served_repository / SEQUENCE_MODEL
    (model_dir / RECORD_FILE).write_text("")
    data = tmp_path / "streams.json"
    data.write_text(json.dumps({"data": [[{"x": [value]} for value in stream] for stream in STREAMS]}))
    out = tmp_path / "run.json"
    quick = ["--duration", "2s", "--warmup", "0.5s", "--window", "0.5s", "--max-duration", "2s"]
    code, stdout, stderr = _loadtest(
        triton_server, protocol, SEQUENCE_MODEL, "--sequences", "3", "--input-data", str(data), *quick,
        "--json", str(out),
    )  # fmt: skip
    assert code == 0, stderr + stdout
    run = json.loads(out.read_text())["runs"][0]
    assert run["errors"] == 0 and run["counts"]["sequences"] > 10
    # The users take the streams in turn: each finished sequence is one of the three lengths.
    assert 2 <= run["requests_per_sequence"] <= 4
    time.sleep(0.5)  # the model writes its record as it answers the last request of a sequence
    expected = {(repr(sum(s)), len(s), repr(sum((i + 1) * v for i, v in enumerate(s)))) for s in STREAMS}
    records = read_records(model_dir)
    assert records and {record[1:] for record in records} == expected  # every stream, whole, in order


def test_streams_take_no_length_or_batch(triton_server: LocalTritonServer, tmp_path: Path) -> None:
    data = tmp_path / "streams.json"
    data.write_text(json.dumps({"data": [[{"x": [value]} for value in stream] for stream in STREAMS]}))
    for extra, wording in [
        (["--sequence-length", "5"], "--sequence-length 5 and the streams of"),
        (["--batch-size", "2"], "--batch-size 2 with the streams of"),
    ]:
        code, stdout, stderr = _loadtest(
            triton_server,
            "http",
            SEQUENCE_MODEL,
            "--sequences",
            "2",
            "--input-data",
            str(data),
            *extra,
            *SHORT,
        )
        lines = [line for line in (stderr or stdout).splitlines() if line.strip()]
        assert code == 1 and len(lines) == 1 and wording in lines[0], stderr + stdout
    data.write_text(json.dumps({"data": [[{"x": [1.0]}], []]}))
    code, stdout, stderr = _loadtest(
        triton_server, "http", SEQUENCE_MODEL, "--sequences", "2", "--input-data", str(data), *SHORT
    )
    assert code == 1 and "data[1] is an empty stream" in stderr, stderr
