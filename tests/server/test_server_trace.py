"""The server's own trace, on the real embedded server: turned on and put back, read, joined by request id.

The embedded server names a trace file at launch with tracing off; the trace API turns
timestamps on at a rate, and off again, which writes what is left. Each traced request's
parts add up to its time in the server; an ensemble's steps are nested under their request.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient

from tritongen.client.trace_settings import LOG_FREQUENCY, TraceControl
from tritongen.errors import ServerError
from tritongen.server.local import LocalTritonServer
from tritongen.triton.trace import PARTS, collect, read_trace_files, split_at_ranks

from support.composing_models import ENSEMBLE_MODEL, PRE_MODEL, STEP_MODEL

REQUESTS = 40


def _infer(client: httpclient.InferenceServerClient, model: str, name: str, request_id: str) -> None:
    data = httpclient.InferInput(name, [1, 16], "FP32")
    data.set_data_from_numpy(np.ones((1, 16), dtype=np.float32))
    client.infer(model, [data], request_id=request_id)


def test_traced_requests_split_into_parts_that_add_up_and_the_settings_are_put_back(
    triton_server: LocalTritonServer,
) -> None:
    control = TraceControl(triton_server.http_url)
    client = httpclient.InferenceServerClient(triton_server.http_url.removeprefix("http://"))
    try:
        before = control.read()
        assert before.level == ("OFF",) and before.file == str(triton_server.trace_file)
        with control.timestamps(rate=1) as path:
            during = control.read()
            for i in range(REQUESTS):
                _infer(client, STEP_MODEL, "input", f"split-{i}")
            _infer(client, ENSEMBLE_MODEL, "x", "split-ensemble")
        after = control.read()
    finally:
        client.close()
        control.close()
    assert during.level == ("TIMESTAMPS",) and during.rate == 1 and during.log_frequency == LOG_FREQUENCY
    assert after == before  # off again, its rate, count and frequency as found
    traces = {
        t.request_id: t for t in collect(read_trace_files(path)) if (t.request_id or "").startswith("split-")
    }
    assert set(traces) == {f"split-{i}" for i in range(REQUESTS)} | {"split-ensemble"}  # rate 1: every one
    for trace in (traces[f"split-{i}"] for i in range(REQUESTS)):
        split, total = trace.split_us(), trace.total_us
        assert trace.model == STEP_MODEL and total is not None and total > 0
        assert split["steps"] is None  # no ensemble
        own = [part for part in PARTS if part != "steps"]
        assert all(split[part] is not None and (split[part] or 0) >= 0 for part in own), (split, trace.ns)
        assert sum(split[part] or 0.0 for part in PARTS) == pytest.approx(total, abs=0.01)
    ensemble = traces["split-ensemble"]
    assert ensemble.model == ENSEMBLE_MODEL and [s.model for s in ensemble.steps] == [PRE_MODEL, STEP_MODEL]
    assert all(s.parent_id == ensemble.id and s.total_us is not None for s in ensemble.steps)
    assert all(s.split_us()["http_recv"] is None for s in ensemble.steps)  # a step is no HTTP request
    whole = ensemble.split_us()  # its time in the steps is a part of its own: the parts add up
    assert whole["steps"] is not None and whole["steps"] > 0, whole
    assert sum(v or 0.0 for v in whole.values()) == pytest.approx(ensemble.total_us, abs=0.01)
    median, slowest = split_at_ranks([traces[f"split-{i}"] for i in range(REQUESTS)])
    assert (median.label, median.requests) == ("median", 1) and (slowest.label, slowest.requests) == (
        "slowest 1%",
        1,
    )
    assert median.total_us <= slowest.total_us


def test_a_server_without_a_trace_file_is_refused_in_one_line(served_repository: Path) -> None:
    with LocalTritonServer(
        served_repository, http_port=0, grpc_port=0, metrics_port=0, models=[STEP_MODEL],
        extra_args=["--trace-config=level=OFF"],
    ) as server:  # fmt: skip
        control = TraceControl(server.http_url)
        try:
            with pytest.raises(ServerError, match="writes no trace file"), control.timestamps(rate=1):
                pass
        finally:
            control.close()
