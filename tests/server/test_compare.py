"""``tritongen compare`` on the real embedded server: conversion, measurement, ranking, outputs, faults."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest
from typer.testing import CliRunner

from tritongen.cli.main import app
from tritongen.client.repository import RepositoryControl
from tritongen.compare.recommend import CRITERIA
from tritongen.compare.result import CompareReport
from tritongen.metrics.hardware import local_gpus
from tritongen.report.compare_tables import compare_table
from tritongen.server.local import LocalTritonServer

from support.cli_output import error_line
from support.loads import QUICK_RUNS
from support.processes import descendants, gone, named, shm_regions

pytestmark = pytest.mark.slow
runner = CliRunner()
FAST = [*QUICK_RUNS, "--concurrency", "1,2", "--rounds", "2"]
"""What these tests check is the comparison's mechanics, not which engine wins."""


def _run(*args: str | Path) -> tuple[int, str, str]:
    result = runner.invoke(app, [str(a) for a in args], env={"COLUMNS": "200"})
    return result.exit_code, result.stdout, result.stderr


def _servers_under(path: Path) -> list[psutil.Process]:
    """tritonserver processes serving a repository below ``path``."""
    found = []
    for process in psutil.process_iter(["cmdline"]):
        argv = process.info["cmdline"] or []
        if argv and argv[0].endswith("tritonserver") and any(str(path) in a for a in argv):
            found.append(process)
    return found


def _check_measured(engine: dict[str, Any], rounds: int = 2) -> None:
    assert engine["status"] == "ok" and engine["reason"] is None, engine["reason"]
    assert 0 < engine["p50_ms_b1"] <= engine["p99_ms_b1"]
    assert engine["batch_size_throughput"] == 32 and engine["concurrency_b32"] in (1, 2)
    # Batches of 32 move more inferences per second than single requests.
    assert engine["infer_per_s_b32"] > 2 * engine["infer_per_s_b1"] > 0
    if not local_gpus():  # with a GPU, the server's GPU memory is the figure
        assert engine["memory_kind"] == "cpu_rss" and engine["peak_mem_bytes"] > 20e6
        assert engine["peak_rss_bytes"] == engine["peak_mem_bytes"] and engine["peak_gpu_mem_bytes"] is None
    assert 0 < engine["load_s"] <= engine["first_infer_s"] < 120
    assert engine["precision"] == "fp32"
    assert engine["errors"] == 0
    assert all(r["status"] == "ok" for r in engine["latency_runs"])
    # The ramp picks the concurrency; the deciding figures come from two interleaved rounds.
    figures = {r["figure"] for r in engine["latency_runs"]}
    assert figures == {"ramp", "p99_ms_b1", "infer_per_s_b32"}
    b1 = [r for r in engine["latency_runs"] if r["figure"] == "p99_ms_b1"]
    assert [r["round"] for r in b1] == list(range(1, rounds + 1)) and all(r["batch_size"] == 1 for r in b1)
    assert engine["rounds"] == rounds and len(engine["round_figures"]["p99_ms_b1"]) == rounds
    for metric in ("p99_ms_b1", "infer_per_s_b32"):
        summary = engine["summaries"][metric]
        assert summary["median"] == engine[metric] and summary["rounds"] == rounds
        assert summary["ci_low"] <= summary["median"] <= summary["ci_high"]


