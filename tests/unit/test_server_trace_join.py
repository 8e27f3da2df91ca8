"""``--server-trace``'s join: request ids written into prepared requests, client marks read back
over a run's measured span, joined to the server's traces by id, split at the median and the
slowest 1% by client latency; what cannot be traced is said in one line.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import pytest
from tritongen.loadtests.tritonload.payloads import http_request
from tritongen.loadtests.tritonload.request_ids import ID_WIDTH, PLACEHOLDER, RequestIds, id_offset

from tritongen.client.address import ServerAddress
from tritongen.errors import ConfigError
from tritongen.loadtest.result import LoadTestReport, RunResult
from tritongen.loadtest.server_trace import (
    CLIENT_PARTS,
    ClientMarks,
    JoinedRequest,
    ServerTrace,
    breakdown,
)
from tritongen.loadtest.spec import LoadSpec
from tritongen.report.trace_report import server_trace_table
from tritongen.triton.trace import RequestTrace

TAG = "ab12cd"


def _run() -> RunResult:
    return RunResult(
        mode="concurrency", concurrency=2, target_rate=None, batch_size=1, duration_s=2.0, requests=10,
        errors=0, errors_by_kind={}, qps=5.0, infer_per_s=5.0, latency_us=None, server_us=None,
        avg_batch=None, stable=True, gpu=None, cpu=None,
    )  # fmt: skip


def _server_trace(trace_id: int, request_id: str, start_us: float, total_us: float) -> list[dict]:
    """Triton's entries for one HTTP request that spent ``total_us`` in the server from ``start_us``."""
    edges = ["HTTP_RECV_START", "HTTP_RECV_END", "REQUEST_START", "QUEUE_START", "COMPUTE_START",
             "COMPUTE_INPUT_END", "COMPUTE_OUTPUT_START", "COMPUTE_END", "REQUEST_END", "HTTP_SEND_START",
             "HTTP_SEND_END"]  # fmt: skip
    step = total_us / (len(edges) - 1)
    stamps = [{"name": name, "ns": int((start_us + i * step) * 1000)} for i, name in enumerate(edges)]
    return [
        {"id": trace_id, "model_name": "m", "model_version": 1, "request_id": request_id},
        {"id": trace_id, "timestamps": stamps},
    ]


def test_a_prepared_request_carries_a_fixed_width_id_written_in_place(tmp_path: Path) -> None:
    prepared = http_request("m", "127.0.0.1", 8000, {"x": np.zeros((1, 4), np.float32)}, ["y"], PLACEHOLDER)
    assert id_offset(http_request("m", "127.0.0.1", 8000, {"x": np.zeros((1, 4), np.float32)}, ["y"])) < 0
    request = bytearray(prepared)
    ids = RequestIds(TAG, str(tmp_path / "w.jsonl"))
    at = id_offset(prepared)
    first = ids.stamp(request, at)
    text = request[at : at + ID_WIDTH].decode()
    assert first == 1 and len(request) == len(prepared)
    assert text == f"{TAG}{os.getpid() % 10**7:07d}{1:09d}"
    count, copy = ids.stamped(bytes(request), at)
    assert count == 2 and copy[at : at + ID_WIDTH].decode().endswith("000000002")
    with pytest.raises(ValueError, match="6 letters or digits"):
        RequestIds("no", "x")


def test_marks_are_read_back_over_the_measured_span_only(tmp_path: Path) -> None:
    results = tmp_path / "windows.jsonl"
    ids = RequestIds(TAG, str(results))
    now = time.perf_counter()
    issued = []
    for index in range(10):  # one request a second, the last 10 s
        count, _ = ids.next()
        issued.append(count)
        ids.mark(count, now - 10 + index, now - 10 + index + 0.001)
    ids.write()
    epoch = time.time() - time.perf_counter()
    marks = ClientMarks.read(results, TAG, (epoch + now - 7.5, epoch + now - 2.5))
    counts = sorted(int(key[-9:]) for key in marks.times)
    assert counts == issued[3:8]  # the requests that ended 7, 6, 5, 4 and 3 s ago
    assert all(key.startswith(f"{TAG}{os.getpid() % 10**7:07d}") for key in marks.times)


def test_a_joined_request_splits_into_parts_that_add_up_to_its_client_latency() -> None:
    trace = RequestTrace(1, ns={})
    for _, entry in enumerate(_server_trace(1, "r", 1_000_100.0, 500.0)[1]["timestamps"]):
        trace.ns[entry["name"]] = entry["ns"]
    request = JoinedRequest(start=1.0, end=1.0 + 700e-6, trace=trace)
    split = request.split_us()
    assert list(split) == list(CLIENT_PARTS)
    assert split["client_send"] == pytest.approx(100.0, abs=0.01)
    assert split["client_receive"] == pytest.approx(100.0, abs=0.01)
    assert sum(v or 0.0 for v in split.values()) == pytest.approx(request.latency_us, abs=0.1)


