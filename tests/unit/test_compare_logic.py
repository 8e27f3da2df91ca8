"""Ranking, recommendations, tables and the compare JSON: pure logic, no server."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tritongen.client.address import ServerAddress
from tritongen.client.inputs import InputSpec, ModelInterface
from tritongen.compare.build_facts import apply_metadata
from tritongen.compare.measure import MeasureSettings, ServerHandle, engine_spec, request_shapes
from tritongen.compare.recommend import rank, recommend
from tritongen.compare.result import SCHEMA, CompareReport, EngineResult, Recommendation, build_note
from tritongen.convert.result_json import read_precision_report
from tritongen.errors import ConfigError
from tritongen.metrics.hardware import describe_host, server_gpus
from tritongen.metrics.process_memory import backend_processes
from tritongen.report.compare_tables import compare_table
from tritongen.report.table_data import to_markdown
from tritongen.triton.repository import METADATA_FILE

SPREAD = (-1.2, -0.5, 0.0, 0.5, 1.2)
"""Round-to-round deviations in units of the noise: symmetric, so the median is the nominal figure."""


def _rounds(value: float | None, noise: float, shift: int) -> list[float | None]:
    """Five rounds around ``value``; engines get the deviations in different orders (``shift``)."""
    if value is None:
        return []
    order = SPREAD[shift % 5 :] + SPREAD[: shift % 5]
    return [value * math.exp(noise * z) for z in order]


def _engine(
    fmt: str,
    p99: float | None,
    qps: float | None,
    mem_mb: float | None,
    noise: float = 0.02,
    shift: int | None = None,
    **kw: Any,
) -> EngineResult:
    """An engine measured in five interleaved rounds with ``noise`` (relative) round to round."""
    kw.setdefault("status", "ok")
    mem = None if mem_mb is None else int(mem_mb * 1e6)
    if shift is None:
        shift = {"onnx": 0, "tvm": 1, "torchscript": 3, "tensorrt": 2}.get(fmt, 4)
    engine = EngineResult(
        format=fmt,
        model=f"m_{fmt}",
        p99_ms_b1=p99,
        infer_per_s_b32=qps,
        peak_mem_bytes=mem,
        precision="fp32",
        rounds=5,
        round_figures={
            "p99_ms_b1": _rounds(p99, noise, shift),
            "infer_per_s_b32": _rounds(qps, noise, shift + 2),
        },
        **kw,
    )
    engine.summarise(0.95)
    return engine


def _by_situation(engines: list[EngineResult]) -> dict[str, Recommendation]:
    return {r.situation: r for r in recommend(engines)}


def test_each_situation_picks_the_best_figure_with_the_ratio_in_the_reason() -> None:
    engines = [_engine("onnx", 2.0, 1000.0, 70.0), _engine("tvm", 1.0, 1500.0, 400.0),
               _engine("torchscript", 3.0, 800.0, 250.0)]  # fmt: skip
    recs = _by_situation(engines)
    latency, throughput, memory = recs["latency"], recs["throughput"], recs["memory"]
    assert latency.format == "tvm" and latency.runner_up == "onnx"
    assert latency.ratio == pytest.approx(2.0)
    assert latency.significant and latency.ratio_low is not None and latency.ratio_high is not None
    assert 1 < latency.ratio_low < 2.0 < latency.ratio_high
    assert "TVM: 2.00× [1.93, 2.07] lower P99 than ONNX Runtime (1.00 ± 0.02 ms vs 2.00 ± 0.05 ms)" in (
        latency.reason
    )
    assert throughput.format == "tvm" and throughput.ratio == pytest.approx(1.5)
    assert "1,500 ± 34 infer/s vs 1,000 ± 23 infer/s" in throughput.reason
    assert memory.format == "onnx" and memory.runner_up == "torchscript"
    assert "3.57× less memory than TorchScript (70 MB vs 250 MB)" in memory.reason
    # The memory winner is 2× slower than the fastest: stated as a trade-off, with its interval.
    assert "trade-off: 2.00× [1.93, 2.07] the P99 of TVM" in memory.reason


def test_nothing_is_known_about_engines_in_advance() -> None:
    """Swap the figures between engines and the recommendations follow the figures."""
    a = [_engine("onnx", 1.0, 2000.0, 50.0), _engine("tvm", 2.0, 1000.0, 100.0)]
    b = [_engine("onnx", 2.0, 1000.0, 100.0), _engine("tvm", 1.0, 2000.0, 50.0)]
    assert {r.format for r in recommend(a)} == {"onnx"}
    assert {r.format for r in recommend(b)} == {"tvm"}


def test_failed_and_unmeasured_engines_are_never_recommended() -> None:
    engines = [
        _engine("onnx", 2.0, 1000.0, 70.0),
        _engine("tvm", 0.1, 99999.0, 1.0, status="failed", reason="verification failed"),
        _engine("tensorrt", None, None, None, status="unavailable", reason="TensorRT not installed"),
    ]
    for rec in recommend(engines):
        assert rec.format == "onnx" and rec.runner_up is None
        assert "the only engine measured" in rec.reason
    assert [e.format for e in rank(engines, "latency")] == ["onnx", "tvm", "tensorrt"]
    none = recommend([engines[1], engines[2]])
    assert all(r.format is None and "no engine" in r.reason for r in none)


def test_a_tie_within_the_noise_is_broken_by_the_next_figure_and_says_so() -> None:
    engines = [_engine("onnx", 1.00, 1000.0, 70.0), _engine("tvm", 1.02, 2000.0, 70.0)]
    latency = _by_situation(engines)["latency"]
    assert latency.format == "tvm" and latency.significant
    assert "are within noise (1.02× [0.99, 1.05], ±3%) on P99 at batch 1" in latency.reason
    assert "TVM has 2.00× [1.93, 2.07] the throughput of ONNX Runtime" in latency.reason
    same = [_engine("onnx", 1.00, 1000.0, 70.0), _engine("tvm", 1.00, 1000.0, 70.0)]
    tie = _by_situation(same)["latency"]
    assert not tie.significant
    assert tie.reason.startswith("no engine is measurably better: ONNX Runtime and TVM are within noise")
    assert "throughput does not separate them either" in tie.reason


def test_a_difference_inside_the_noise_is_never_claimed() -> None:
    """A 10% gap with 15% noise round to round: a tie in the rank column and the recommendation."""
    engines = [_engine("onnx", 1.0, 1100.0, 70.0, noise=0.15), _engine("tvm", 1.0, 1000.0, 72.0, noise=0.15)]
    throughput = _by_situation(engines)["throughput"]
    assert not throughput.significant and throughput.ratio_low is not None and throughput.ratio_low < 1
    assert "no engine is measurably better" in throughput.reason
    report = CompareReport(source="s", name="m", hardware={}, settings={"rank_by": "throughput"},
                           engines=rank(engines, "throughput"))  # fmt: skip
    table = compare_table(report)
    assert [row[0] for row in table.rows] == ["1", "=1"]
    assert table.rows[0][4] == "1,100 ± 190"  # median ± half the interval
    memory = _by_situation(engines)["memory"]
    assert not memory.significant and "within 5%" in memory.reason  # 70 vs 72 MB: read, not timed


def test_one_round_has_no_interval_and_claims_nothing() -> None:
    one = [replace(_engine(f, p, q, m), rounds=1, round_figures={"p99_ms_b1": [p], "infer_per_s_b32": [q]},
                   summaries={})
           for f, p, q, m in (("onnx", 1.0, 3000.0, 70.0), ("tvm", 2.0, 1000.0, 400.0))]  # fmt: skip
    latency = _by_situation(one)["latency"]
    assert latency.format == "onnx" and not latency.significant
    assert "one round: no interval" in latency.reason
    assert _by_situation(one)["memory"].significant  # memory needs no rounds


def test_engines_without_paired_rounds_claim_nothing_and_do_not_crash() -> None:
    """Stopped before a round (or an older report): medians only, no verdict, plain positions."""
    engines = [replace(_engine(f, p, q, m), rounds=0, round_figures=r, summaries={})
               for f, p, q, m, r in (("onnx", 1.0, 3000.0, 70.0, {"p99_ms_b1": [], "infer_per_s_b32": []}),
                                     ("tvm", 2.0, 1000.0, 400.0, {}),
                                     ("torchscript", 3.0, 900.0, 250.0, {}))]  # fmt: skip
    recs = _by_situation(engines)
    assert not recs["latency"].significant and not recs["throughput"].significant
    assert "not established (not measured in paired rounds)" in recs["throughput"].reason
    report = CompareReport(source="s", name="m", hardware={}, settings={"rank_by": "throughput"},
                           engines=rank(engines, "throughput"))  # fmt: skip
    assert [row[0] for row in compare_table(report).rows] == ["1", "2", "3"]


def test_shared_rank_is_judged_against_its_first_engine() -> None:
    """A ties B and B ties C, but C is clearly below A: C does not share A's rank."""
    engines = [_engine("onnx", 1.0, 1000.0, 70.0, noise=0.01), _engine("tvm", 1.0, 960.0, 70.0, noise=0.08),
               _engine("torchscript", 1.0, 900.0, 70.0, noise=0.01)]  # fmt: skip
    report = CompareReport(source="s", name="m", hardware={}, settings={"rank_by": "throughput"},
                           engines=rank(engines, "throughput"))  # fmt: skip
    assert [row[0] for row in compare_table(report).rows] == ["1", "=1", "3"]


