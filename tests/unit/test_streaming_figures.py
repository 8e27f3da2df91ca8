"""Streaming (decoupled) models: gRPC streams, time to first response and between responses, timeouts.

The ``stream_plan`` model (tests/streaming_model.py) streams what each request's plan asks:
K responses, the first G0 ms after the request arrived, then one every G ms, then the final
flag (or, with ``final`` 0, never the flag while the client waits).
"""

from __future__ import annotations

from typing import TypeVar

from tritongen.loadtest.result import LATENCY_KEYS, LoadTestReport, RunResult
from tritongen.loadtest.streaming import add_streaming_figures, check_streaming, is_decoupled
from tritongen.report.html import loadtest_section
from tritongen.report.kind_tables import streaming_table

RESPONSES, FIRST_MS, GAP_MS = 4, 60, 40
"""The plan of the fidelity runs: 4 responses at 60, 100, 140 and 180 ms."""


T = TypeVar("T")


def test_decoupled_is_read_from_the_servers_config() -> None:
    assert is_decoupled({"model_transaction_policy": {"decoupled": True}})
    assert not is_decoupled({"model_transaction_policy": {}}) and not is_decoupled({})
    assert check_streaming("m", "http", {}) is False
    assert check_streaming("m", "grpc", {"model_transaction_policy": {"decoupled": True}}) is True


def test_streaming_figures_and_table() -> None:
    run = RunResult(
        mode="concurrency", concurrency=2, target_rate=None, batch_size=1, duration_s=4.0, requests=12,
        errors=2, errors_by_kind={"timeout": 2}, qps=2.5, infer_per_s=2.5,
        latency_us=dict.fromkeys(LATENCY_KEYS, 9e3), server_us=None, avg_batch=None, stable=True,
        gpu=None, cpu=None,
        latencies_us={"first_response": {"p50": 1500.0}, "between_responses": {"p50": 2500.0}},
        counts={"responses": 33, "request_responses": 30},
    )  # fmt: skip
    add_streaming_figures(run)
    assert run.streaming and run.responses_per_s == 33 / 4.0 and run.responses_per_request == 3.0
    report = LoadTestReport(model="m", protocol="grpc", url="u", runs=[run])
    table = streaming_table(report)
    assert table is not None and len(table.rows) == 1
    cells = dict(zip(table.headers, table.rows[0], strict=True))
    assert cells["resp/req"] == "3" and cells["first P50"] == "1.50" and cells["gap P50"] == "2.50"
    assert streaming_table(LoadTestReport(model="m", protocol="grpc", url="u")) is None
    section = loadtest_section(report, "run.json")
    assert table.title in [t.title for t in section.tables]