def test_ranks_are_by_client_latency_median_and_the_slowest_hundredth() -> None:
    joined = []
    for index in range(200):
        trace = RequestTrace(index, ns={"HTTP_RECV_START": 0, "HTTP_SEND_END": 1000})
        joined.append(JoinedRequest(start=0.0, end=(index + 1) * 1e-5, trace=trace))  # 10..2000 µs
    found = breakdown(joined, rate=1, recorded=250)
    median, slowest = found["splits"]
    assert found["joined"] == 200 and found["recorded"] == 250
    assert median["label"] == "median" and median["latency_us"] == pytest.approx(1000.0)
    assert slowest["requests"] == 2 and slowest["latency_us"] == pytest.approx(1995.0)
    assert breakdown([], rate=1, recorded=0)["splits"] == []


def test_a_run_is_joined_to_the_servers_trace_by_id(tmp_path: Path) -> None:
    results = tmp_path / "windows.jsonl"
    trace = ServerTrace(rate=1, tag=TAG)
    ids = RequestIds(TAG, str(results))
    entries = []
    base = time.perf_counter()
    for index in range(50):
        count, text = ids.next()
        start = base + index * 0.01
        ids.mark(count, start, start + 0.001)  # 1 ms on the client, 0.5 ms of it in the server
        if index % 2 == 0:  # the server traced one in two
            entries += _server_trace(index + 1, text.decode(), start * 1e6 + 200, 500.0)
    entries += _server_trace(999, "other-client", base * 1e6, 10.0)
    ids.write()
    trace_file = tmp_path / "trace.json"
    trace_file.write_text(json.dumps(entries))
    run = _run()
    epoch = time.time() - time.perf_counter()
    trace.add(run, results, processes=1, span=(epoch + base - 1, epoch + base + 10))
    trace.attach(trace_file)
    assert run.server_trace is not None and run.warnings == []
    assert run.server_trace["recorded"] == 50 and run.server_trace["joined"] == 25
    median = run.server_trace["splits"][0]["parts_us"]
    assert median["client_send"] == pytest.approx(200.0, abs=1) and median["client_receive"] == pytest.approx(
        300.0, abs=1
    )
    table = server_trace_table(LoadTestReport(model="m", protocol="http", url="u", runs=[run]))
    assert table is not None and [row[0] for row in table.rows] == ["c=2 P50", "c=2 top 1%"]
    assert "c=2: 25 of 50 measured requests traced by the server (1 in 1)" in table.notes


def test_what_cannot_be_traced_is_one_warning_and_the_run_stays(tmp_path: Path) -> None:
    run = _run()
    trace = ServerTrace(rate=1, tag=TAG)
    trace.add(run, tmp_path / "w.jsonl", processes=1, span=(0.0, 1.0))
    trace.attach(tmp_path / "elsewhere" / "trace.json")
    assert run.server_trace is None and len(run.warnings) == 1
    assert "is not on this machine" in run.warnings[0]
    run2 = _run()
    unavailable = ServerTrace(rate=1, tag=TAG, unavailable="the server refused its trace settings")
    unavailable.add(run2, tmp_path / "w.jsonl", processes=1, span=(0.0, 1.0))
    unavailable.attach(None)
    assert run2.warnings == ["--server-trace: the server refused its trace settings"]


def test_server_trace_is_refused_where_requests_carry_no_id() -> None:
    address = ServerAddress.parse("localhost:8000", "http")
    with pytest.raises(ConfigError, match="--server-trace does not apply with --sequences"):
        LoadSpec(model="m", address=address, sequences=True, server_trace=1)
    with pytest.raises(ConfigError, match="--trace-rate must be at least 1"):
        LoadSpec(model="m", address=address, server_trace=0)
    assert LoadSpec(model="m", address=address, server_trace=10).server_trace == 10
    np.testing.assert_equal(len(PLACEHOLDER), ID_WIDTH)


def test_the_html_page_draws_a_stacked_bar_per_rank(tmp_path: Path) -> None:
    from tritongen.report.html import render_report

    run = _run()
    keys = ("p50", "p90", "p95", "p99", "p999", "max", "mean")
    run.latency_us = {key: 1000.0 + 100 * i for i, key in enumerate(keys)}
    trace = RequestTrace(1, ns={"HTTP_RECV_START": 100_000, "HTTP_SEND_END": 600_000})
    joined = [JoinedRequest(start=0.0, end=(i + 1) * 1e-3, trace=trace) for i in range(3)]
    run.server_trace = breakdown(joined, rate=1, recorded=3)
    page = render_report([("run.json", LoadTestReport(model="m", protocol="http", url="u", runs=[run]))])
    assert "Where the time went (server trace)" in page and "c=2 top 1%" in page


def test_a_triton_that_can_crash_while_tracing_is_named() -> None:
    from tritongen.loadtest.server_trace import crash_warning

    said = crash_warning("2.51.0", overlapping=True)
    assert said is not None and "Triton 2.51.0 can crash" in said and "#7795" in said
    assert crash_warning("2.51.0", overlapping=False) is None  # one request at a time
    assert crash_warning("2.58.0", overlapping=True) is None and crash_warning("3.0.1", True) is None
    assert crash_warning(None, True) is None and crash_warning("dev", True) is None