def test_tie_broken_by_the_next_figure_names_that_figure() -> None:
    engines = [_engine("onnx", 1.00, 1000.0, 70.0), _engine("tvm", 1.02, 2000.0, 70.0)]
    latency = _by_situation(engines)["latency"]
    assert latency.metric == "p99_ms_b1" and latency.decided_by == "infer_per_s_b32"
    assert _by_situation(engines)["throughput"].decided_by == "infer_per_s_b32"


def test_rank_orders_measured_engines_by_the_chosen_figure() -> None:
    engines = [_engine("onnx", 2.0, 1000.0, 70.0), _engine("tvm", 1.0, 1500.0, 400.0),
               _engine("torchscript", 3.0, None, 250.0)]  # fmt: skip
    assert [e.format for e in rank(engines, "throughput")] == ["tvm", "onnx", "torchscript"]
    assert [e.format for e in rank(engines, "latency")] == ["tvm", "onnx", "torchscript"]
    assert [e.format for e in rank(engines, "memory")] == ["onnx", "torchscript", "tvm"]


def test_report_json_round_trip_and_schema() -> None:
    report = CompareReport(
        source="model.onnx", name="m", hardware={"host": describe_host()},
        settings={"batch_size_throughput": 32, "rank_by": "throughput"},
        engines=[_engine("onnx", 2.0, 1000.0, 70.0, max_abs_err=1e-7),
                 _engine("tensorrt", None, None, None, status="unavailable", reason="no TensorRT")],
    )  # fmt: skip
    report.recommendations = recommend(report.engines)
    data = json.loads(json.dumps(report.to_json()))
    assert data["schema"] == SCHEMA == "tritongen.compare/1"
    for key in ("format", "status", "reason", "p99_ms_b1", "infer_per_s_b32", "peak_mem_bytes",
                "first_infer_s", "precision", "max_abs_err"):  # fmt: skip
        assert key in data["engines"][0]
    assert data["hardware"]["host"]["cpus"] >= 1
    again = CompareReport.from_json(data)
    assert again.to_json() == data
    with pytest.raises(ConfigError, match=r"not a tritongen\.compare/1"):
        CompareReport.from_json({"schema": "tritongen.tune/1"})


