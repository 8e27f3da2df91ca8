"""The locustfile stands alone (it runs where tritongen is not installed); its copies equal the package's.

The locustfile is imported in a subprocess, since importing Locust monkey-patches the
whole interpreter; it reports its constants, its window records and what its ``.npz``
reader makes of a set of files, good and malformed, and the package reads the same.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tritongen.client.inputs import STRING_ALPHABET
from tritongen.io.arrays import STEPS_KEY, ArrayFileMissingError, ArrayFileUnreadableError, read_npz
from tritongen.loadtest import windows
from tritongen.loadtest.windows import WindowLog, WindowReport
from tritongen.sources.signature import TRITON_TO_NUMPY

ROOT = Path(__file__).resolve().parents[1]
LOCUSTFILE = ROOT / "loadtests" / "locustfile.py"

Probe = tuple[dict[str, Any], Path, list[Path]]
"""What the locustfile reported, its windows file, and the array files it read."""

PROBE = r"""
import hashlib, importlib.util, json, sys, types

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
print(json.dumps({
    "message": lf.MESSAGE,
    "bounds": [lf.LOWEST_US, lf.HIGHEST_US, lf.DIGITS],
    "steps": [lf.STEPS_KEY, lf.STRING_ALPHABET.decode()],
    "dtypes": {name: np.dtype(t).str for name, t in lf.NUMPY_DTYPES.items()},
    "record": sorted(lf.WindowLine.__annotations__),
    "read": {path: outcome(path) for path in sys.argv[3:]},
}))
"""


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
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(LOCUSTFILE), str(results), *map(str, files)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
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
    assert probe[0]["bounds"] == [windows.LOWEST_US, windows.HIGHEST_US, windows.DIGITS]


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
    assert probe[0]["record"] == sorted(WindowReport.__annotations__)


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
