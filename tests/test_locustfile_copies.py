"""The locustfile stands alone (it runs where tritongen is not installed); its copies equal the package's.

The locustfile is imported in a subprocess, since importing Locust monkey-patches the
whole interpreter; it reports its constants, its window records and what its ``.npz``
reader makes of a set of files, good and malformed, and the package reads the same.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import zipfile
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tritongen.intervals import DEFAULT_CONFIDENCE
from tritongen.io import loadgen_shared as shared
from tritongen.io.arrays import ArrayFileMissingError, ArrayFileUnreadableError, read_npz
from tritongen.io.loadgen_shared import STEPS_KEY, STRING_ALPHABET, SUMMED_FIGURES, WindowLine
from tritongen.loadtest.result import LoadTestReport, RunResult
from tritongen.loadtest.windows import WindowLog
from tritongen.sources.signature import TRITON_TO_NUMPY

ROOT = Path(__file__).resolve().parents[1]
LOCUSTFILE = ROOT / "loadtests" / "locustfile.py"

Probe = tuple[dict[str, Any], Path, list[Path]]
"""What the locustfile reported, its windows file, and the array files it read."""

PROBE = r"""
import hashlib, importlib.util, json, os, sys, types

spec = importlib.util.spec_from_file_location("tritongen_locustfile", sys.argv[1])
lf = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = lf
spec.loader.exec_module(lf)
import numpy as np


def outcome(path):
    try:
        arrays = lf.read_npz(path, "the file")
    except lf.NpzReadError as e:
        return [e.kind, str(e)]
    return ["ok", {k: [v.dtype.str, list(v.shape), hashlib.sha256(v.tobytes()).hexdigest()]
                   for k, v in arrays.items()}]


recorder = lf.Recorder(t0=0.0, window_s=1.0)
now = 1000.0 - recorder.wall_offset  # perf_counter time of wall-clock second 1000
for latency_us in (150, 2_500, 40_000):
    recorder.record(now, now + latency_us / 1e6, None)
recorder.record(now, now, "http_503")
recorder.sent(now, 0.002)
recorder.hold(now)
collector = lf.Collector(sys.argv[2])
run = types.SimpleNamespace(runner=None, parsed_options=types.SimpleNamespace(triton_t0=0.0))
collector.receive(run, types.SimpleNamespace(node_id="local", data=lf.WindowMessage(
    worker="w1", windows=recorder.drain(everything=True), t0=0.0, users=1)))
options = lf.TritonOptions(**{o.name.replace("-", "_"): o.default for o in lf.OPTIONS} | {"model": "m"})
run = lf.run_result(collector, options, 2, lf.ServerFigures(None, None, None, None, rows=1))
with open(sys.argv[2], "a") as out:  # the master's last line
    out.write(json.dumps({lf.SUMMARY_KEY: run, "at": 0.0}) + "\n")