def test_table_and_markdown_show_every_engine_with_reasons() -> None:
    report = CompareReport(
        source="s", name="m", hardware={}, settings={"batch_size_throughput": 32, "rank_by": "throughput"},
        engines=[_engine("onnx", 2.0, 1000.0, 70.0, max_abs_err=3e-7, memory_kind="cpu_rss"),
                 _engine("tensorrt", None, None, None, status="unavailable", reason="no TensorRT | here")],
    )  # fmt: skip
    table = compare_table(report)
    assert table.headers[4] == "infer/s b32" and table.headers[5] == "memory MB (RSS)"
    assert table.rows[0][:5] == ("1", "ONNX Runtime", "ok", "2.00 ± 0.05", "1,000 ± 23")
    assert table.rows[1][0] == "" and table.rows[1][2] == "unavailable"
    assert table.notes[0] == "TensorRT unavailable: no TensorRT | here"
    assert table.notes[1].startswith("P99 and throughput: median ± half the 95% interval over 5 interleaved")
    markdown = to_markdown(table)
    lines = markdown.splitlines()
    assert lines[2].count("|") == 11 and lines[3].startswith("|---:|:---|")
    assert "no TensorRT \\| here" in markdown  # a pipe in a reason does not break the table


TVM_FACTS: dict[str, Any] = {
    "metadata_version": 2,
    "library": "tvm_model.so",
    "buckets": {
        "dims": {"batch": [1, 8, 32], "dim1": [128]},
        "padded": {"dim1": {"input": "attention_mask", "axis": 1, "alias": "seq"}},
        "strict": False,
        "libraries": [
            {"dims": {"batch": b, "dim1": 128}, "library": f"tvm_bucket_{b}x128.so"} for b in (1, 8, 32)
        ],
    },
    "tuning": {"trials": 1234, "tune_s": 1500.0, "cache_hit": False, "tasks": []},
}


