"""Shaped loads on the real server: stages, a ramp, and traces replayed with each request's own shapes."""

from __future__ import annotations

import json
import math
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.http as httpclient
from typer.testing import CliRunner

from tritongen.cli.main import app
from tritongen.client.trace_settings import TraceControl
from tritongen.server.local import LocalTritonServer
from tritongen.triton.trace import collect, read_trace_files

from support.composing_models import STEP_MODEL
from support.string_model import RECORD_FILE, STRING_MODEL

pytestmark = pytest.mark.slow
runner = CliRunner()


def _loadtest(server: LocalTritonServer, model: str, *args: str) -> tuple[Any, dict[str, Any]]:
    out = Path(args[args.index("--json") + 1]) if "--json" in args else None
    result = runner.invoke(
        app, ["loadtest", model, "--url", server.http_url, "--metrics-url", server.metrics_url, *args],
        env={"COLUMNS": "200"},
    )  # fmt: skip
    run = json.loads(out.read_text())["runs"][0] if out is not None and out.is_file() else {}
    return result, run


def _records(served_repository: Path) -> list[dict[str, Any]]:
    path = served_repository / STRING_MODEL / RECORD_FILE
    return [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []


def _shapes_seen(records: list[dict[str, Any]]) -> Counter[tuple[int, int]]:
    """Each request the model saw as (rows, strings per row of ``text``)."""
    return Counter((len(r["text"]), len(r["text"][0])) for r in records)


def _shifted(rate: float, late_us: float) -> int:
    """How many sends at ``rate`` fit in ``late_us``: those that may move to the next window."""
    return math.ceil(rate * late_us / 1e6)


def test_stages_are_measured_stage_by_stage(triton_server: LocalTritonServer, tmp_path: Path) -> None:
    result, run = _loadtest(
        triton_server,
        STEP_MODEL,
        "--stages",
        "100:2s,300:2s",
        "--warmup",
        "1s",
        "--json",
        str(tmp_path / "r.json"),
    )
    assert result.exit_code == 0, result.stdout + result.stderr
    assert run["target_rate"] == 200 and run["duration_s"] == 4
    stages = run["stages"]
    assert [(s["stage"], s["rate"], s["start_s"]) for s in stages] == [("1", "100", 0), ("2", "300", 2)]
    assert sum(s["requests"] for s in stages) == run["requests"]
    schedule = run["schedule"]
    for stage, rate, asked in zip(stages, (100, 300), (200, 600), strict=True):
        # Constant arrivals send each stage's exact count; a send that left late may fall in the next.
        assert abs(stage["sent"] - asked) <= 2 + _shifted(rate, schedule["lateness_us"]["max"])
        # Answers come a latency after their sends: a stage's last ones are counted in the next (or
        # after the run), and it counts the previous stage's last ones.
        assert abs(stage["requests"] - stage["sent"]) <= 2 + _shifted(100 + 300, stage["latency_us"]["max"])
    assert schedule["shape"] == "stages 100/s for 2 s, 300/s for 2 s"
    assert (
        0 < schedule["lateness_us"]["p50"] <= schedule["lateness_us"]["p99"] <= schedule["lateness_us"]["max"]
    )
    assert "Stages (latency in ms)" in result.stdout and "sends left late by" in result.stdout


@pytest.mark.quiet  # counts per second within 2 requests: beside other tests the server's answers drift
def test_a_ramp_rises_slice_by_slice(triton_server: LocalTritonServer, tmp_path: Path) -> None:
    result, run = _loadtest(
        triton_server, STEP_MODEL, "--rate", "50..250/4s", "--timeslice", "1s", "--warmup", "0.5s",
        "--json", str(tmp_path / "r.json"),
    )  # fmt: skip
    assert result.exit_code == 0, result.stdout + result.stderr
    counts = [s["sent"] for s in run["timeslices"]]
    allowed = 2 + _shifted(250, run["schedule"]["lateness_us"]["max"])
    wanted = (75, 125, 175, 225)
    assert [abs(got - want) <= allowed for got, want in zip(counts, wanted, strict=True)] == [True] * 4


def test_our_trace_is_replayed_with_each_requests_shapes(
    triton_server: LocalTritonServer, served_repository: Path, tmp_path: Path
) -> None:
    rng = np.random.default_rng(3)
    entries, at = [], 0.0
    for _ in range(60):
        at += float(rng.exponential(1 / 40))
        rows, strings = int(rng.choice([1, 2, 4])), int(rng.choice([1, 3, 6]))
        shapes = {"text": [strings], "tag": [1], "scale": [1]}
        entries.append({"time_s": round(at, 4), "model": STRING_MODEL, "batch_size": rows, "shapes": shapes})
    entries.insert(5, {"time_s": entries[4]["time_s"], "model": "another_model", "batch_size": 1})
    trace = tmp_path / "trace.jsonl"
    trace.write_text("".join(json.dumps(e) + "\n" for e in entries))
    before = len(_records(served_repository))
    result, run = _loadtest(triton_server, STRING_MODEL, "--trace", str(trace), "--warmup", "0s",
                            "--json", str(tmp_path / "r.json"))  # fmt: skip
    assert result.exit_code == 0, result.stdout + result.stderr
    seen = _records(served_repository)[before:]
    wanted = Counter((e["batch_size"], e["shapes"]["text"][0]) for e in entries if e["model"] == STRING_MODEL)
    assert _shapes_seen(seen) == wanted  # every recorded request, once, with its own shapes
    assert run["requests"] == 60 and run["errors"] == 0
    assert run["infer_per_s"] == pytest.approx(run["qps"] * sum(r for r, _ in wanted.elements()) / 60)
    assert "requests to other models left out" in result.stdout + result.stderr


def test_a_trace_triton_recorded_is_replayed(
    triton_server: LocalTritonServer, served_repository: Path, tmp_path: Path
) -> None:
    control = TraceControl(triton_server.http_url)
    settings = control.read()
    sent = []
    client = httpclient.InferenceServerClient(triton_server.http_url)
    try:
        control.set({"trace_level": ["TIMESTAMPS", "TENSORS"], "trace_rate": "1", "log_frequency": "1000"})
        for number, (rows, strings) in enumerate([(1, 2), (3, 1), (2, 5), (1, 2), (4, 4), (3, 1)] * 3):
            inputs = []
            for name, array in (
                ("text", np.array([[b"abc"] * strings] * rows, dtype=object)),
                ("tag", np.array([[b"t"]] * rows, dtype=object)),
                ("scale", np.ones((rows, 1), np.float32)),
            ):
                tensor = httpclient.InferInput(
                    name, list(array.shape), "FP32" if name == "scale" else "BYTES"
                )
                tensor.set_data_from_numpy(array)
                inputs.append(tensor)
            client.infer(STRING_MODEL, inputs, request_id=f"recorded-{number}")
            sent.append((rows, strings))
            time.sleep(0.02)
    finally:
        control.set(
            {"trace_level": list(settings.level) or ["OFF"], "log_frequency": str(settings.log_frequency)}
        )
        client.close()
        control.close()
    assert settings.file is not None
    ours = {
        t.id
        for t in collect(read_trace_files(Path(settings.file)))
        if (t.request_id or "").startswith("recorded-")
    }
    recorded = tmp_path / "recorded.json"  # the entries of our requests, as the server wrote them
    recorded.write_text(json.dumps([e for e in read_trace_files(Path(settings.file)) if e.get("id") in ours]))
    before = len(_records(served_repository))
    result, run = _loadtest(triton_server, STRING_MODEL, "--trace", str(recorded), "--warmup", "0s",
                            "--json", str(tmp_path / "r.json"))  # fmt: skip
    assert result.exit_code == 0, result.stdout + result.stderr
    assert _shapes_seen(_records(served_repository)[before:]) == Counter(sent)
    assert run["schedule"]["shape"].startswith("trace recorded.json (triton): 18 requests")


def test_a_trace_the_model_cannot_take_sends_nothing(
    triton_server: LocalTritonServer, served_repository: Path, tmp_path: Path
) -> None:
    trace = tmp_path / "trace.jsonl"
    good = {"time_s": 0, "batch_size": 1, "shapes": {"text": [2], "tag": [1], "scale": [1]}}
    bad = {"time_s": 0.1, "batch_size": 1, "shapes": {"text": [2], "tag": [3], "scale": [1]}}
    trace.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
    before = len(_records(served_repository))
    result, _ = _loadtest(triton_server, STRING_MODEL, "--trace", str(trace))
    assert result.exit_code == 2
    assert "line 2" in result.stdout + result.stderr and "fixes [1]" in result.stdout + result.stderr
    assert len(_records(served_repository)) == before