fixtures = json.loads(open(os.environ["PROBE_FIXTURES"]).read())
print(json.dumps({
    "document": lf.report_document(options, "127.0.0.1:8000", run),
    "report": {
        "schema": lf.SCHEMA, "latency": list(lf.LATENCY_KEYS), "percentiles": lf.PERCENTILES,
        "phases": list(lf.SERVER_KEYS), "metrics": lf.UTILISATION_METRICS,
        "summed": sorted(lf.SUMMED_FIGURES), "stability": [lf.STABILITY_WINDOWS, lf.STABILITY_TOLERANCE],
        "confidence": lf.CONFIDENCE,
        "summary_key": lf.SUMMARY_KEY,
    },
    "parsed": [
        lf.parse_metrics(fixtures["metrics"]), lf.utilisation(lf.parse_metric_lines(fixtures["metrics"]))
    ],
    "breakdown": lf.server_breakdown(*(lf.stats_counters(s) for s in fixtures["stats"])),
    "message": lf.MESSAGE,
    "bounds": [lf.LOWEST_US, lf.HIGHEST_US, lf.DIGITS],
    "steps": [lf.STEPS_KEY, lf.STRING_ALPHABET.decode()],
    "dtypes": {name: np.dtype(t).str for name, t in lf.NUMPY_DTYPES.items()},
    "record": sorted(lf.WindowLine.__annotations__),
    "read": {path: outcome(path) for path in sys.argv[3:]},
}))
"""


METRICS_TEXT = """# HELP nv_gpu_utilization GPU utilization rate [0.0 - 1.0)
# TYPE nv_gpu_utilization gauge
nv_gpu_utilization{gpu_uuid="GPU-a"} 0.5
nv_gpu_utilization{gpu_uuid="GPU-b"} 0.25
# TYPE nv_gpu_memory_used_bytes gauge
nv_gpu_memory_used_bytes{gpu_uuid="GPU-a"} 1000
nv_gpu_memory_used_bytes{gpu_uuid="GPU-b",note="a } and a space"} 24 1700000000000
# TYPE nv_cpu_utilization gauge
nv_cpu_utilization 0.75
# TYPE nv_cpu_memory_used_bytes gauge
nv_cpu_memory_used_bytes 123456789
# TYPE nv_inference_count counter
nv_inference_count{model="m",version="1"} 42
"""
"""Triton's utilisation metrics of two GPUs, labels with a brace and a space, a timestamp."""
STATS: list[list[dict[str, Any]]] = [
    [{"inference_count": 10, "execution_count": 4, "inference_stats": {
        "success": {"count": 8, "ns": 8000}, "queue": {"count": 8, "ns": 16000},
        "compute_input": {"count": 8, "ns": 800}, "compute_infer": {"count": 8, "ns": 80000},
        "compute_output": {"count": 8, "ns": 400}}}],
    [{"inference_count": "70", "execution_count": "24", "inference_stats": {
        "success": {"count": "48", "ns": "48000"}, "queue": {"count": "48", "ns": "116000"},
        "compute_input": {"count": "48", "ns": "4800"}, "compute_infer": {"count": "48", "ns": "480000"},
        "compute_output": {"count": "48", "ns": "2400"}}}],
]  # fmt: skip
"""Two snapshots of one model's statistics (the second as gRPC's JSON writes 64-bit counters)."""


def _malformed_files(folder: Path) -> list[Path]:
    """Array files good and bad, as users and the runner may hand them over."""
    good = folder / "good.npz"
    np.savez(
        good,
        x=np.arange(12, dtype=np.float32).reshape(3, 4),
        ids=np.ones((3, 5), np.int64),
        mask=np.array([True, False]),
        text=np.array([b"ab", b"c"]),
    )
    np.savez(folder / "empty.npz")
    np.savez(folder / "pickled.npz", x=np.array([{"a": 1}], dtype=object))
    np.save(folder / "single.npy", np.zeros((2, 2), np.float32))
    (folder / "junk.npz").write_bytes(b"not numpy at all")
    (folder / "zero.npz").write_bytes(b"")
    (folder / "broken.npz").write_bytes(good.read_bytes()[:40])
    with zipfile.ZipFile(folder / "other.npz", "w") as archive:
        archive.writestr("readme.txt", "no arrays here")
    (folder / "folder.npz").mkdir()
    names = ["good", "empty", "pickled", "junk", "zero", "broken", "other", "folder", "missing"]
    return [*(folder / f"{name}.npz" for name in names), folder / "single.npy"]


@pytest.fixture(scope="module")
def probe(tmp_path_factory: pytest.TempPathFactory) -> Probe:
    folder = tmp_path_factory.mktemp("copies")
    files = _malformed_files(folder)
    results = folder / "windows.jsonl"
    fixtures = folder / "fixtures.json"
    fixtures.write_text(json.dumps({"metrics": METRICS_TEXT, "stats": STATS}))
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(LOCUSTFILE), str(results), *map(str, files)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        env={**os.environ, "PROBE_FIXTURES": str(fixtures)},
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1]), results, files


def _package_outcome(path: Path) -> list[Any]:
    try:
        arrays = read_npz(path, "the file")
    except ArrayFileMissingError as e:
        return ["missing", e.message]
    except ArrayFileUnreadableError as e:
        return ["unreadable", e.message]
    return [
        "ok",
        {k: [v.dtype.str, list(v.shape), hashlib.sha256(v.tobytes()).hexdigest()] for k, v in arrays.items()},
    ]


def test_histogram_bounds_and_precision(probe: Probe) -> None:
    assert probe[0]["bounds"] == [shared.LOWEST_US, shared.HIGHEST_US, shared.DIGITS]


def test_request_steps_marker_and_string_alphabet(probe: Probe) -> None:
    assert probe[0]["steps"] == [STEPS_KEY, STRING_ALPHABET.decode()]