def test_a_tvm_row_says_which_buckets_were_built_and_tuned(tmp_path: Path) -> None:
    assert build_note("tvm", TVM_FACTS) == "buckets 1,8,32 × 128, tuned 25.0 min / 1,234 trials"
    assert build_note("tvm", {**TVM_FACTS, "tuning": None}) == "buckets 1,8,32 × 128, untuned"
    assert build_note("tvm", {"library": "tvm_model.so", "buckets": None, "tuning": None}) == "symbolic only"
    assert build_note("onnx", TVM_FACTS) is None
    model_dir = tmp_path / "m_tvm"
    model_dir.mkdir()
    (model_dir / METADATA_FILE).write_text(json.dumps({"engine": TVM_FACTS}), encoding="utf-8")
    report = CompareReport(
        source="s", name="m", hardware={}, settings={"batch_size_throughput": 32, "rank_by": "throughput"},
        engines=[_engine("onnx", 2.0, 1000.0, 70.0), _engine("tvm", 2.5, 800.0, 90.0)],
    )  # fmt: skip
    apply_metadata(report, tmp_path)  # the onnx model has no directory: unavailable
    tvm = report.engine("m_tvm")
    assert tvm.build == "buckets 1,8,32 × 128, tuned 25.0 min / 1,234 trials"
    assert report.to_json()["engines"][1]["build"] == tvm.build
    assert CompareReport.from_json(report.to_json()).engine("m_tvm").build == tvm.build
    row = next(r for r in compare_table(report).rows if r[1].startswith("TVM"))
    assert row[1] == "TVM (buckets 1,8,32 × 128, tuned 25.0 min / 1,234 trials)"


