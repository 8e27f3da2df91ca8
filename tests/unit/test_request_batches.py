"""The HTTP engine's batches of requests give the figures of recording each request on its own.

The load generator's package is imported in a subprocess (importing Locust patches the
interpreter), with its folder on ``sys.path`` as Locust puts it.
"""

from __future__ import annotations

import json
import subprocess
import sys

from support.paths import ROOT

PROBE = r"""
import json, sys

sys.path.insert(0, sys.argv[1])  # the locustfile's folder, as Locust puts it on sys.path
import numpy as np
from hdrh.histogram import HdrHistogram
from tritonload.batches import RequestBatch, add_values
from tritonload.locust_stats import StatsFeed
from tritonload.recording import Recorder
from tritonload.shared import CLIENT_SPLIT, DIGITS, HIGHEST_US, KERNEL_LATENCY, LOWEST_US

rng = np.random.default_rng(7)
values = np.concatenate([
    rng.integers(LOWEST_US, 5_000, 3_000),
    np.exp(rng.uniform(0, np.log(HIGHEST_US), 3_000)).astype(np.int64).clip(LOWEST_US, HIGHEST_US),
    [LOWEST_US, HIGHEST_US, 2_047, 2_048, 4_095, 4_096],
])
one_by_one, at_once = HdrHistogram(LOWEST_US, HIGHEST_US, DIGITS), HdrHistogram(LOWEST_US, HIGHEST_US, DIGITS)
for value in values.tolist():
    one_by_one.record_value(value)
add_values(at_once, values[:1_000])
add_values(at_once, values[1_000:])

each, batched = Recorder(0.0, 1.0, StatsFeed("POST", "m")), Recorder(0.0, 1.0, StatsFeed("POST", "m"))
batched.wall_offset = each.wall_offset
start = 1000.25 - each.wall_offset  # perf_counter time of wall-clock second 1000.25
batch = RequestBatch()
for n in range(500):
    t0 = start + n * 0.0037
    written, first, end = t0 + 1e-5 * (n % 7), t0 + 0.0004 * (n % 11), t0 + 0.0005 * (n % 13) + 1e-6
    each.defer_split(written - t0, first - written, end - first)
    each.record(t0, end, None, 100 + n)
    if end >= batch.boundary:
        batched.record_batch(batch)
        batch.boundary = batched.boundary_after(end)
    batch.marks += (t0, written, first, end, 100 + n, float("nan"))
batched.record_batch(batch)

stamped, kernel_batch = Recorder(0.0, 1.0), RequestBatch()
for n in range(200):  # every other request has the kernel's receive time: 250 µs before it was complete
    t0 = start + n * 0.001
    kernel_batch.marks += (t0, t0, t0, t0 + 0.001, 10, (t0 + 0.00075) if n % 2 else float("nan"))
stamped.record_batch(kernel_batch)
kernel = [w.extra.get(KERNEL_LATENCY) for w in stamped.windows.values()]

def windows(recorder):
    return [{k: v for k, v in w.items() if k != "final"} for w in recorder.drain(everything=True)]

def tallies(recorder):
    seconds = recorder.feed.seconds
    return {s: [sorted(t.times_ms.items()), t.content_length, t.last] for s, t in seconds.items()}

print(json.dumps({
    "histograms_equal": one_by_one.encode() == at_once.encode(),
    "counts_equal": list(one_by_one.counts) == list(at_once.counts),
    "extremes": [one_by_one.min_value == at_once.min_value, one_by_one.max_value == at_once.max_value],
    "windows_equal": windows(each) == windows(batched),
    "tallies_equal": tallies(each) == tallies(batched),
    "seconds": len(tallies(each)),
    "kernel_counts": [h.get_total_count() if h else 0 for h in kernel],
    "kernel_p50": [h.get_value_at_percentile(50) for h in kernel if h],
    "all_counts": sum(w.hist.get_total_count() for w in stamped.windows.values()),
    "split": all(name in w["counts"] for w in windows(batched) for name in CLIENT_SPLIT),
}))
"""


def _probe() -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(ROOT / "loadtests")], capture_output=True, text=True, check=True
    )
    result: dict[str, object] = json.loads(done.stdout)
    return result


def test_a_batch_of_values_fills_a_histogram_as_recording_them_one_by_one() -> None:
    probe = _probe()
    assert probe["histograms_equal"] and probe["counts_equal"]
    assert probe["extremes"] == [True, True]


def test_batched_requests_give_the_windows_and_locust_figures_of_requests_recorded_one_by_one() -> None:
    probe = _probe()
    assert probe["windows_equal"]
    assert probe["tallies_equal"]
    assert probe["seconds"] == 3  # the requests span three seconds and three windows
    assert probe["split"]


def test_a_batch_keeps_the_kernel_latency_of_the_requests_the_kernel_stamped() -> None:
    probe = _probe()
    assert probe["all_counts"] == 200
    assert sum(probe["kernel_counts"]) == 100  # the unstamped half is not in it
    assert all(abs(p50 - 750) <= 1 for p50 in probe["kernel_p50"])