def test_dtype_table(probe: Probe) -> None:
    from tritonclient.utils import triton_to_np_dtype

    numeric = {name: t for name, t in TRITON_TO_NUMPY.items() if t is not np.object_}
    package = {name.removeprefix("TYPE_"): np.dtype(t).str for name, t in numeric.items()}
    assert probe[0]["dtypes"] == package
    assert {name: np.dtype(triton_to_np_dtype(name)).str for name in package} == package


def test_window_records_are_what_the_package_reads(probe: Probe) -> None:
    assert probe[0]["message"] == "tritongen_window"
    assert probe[0]["record"] == sorted(WindowLine.__annotations__)


def test_windows_written_by_the_locustfile_read_back(probe: Probe) -> None:
    log = WindowLog(probe[1])
    log.poll()
    (window,) = log.windows.values()
    assert window.index == 1000 and window.workers == {"w1"}
    assert (window.ok, window.errors) == (3, {"http_503": 1})
    assert (window.sent, window.late, window.held_back) == (1, 1, 1)
    assert window.histogram.get_max_value() == pytest.approx(40_000, rel=0.001)
    assert window.histogram.get_min_value() == pytest.approx(150, abs=1)


def test_npz_readers_agree_on_good_and_malformed_files(probe: Probe) -> None:
    read, files = probe[0]["read"], probe[2]
    outcomes = {path.name: _package_outcome(path) for path in files}
    assert {Path(path).name: result for path, result in read.items()} == outcomes
    assert outcomes["good.npz"][0] == "ok" and outcomes["empty.npz"] == ["ok", {}]
    assert outcomes["missing.npz"][0] == "missing"
    unreadable = ["pickled", "junk", "zero", "broken", "other", "folder"]
    unreadable = [f"{name}.npz" for name in unreadable] + ["single.npy"]
    assert all(outcomes[name][0] == "unreadable" for name in unreadable)


def test_report_constants_are_the_packages(probe: Probe) -> None:
    from tritongen.loadtest.result import LATENCY_KEYS, SCHEMA, SERVER_KEYS
    from tritongen.metrics.prometheus import UTILISATION_METRICS
    from tritongen.metrics.statistics import PHASES

    assert probe[0]["report"] == {
        "schema": SCHEMA, "latency": list(LATENCY_KEYS), "percentiles": shared.PERCENTILES,
        "phases": list(SERVER_KEYS), "metrics": UTILISATION_METRICS, "summed": sorted(SUMMED_FIGURES),
        "stability": [shared.STABILITY_WINDOWS, shared.STABILITY_TOLERANCE],
        "confidence": DEFAULT_CONFIDENCE, "summary_key": shared.SUMMARY_KEY,
    }  # fmt: skip
    assert list(PHASES) == list(SERVER_KEYS)


def test_the_report_document_is_what_the_package_reads(probe: Probe) -> None:
    document = probe[0]["document"]
    report = LoadTestReport.from_json(document)
    assert set(document["runs"][0]) == {f.name for f in fields(RunResult)}
    assert asdict(report.runs[0]) == document["runs"][0]
    assert document["levels"] == report.to_json()["levels"]
    (run,) = report.runs
    assert (run.requests, run.errors, run.errors_by_kind) == (4, 1, {"http_503": 1})
    assert run.latency_us is not None and run.latency_us["max"] == pytest.approx(40_000, rel=0.001)
    assert run.workers["w1"]["requests"] == 4 and run.concurrency == 2


def test_metrics_parsers_agree_with_the_package(probe: Probe) -> None:
    from tritongen.metrics.prometheus import parse_metrics

    package = parse_metrics(METRICS_TEXT)
    assert package == {
        "gpu_util": 0.375,
        "gpu_mem_bytes": 1024.0,
        "cpu_util": 0.75,
        "cpu_mem_bytes": 123456789.0,
    }
    with_client, fallback = probe[0]["parsed"]
    assert with_client == package and fallback == package


def test_server_breakdown_agrees_with_the_package(probe: Probe) -> None:
    from tritongen.metrics.statistics import StatsSnapshot, breakdown

    before, after = (StatsSnapshot.from_json(snapshot[0]) for snapshot in STATS)
    expected = breakdown(before, after)
    assert probe[0]["breakdown"] == [expected.server_us(), expected.avg_batch]
