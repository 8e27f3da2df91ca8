"""What the locustfile's package writes, tritongen reads; where both compute a figure, they agree.

The definitions both use are written once (``loadtests/tritonload/shared.py``, reached by
tritongen through ``tritongen.io.loadgen_shared``); what is left to compare is behaviour:
the windows and report the load generator writes, read by the package's readers, and the
figures both compute their own way (metrics text, the statistics API). The load generator
runs in a subprocess, since importing Locust monkey-patches the whole interpreter, with its
folder on ``sys.path`` as Locust puts it.
"""

from __future__ import annotations

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

from tritongen.io import loadgen_shared as shared
from tritongen.io.arrays import ArrayFileMissingError, ArrayFileUnreadableError, read_npz
from tritongen.loadtest.result import LoadTestReport, RunResult
from tritongen.loadtest.windows import WindowLog
from tritongen.sources.signature import TRITON_TO_NUMPY

from support.paths import ROOT

LOADTESTS = ROOT / "loadtests"

Probe = tuple[dict[str, Any], Path]
"""What the load generator reported, and its windows file."""

PROBE = r"""
import json, os, sys, types

sys.path.insert(0, sys.argv[1])  # the locustfile's folder, as Locust puts it on sys.path
from tritonload import options as opts, recording, report, utilisation
from tritonload.shared import SUMMARY_KEY, WindowMessage

recorder = recording.Recorder(t0=0.0, window_s=1.0)
now = 1000.0 - recorder.wall_offset  # perf_counter time of wall-clock second 1000
for latency_us in (150, 2_500, 40_000):
    recorder.record(now, now + latency_us / 1e6, None)
recorder.record(now, now, "http_503")
recorder.sent(now, 0.002)
recorder.hold(now)
collector = recording.Collector(sys.argv[2])
run = types.SimpleNamespace(runner=None, parsed_options=types.SimpleNamespace(triton_t0=0.0))
collector.receive(run, types.SimpleNamespace(node_id="local", data=WindowMessage(
    worker="w1", windows=recorder.drain(everything=True), t0=0.0, users=1)))
defaults = {o.name.replace("-", "_"): o.default for o in opts.OPTIONS}
options = opts.TritonOptions(**defaults | {"model": "m"})
run = report.run_result(collector, options, 2, report.ServerFigures(None, None, None, None, rows=1))
with open(sys.argv[2], "a") as out:  # the master's last line
    out.write(json.dumps({SUMMARY_KEY: run, "at": 0.0}) + "\n")
fixtures = json.loads(open(os.environ["PROBE_FIXTURES"]).read())
print(json.dumps({
    "document": report.report_document(options, "127.0.0.1:8000", run),
    "parsed": [
        utilisation.parse_metrics(fixtures["metrics"]),
        utilisation.utilisation(utilisation.parse_metric_lines(fixtures["metrics"])),
    ],
    "breakdown": report.server_breakdown(*(report.stats_counters(s) for s in fixtures["stats"])),
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


@pytest.fixture(scope="module")
def probe(tmp_path_factory: pytest.TempPathFactory) -> Probe:
    folder = tmp_path_factory.mktemp("agrees")
    results = folder / "windows.jsonl"
    fixtures = folder / "fixtures.json"
    fixtures.write_text(json.dumps({"metrics": METRICS_TEXT, "stats": STATS}))
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(LOADTESTS), str(results)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        env={**os.environ, "PROBE_FIXTURES": str(fixtures)},
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1]), results


def test_the_shared_definitions_import_nothing_heavy() -> None:
    """tritongen imports them in processes that must never load Locust (it patches the interpreter)."""
    code = (
        "import sys, tritongen.io.loadgen_shared; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'locust', 'gevent', 'grpc', 'hdrh', "
        "'tritonclient', 'prometheus_client', 'urllib3'}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == "[]"


def test_the_dtype_table_is_tritonclients() -> None:
    from tritonclient.utils import triton_to_np_dtype

    assert {name: np.dtype(triton_to_np_dtype(name)) for name in shared.NUMPY_DTYPES} == {
        name: np.dtype(t) for name, t in shared.NUMPY_DTYPES.items()
    }
    assert {f"TYPE_{name}" for name in shared.NUMPY_DTYPES} | {"TYPE_STRING"} == set(TRITON_TO_NUMPY)


def test_windows_written_by_the_load_generator_read_back(probe: Probe) -> None:
    log = WindowLog(probe[1])
    log.poll()
    (window,) = log.windows.values()
    assert window.index == 1000 and window.workers == {"w1"}
    assert (window.ok, window.errors) == (3, {"http_503": 1})
    assert (window.sent, window.late, window.held_back) == (1, 1, 1)
    assert window.histogram.get_max_value() == pytest.approx(40_000, rel=0.001)
    assert window.histogram.get_min_value() == pytest.approx(150, abs=1)
    assert window.users == {"w1": 1}


def test_the_report_document_is_what_the_package_reads(probe: Probe) -> None:
    document = probe[0]["document"]
    report = LoadTestReport.from_json(document)
    assert document["schema"] == shared.SCHEMA
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


def _outcome(read: Any, path: Path) -> list[Any]:
    try:
        arrays = read(path, "the file")
    except shared.NpzReadError as e:
        return [e.kind, e.message]
    except ArrayFileMissingError as e:
        return ["missing", e.message]
    except ArrayFileUnreadableError as e:
        return ["unreadable", e.message]
    return ["ok", {k: [v.dtype.str, list(v.shape), v.tobytes().hex()] for k, v in arrays.items()}]


def test_the_package_reads_npz_files_as_the_load_generator_does(tmp_path: Path) -> None:
    """One reader (``shared.read_npz``); the package's wrapper gives its errors a hint, same words."""
    files = _malformed_files(tmp_path)
    package = {path.name: _outcome(read_npz, path) for path in files}
    assert package == {path.name: _outcome(shared.read_npz, path) for path in files}
    assert package["good.npz"][0] == "ok" and package["empty.npz"] == ["ok", {}]
    assert package["missing.npz"][0] == "missing"
    unreadable = ["pickled", "junk", "zero", "broken", "other", "folder"]
    unreadable = [f"{name}.npz" for name in unreadable] + ["single.npy"]
    assert all(package[name][0] == "unreadable" for name in unreadable)