def test_request_shapes_fill_dynamic_dims_from_seq_after_explicit_shapes() -> None:
    interface = ModelInterface(
        name="enc", max_batch_size=32,
        inputs=(InputSpec("input_ids", "INT64", (-1,)), InputSpec("mask", "INT64", (-1,)),
                InputSpec("image", "FP32", (3, 4))),
        outputs=("out",),
    )  # fmt: skip
    settings = MeasureSettings(seq=64, shapes={"mask": (8,)})
    assert request_shapes(interface, settings) == {"mask": (8,), "input_ids": (64,)}
    assert request_shapes(interface, replace(settings, seq=None, shapes={})) == {}
    with pytest.raises(ConfigError, match="does not have"):
        request_shapes(interface, replace(settings, shapes={"nope": (1,)}))


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"batch_size_throughput": 0}, "--batch-size-throughput"),
        ({"seq": 0}, "--seq"),
        ({"concurrency_levels": (1, 0)}, "--concurrency"),
        ({"duration_s": 0.0}, "--duration"),
        ({"window_s": 0.0}, "--window"),
    ],
)
def test_settings_reject_impossible_values(changes: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        replace(MeasureSettings(), **changes).check()


def test_each_run_takes_the_window_and_cap_given_and_else_the_default_rule() -> None:
    server = ServerHandle("127.0.0.1:8000", "127.0.0.1:8001", "http://127.0.0.1:8002/metrics")
    default = MeasureSettings(duration_s=4.0)
    spec = engine_spec(server, default, "m", 1, 1, {})
    assert spec.window_s is None and spec.effective_max_duration_s == 6.0  # 1.5 x duration
    assert "window_s" not in default.to_json() and "max_duration_s" not in default.to_json()
    given = replace(default, window_s=0.5, max_duration_s=5.0)
    spec = engine_spec(server, given, "m", 1, 1, {})
    assert spec.effective_window_s == 0.5 and spec.effective_max_duration_s == 5.0
    assert given.to_json()["window_s"] == 0.5 and given.to_json()["max_duration_s"] == 5.0


def test_backend_processes_are_found_by_their_model_file(tmp_path: Path) -> None:
    """A process named like the stub, serving <repo>/<model>/1/model.py, is that model's."""
    stub = tmp_path / "triton_python_backend_stub"
    stub.symlink_to("/bin/sh")  # runs its first argument as a script: argv stays the stub's
    model_file = tmp_path / "repo" / "mlp_onnx" / "1" / "model.py"
    model_file.parent.mkdir(parents=True)
    model_file.write_text("sleep 30\n")
    code = f"import subprocess; subprocess.run([{str(stub)!r}, {str(model_file)!r}, 'x'])"
    parent = subprocess.Popen([sys.executable, "-c", code])
    try:
        deadline = time.monotonic() + 10
        found = []
        while time.monotonic() < deadline and not found:
            found = backend_processes(parent.pid, "mlp_onnx")
            time.sleep(0.05)
        assert len(found) == 1
        assert backend_processes(parent.pid, "other_model") == []
    finally:
        for child in backend_processes(parent.pid, "mlp_onnx"):
            child.kill()
        parent.kill()
        parent.wait()
    assert backend_processes(parent.pid, "mlp_onnx") == []  # the server is gone: nothing, no error


def test_server_gpus_and_local_pid_lookup() -> None:
    text = (
        "# HELP nv_gpu_memory_total_bytes GPU total memory, in bytes\n"
        "# TYPE nv_gpu_memory_total_bytes gauge\n"
        'nv_gpu_memory_total_bytes{gpu_uuid="GPU-1"} 8.0e+10\n'
    )
    assert server_gpus(text) == [{"uuid": "GPU-1", "memory_bytes": 80_000_000_000}]
    assert server_gpus("") == []
    assert (
        ServerAddress.parse("example.com:8000").listening_pid() is None
    )  # not this machine: no /proc figures
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        assert ServerAddress.parse(f"127.0.0.1:{port}").listening_pid() in (os.getpid(), None)


def test_recommendations_weigh_speed_against_drift() -> None:
    fp32 = _engine("onnx", 2.0, 1000.0, 70.0)
    headline = "cosine 0.9911 (min 0.9736)"
    dynamic = _engine("onnx", 1.5, 1800.0, 60.0, shift=1, drift=0.13, drift_headline=headline)
    dynamic = replace(dynamic, model="m_onnx_int8_dynamic", precision="int8-dynamic")
    static = _engine("onnx", 1.0, 2500.0, 50.0, shift=3, drift=0.5)
    static = replace(static, model="m_onnx_int8", precision="int8")
    assert dynamic.label == "ONNX Runtime int8 dynamic" and static.reduced and not fp32.reduced
    throughput = {r.situation: r for r in recommend([fp32, dynamic, static], max_drift=0.2)}["throughput"]
    assert throughput.model == "m_onnx_int8_dynamic"
    assert "int8-dynamic drifts from FP32: cosine 0.9911 (min 0.9736)" in throughput.reason
    assert "1.80× [1.74, 1.86] the throughput of ONNX Runtime (1,800 ± 41 infer/s vs 1,000 ± 23 infer/s)" in (
        throughput.reason
    )
    assert "best FP32 engine" not in throughput.reason  # the runner-up is that engine: said once
    assert "not considered: ONNX Runtime int8 (drift 0.5 > 0.2)" in throughput.reason
    # Without a drift limit the fastest wins, and its drift is still spelled out.
    unlimited = {r.situation: r for r in recommend([fp32, dynamic, static])}["throughput"]
    assert unlimited.model == "m_onnx_int8" and "int8, max error" not in unlimited.reason
    assert "int8 drifts from FP32: rel RMS 0.5" in unlimited.reason
    assert "2.50× [2.41, 2.60] the throughput of the best FP32 engine, ONNX Runtime (1,000 ± 23 infer/s)" in (
        unlimited.reason
    )


def test_drift_comes_from_the_precision_report() -> None:
    engine = EngineResult(format="onnx", model="m_onnx_int8", precision="int8")
    engine.apply_precision(read_precision_report(
        {"accuracy": {"samples": 8, "outputs": [
            {"name": "emb", "task": "embedding", "rel_rms_err": 0.1, "max_abs_err": 0.02,
             "cosine_mean": 0.995, "cosine_min": 0.99, "top1_agreement": 0.9},
            {"name": "logits", "task": "classifier", "rel_rms_err": 0.2, "max_abs_err": 0.3,
             "top1_agreement": 0.75}]}}
    ))  # fmt: skip
    assert engine.drift == 0.2
    assert engine.drift_headline == "emb cosine 0.9950 (min 0.9900); logits top-1 75.0%"
    table = compare_table(CompareReport(source="s", name="m", hardware={}, settings={}, engines=[engine]))
    assert table.rows[0][-1] == engine.drift_headline


def test_the_rounds_reported_are_the_rounds_measured_not_the_cap() -> None:
    stopping = {
        "settings": {"max_rounds": 12}, "rule": "until decided, at most 12", "stopped": "every pair decided",
        "rounds": 5, "confidence": 0.95, "busy_rounds_repeated": [], "pairs": [],
    }  # fmt: skip
    report = CompareReport(
        source="s", name="m", hardware={},
        settings={"batch_size_throughput": 32, "rank_by": "throughput", "rounds": 12, "stopping": stopping},
        engines=[_engine("onnx", 2.0, 1000.0, 70.0), _engine("tvm", 1.0, 1500.0, 400.0)],
    )  # fmt: skip
    from tritongen.report.compare_tables import rounds_fact
    from tritongen.report.html import compare_section

    fact = rounds_fact(report, report.compare_settings())
    assert fact.startswith("5 interleaved round(s) per figure (--rounds auto, at most 12)")
    assert ("rounds", fact) in compare_section(report, "compare.json").facts
    assert "over 5 interleaved" in compare_table(report).notes[0]
    report.engines[1].rounds = 4  # an engine that joined later rests on fewer rounds
    assert rounds_fact(report, report.compare_settings()).startswith("4-5 interleaved round(s)")
    report.settings.pop("stopping")
    assert "at most" not in rounds_fact(report, report.compare_settings())
