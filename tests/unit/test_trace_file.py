"""Reading Triton's trace files: entries joined by id, steps nested, parts that never go negative."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tritongen.triton.trace import PARTS, TraceFileError, collect, read_trace_files, split_at_ranks

ORDER = (
    "HTTP_RECV_START", "HTTP_RECV_END", "REQUEST_START", "QUEUE_START", "COMPUTE_START",
    "COMPUTE_INPUT_END", "COMPUTE_OUTPUT_START", "INFER_RESPONSE_COMPLETE", "COMPUTE_END",
    "REQUEST_END", "HTTP_SEND_START", "HTTP_SEND_END",
)  # fmt: skip


def _request(
    trace_id: int, request_id: str, at: dict[str, int], parent: int | None = None
) -> list[dict[str, Any]]:
    """The entries the server writes for one request: its model line, then one per timestamp."""
    head: dict[str, Any] = {"id": trace_id, "model_name": "m", "model_version": 1, "request_id": request_id}
    if parent is not None:
        head["parent_id"] = parent
    return [head, *({"id": trace_id, "timestamps": [{"name": n, "ns": ns}]} for n, ns in at.items())]


def _even(start: int, step: int = 1000) -> dict[str, int]:
    return {name: start + i * step for i, name in enumerate(ORDER)}


def test_numbered_files_are_read_in_order_and_entries_join_by_id(tmp_path: Path) -> None:
    path = tmp_path / "trace.json"
    entries = _request(1, "a", _even(0)) + _request(2, "b", _even(50_000, 2000))
    (tmp_path / "trace.json.10").write_text(json.dumps(entries[8:]))
    (tmp_path / "trace.json.2").write_text(json.dumps(entries[:8]))
    traces = collect(read_trace_files(path))
    assert [t.request_id for t in traces] == ["a", "b"]
    a, b = traces
    assert a.total_us == pytest.approx(11.0) and b.total_us == pytest.approx(22.0)
    expected = {"http_recv": 1.0, "handling": 2.0, "queue": 1.0, "compute_input": 1.0, "infer": 1.0,
                "compute_output": 1.0, "steps": None, "respond": 4.0}  # fmt: skip
    assert a.split_us() == pytest.approx(expected) and list(expected) == list(PARTS)
    assert sum(v or 0.0 for v in expected.values()) == a.total_us


def test_a_step_is_nested_under_its_request_and_has_no_http_parts() -> None:
    step = {n: ns for n, ns in _even(500, 100).items() if not n.startswith("HTTP")}
    traces = collect(_request(1, "top", _even(0)) + _request(2, "", step, parent=1))
    (top,) = traces
    (inner,) = top.steps
    assert inner.parent_id == 1 and inner.request_id is None
    assert inner.split_us()["http_recv"] is None and inner.split_us()["queue"] == pytest.approx(0.1)
    assert top.split_us()["steps"] is None  # its own trace has queue and compute: they are its parts


def test_an_ensemble_s_time_in_its_steps_is_a_part_of_its_own() -> None:
    own = {
        n: ns for n, ns in _even(0).items() if n.startswith(("HTTP", "REQUEST", "QUEUE", "INFER_RESPONSE"))
    }
    own["INFER_RESPONSE_COMPLETE"] = own["HTTP_RECV_END"] + 7000
    step = {n: ns for n, ns in _even(2500, 100).items() if not n.startswith("HTTP")}
    (top,) = collect(_request(1, "ens", own) + _request(2, "", step, parent=1))
    split = top.split_us()
    assert split["queue"] is None and split["handling"] == pytest.approx(2.0)
    assert split["steps"] == pytest.approx(5.0)  # queue start to the response handed over
    assert sum(v or 0.0 for v in split.values()) == pytest.approx(top.total_us)


def test_an_edge_stamped_out_of_order_counts_from_the_one_before_it() -> None:
    at = _even(0)
    at["INFER_RESPONSE_COMPLETE"] = at["HTTP_SEND_END"] + 5000  # stamped late by another thread
    (trace,) = collect(_request(1, "late", at))
    split = trace.split_us()
    assert all(value is not None and value >= 0 for part, value in split.items() if part != "steps")
    assert split["respond"] == 0.0 and split["steps"] is None


def test_the_median_and_the_slowest_percent() -> None:
    entries: list[dict[str, Any]] = []
    for i in range(200):
        entries += _request(i + 1, f"r{i}", _even(i * 100_000, 1000 + 10 * i))
    median, slowest = split_at_ranks(collect(entries))
    assert median.requests == 1 and slowest.requests == 2  # 1% of 200
    assert median.total_us == pytest.approx(11 * (1000 + 10 * 99) / 1000)
    assert slowest.total_us == pytest.approx(11 * (1000 + 10 * 198.5) / 1000)
    assert split_at_ranks([]) == []


def test_a_file_that_is_not_a_trace_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "trace.json"
    path.write_text('{"not": "a list"}')
    with pytest.raises(TraceFileError, match="not a Triton trace file"):
        read_trace_files(path)
    path.write_text("[1, 2")
    with pytest.raises(TraceFileError, match="not a Triton trace file"):
        read_trace_files(path)