def test_compare_converts_serves_and_measures_every_engine(
    example_models: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "work"
    # --rounds auto from its first look (3 rounds) capped there: exactly 3 rounds, decided or not
    # (--busy-repeats 0: the tests beside this one would have every round measured again).
    code, stdout, stderr = _run(
        "compare", example_models["mlp"], *FAST[:-2], "--rounds", "auto", "--max-rounds", "3",
        "--busy-repeats", "0", "--out", out, "--json", tmp_path / "c.json",
        "--markdown", tmp_path / "c.md", "--html", tmp_path / "c.html",
    )  # fmt: skip
    assert code == 0, stderr
    doc = json.loads((tmp_path / "c.json").read_text())
    assert doc == json.loads((out / "compare.json").read_text())
    assert doc["schema"] == "tritongen.compare/1" and doc["status"] == "ok" and doc["name"] == "mlp"
    assert doc["source"] == str(example_models["mlp"])
    engines = {e["format"]: e for e in doc["engines"]}
    assert set(engines) == {"onnx", "tvm", "torchscript", "tensorrt"}
    for fmt in ("onnx", "tvm"):
        _check_measured(engines[fmt], rounds=3)
        assert engines[fmt]["max_abs_err"] <= 1e-4 and engines[fmt]["tolerance"] == {
            "atol": 1e-4,
            "rtol": 1e-3,
            "rms": None,
        }
    # What cannot be built here is listed with the reason, not silently dropped.
    assert engines["torchscript"]["status"] == "unavailable"
    assert "TorchScript is made from a PyTorch module" in engines["torchscript"]["reason"]
    assert engines["tensorrt"]["status"] == "unavailable" and "TensorRT" in engines["tensorrt"]["reason"]
    # Ranked by throughput: measured engines first, best first.
    ranked = [e["infer_per_s_b32"] for e in doc["engines"] if e["status"] == "ok"]
    assert ranked == sorted(ranked, reverse=True) and doc["engines"][-1]["status"] == "unavailable"
    situations = {r["situation"]: r for r in doc["recommendations"]}
    assert set(situations) == {"latency", "throughput", "memory"}
    for rec in situations.values():
        best = engines[rec["format"]]
        assert rec["value"] == best[rec["metric"]] and rec["runner_up"] in engines
        others = [e[rec["metric"]] for e in engines.values() if e["status"] == "ok"]
        top = max(others) if rec["situation"] == "throughput" else min(others)
        if rec["value"] != top:
            # Not the best median: the two are a tie that the next figure broke, said so.
            assert "within noise" in rec["reason"] or (
                not CRITERIA[rec["situation"]].timed and "within 5%" in rec["reason"]
            )
        if rec["significant"] and rec["ratio_low"] is not None:
            assert rec["ratio_low"] > 1  # claimed only when the paired interval excludes 1
        if not rec["significant"]:
            assert "no engine is measurably better" in rec["reason"]
    assert doc["hardware"]["host"]["cpus"] >= 1 and doc["hardware"]["server"]["triton_version"]
    # Each pair of engines judged on P99 and throughput, at the level the stopping rule spent.
    stopping = doc["settings"]["stopping"]
    assert stopping["max_rounds"] == 3 and stopping["rounds"] == 3 and stopping["margin"] == 0.05
    assert stopping["stopped"] in ("every pair decided", "--max-rounds 3 reached")
    # ranked by throughput: its pairs decide the rounds; the P99 pair is reported with its interval
    assert [p["pair"].split(":")[0] for p in stopping["pairs"]] == ["throughput"]
    assert [p["pair"].split(":")[0] for p in stopping["other_pairs"]] == ["P99 at batch 1"]
    assert stopping["decided_on"] == ["throughput"]
    assert all(p["decision"] in ("different", "equivalent", "undecided") for p in stopping["pairs"])
    assert stopping["confidence"] == 0.95 and "--rounds auto: 3 round(s)" in stdout  # one look: all of it
    # The models were written into the working repository, verified.
    assert (out / "model_repository" / "mlp_onnx" / "config.pbtxt").is_file()
    assert "ONNX Runtime" in stdout and "recommendations" in stdout and "latency-bound" in stdout
    markdown = (tmp_path / "c.md").read_text()
    assert "| 1 | " in markdown and "memory-bound edge deployment" in markdown
    html = (tmp_path / "c.html").read_text()
    assert "<table>" in html and html.count("data:image/png;base64,") == 2
    assert 'src="http' not in html and 'href="http' not in html
    assert not _servers_under(out)


def test_compare_measures_an_existing_deployment_and_leaves_it_as_found(
    triton_server: LocalTritonServer, served_repository: Path, example_models: dict[str, Path], tmp_path: Path
) -> None:
    control = RepositoryControl(triton_server.http_url)
    try:
        before = {m: s for m, s in control.index().items() if s == "READY"}
        code, _, stderr = _run(
            "compare", example_models["mlp"], "--name", "mlp", "--url", triton_server.http_url,
            "--metrics-url", triton_server.metrics_url, "--repo", served_repository, *FAST,
            "--out", tmp_path, "--rank-by", "latency",
        )  # fmt: skip
        assert code == 0, stderr + "\nthe server's log ends:\n" + "\n".join(triton_server.log_tail(40))
        after = {m: s for m, s in control.index().items() if s == "READY"}
    finally:
        control.close()
    assert after == before  # every model that was loaded is loaded again
    doc = json.loads((tmp_path / "compare.json").read_text())
    assert doc["settings"]["rank_by"] == "latency" and doc["settings"]["url"] == triton_server.http_url
    engines = {e["format"]: e for e in doc["engines"]}
    _check_measured(engines["onnx"])
    # Precision and error come from the model's metadata in the repository.
    assert engines["onnx"]["max_abs_err"] is not None
    # The server runs on this machine: its backend processes' memory was read from /proc.
    assert doc["hardware"]["server"]["local_pid"] is True
    assert (
        engines["tvm"]["status"] == "unavailable" and "no model directory mlp_tvm" in engines["tvm"]["reason"]
    )


def test_ctrl_c_stops_the_comparison_and_keeps_what_was_measured(
    example_models: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "work"
    cli = subprocess.Popen(
        [sys.executable, "-m", "tritongen", "compare", str(example_models["mlp"]), "--formats", "onnx",
         "--duration", "30s", "--warmup", "0.5s", "--out", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not _servers_under(out):
            assert time.monotonic() < deadline and cli.poll() is None, "the comparison never started serving"
            time.sleep(0.2)
        deadline = time.monotonic() + 120
        while not named(descendants(cli.pid), "locust"):  # inside the first load test
            assert time.monotonic() < deadline and cli.poll() is None, (
                "the comparison never started a load test"
            )
            time.sleep(0.2)
        family = descendants(cli.pid)
        assert named(family, "tritonserver")
        cli.send_signal(signal.SIGINT)
        code = cli.wait(timeout=60)
    finally:
        if cli.poll() is None:
            cli.kill()
    stderr = cli.stderr.read() if cli.stderr else ""
    assert code == 130, stderr
    assert "partial results written" in stderr
    doc = json.loads((out / "compare.json").read_text())
    assert doc["status"] == "interrupted"
    onnx = doc["engines"][0]
    assert onnx["first_infer_s"] > 0 and onnx["reason"] == "interrupted while it was measured"
    assert not _servers_under(out)
    assert gone(family) == [], "the server, its stubs and Locust are stopped"
    assert shm_regions(cli.pid) == []


def test_compare_refuses_unusable_input_with_one_line(tmp_path: Path) -> None:
    code, _, stderr = _run("compare", "x.onnx", "--repo", tmp_path / "missing", "--formats", "onnx")
    assert code == 1 and "does not exist" in error_line(stderr)
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(b"not a model")
    code, _, stderr = _run("compare", broken, "--out", tmp_path / "w")
    assert code == 1 and "broken.onnx" in error_line(stderr)
    assert not (tmp_path / "w" / "model_repository" / "broken_onnx").exists()
    code, _, stderr = _run("compare", broken, "--rank-by", "speed")
    assert code == 1 and "--rank-by 'speed' is unknown" in error_line(stderr)
    code, _, stderr = _run("compare", broken, "--formats", "onnx,caffe")
    assert code == 1 and "'caffe' is not supported" in error_line(stderr)
    code, _, stderr = _run("compare", broken, "--rounds", "0", "--out", tmp_path / "r")
    assert code == 1 and "--rounds 0 must be at least 1" in error_line(stderr)
    code, _, stderr = _run("compare", broken, "--confidence", "1.5", "--out", tmp_path / "r")
    assert code == 1 and "--confidence 1.5 is not a level between 0 and 1" in error_line(stderr)
    assert not (tmp_path / "r").exists()  # refused before anything is written


def test_precision_variants_are_rows_with_their_drift(
    example_models: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "work"
    code, stdout, stderr = _run(
        "compare", example_models["mlp"], "--formats", "onnx", *FAST, "--out", out,
        "--precision", "fp32,int8-dynamic,int8", "--calibration-data", "random", "--max-drift", "0.5",
        "--html", tmp_path / "c.html",
    )  # fmt: skip
    assert code == 0, stderr
    doc = json.loads((out / "compare.json").read_text())
    engines = {e["model"]: e for e in doc["engines"]}
    assert set(engines) == {"mlp_onnx", "mlp_onnx_int8_dynamic", "mlp_onnx_int8"}
    assert doc["settings"]["precisions"] == ["fp32", "int8-dynamic", "int8"]
    for model in ("mlp_onnx_int8_dynamic", "mlp_onnx_int8"):
        engine = engines[model]
        assert engine["status"] == "ok" and engine["infer_per_s_b32"] > 0 and engine["p99_ms_b1"] > 0
        assert 0 < engine["drift"] < 0.5 and engine["drift_headline"].startswith("top-1")
        assert engine["accuracy"]["accuracy"]["samples"] > 0
    assert engines["mlp_onnx"]["drift"] is None and engines["mlp_onnx_int8"]["precision"] == "int8"
    assert engines["mlp_onnx_int8"]["accuracy"]["calibration"]["random"] is True
    assert "accuracy against FP32" in stdout and "dynamic" in stdout  # the wide table wraps cells
    # Whichever engine wins, the recommendation names it by model; a reduced one states its drift.
    for rec in doc["recommendations"]:
        assert rec["model"] in engines
        if rec["model"] != "mlp_onnx" and rec["significant"]:
            assert "drifts from FP32: top-1" in rec["reason"]
            assert "ONNX Runtime (" in rec["reason"]  # weighed against the FP32 engine
    html = (tmp_path / "c.html").read_text()
    assert "accuracy against FP32" in html and "calibrated on random noise" in html


def test_compare_replays_a_trace_against_every_engine_in_each_round(
    triton_server: LocalTritonServer, served_repository: Path, example_models: dict[str, Path], tmp_path: Path
) -> None:
    trace = tmp_path / "monday.jsonl"
    trace.write_text(
        "".join(json.dumps({"time_s": n / 80, "batch_size": 1 + n % 3}) + "\n" for n in range(80))
    )
    code, stdout, stderr = _run(
        "compare", example_models["mlp"], "--name", "mlp", "--url", triton_server.http_url,
        "--metrics-url", triton_server.metrics_url, "--repo", served_repository, "--formats", "onnx",
        *FAST, "--out", tmp_path / "out", "--trace", trace, "--rank-by", "trace",
    )  # fmt: skip
    assert code == 0, stderr
    doc = json.loads((tmp_path / "out" / "compare.json").read_text())
    assert doc["settings"]["trace"] == "trace monday.jsonl (tritongen): 80 requests over 1 s"
    (engine,) = (e for e in doc["engines"] if e["format"] == "onnx")
    replays = [r for r in engine["latency_runs"] if r["figure"] == "p99_ms_trace"]
    assert len(replays) == 2 and all(
        r["requests"] == 80 and r["errors"] == 0 for r in replays
    )  # one per round
    assert engine["p99_ms_trace"] > 0 and len(engine["round_figures"]["p99_ms_trace"]) == 2
    assert "recorded in --trace" in stdout  # its recommendation
    table = compare_table(CompareReport.from_json(doc))
    assert table.headers[5] == "P99 ms trace" and table.rows[0][5] != "–"


def test_ranking_by_a_trace_needs_one(tmp_path: Path) -> None:
    code, _, stderr = _run("compare", "x.onnx", "--rank-by", "trace", "--out", tmp_path / "w")
    assert code == 1 and "--rank-by trace needs --trace" in stderr
