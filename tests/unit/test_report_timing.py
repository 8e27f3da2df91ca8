"""A worker sends each window as soon as it can be drained, not up to a quarter window later.

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
from tritonload.messages import next_report_s
from tritonload.recording import DRAIN_GRACE_S, Recorder

cases = []
for window_s, t0, now in [(1.0, 100.0, 100.5), (1.0, 100.0, 100.99), (1.0, 100.0, 101.05),
                          (0.25, 10.0, 10.2), (4.0, 0.0, 3.0), (1.0, 100.0, 101.1015),
                          (1.0, 100.0, 101.0 + DRAIN_GRACE_S - 0.04)]:
    recorder = Recorder(t0, window_s)
    wait = next_report_s(recorder, now)
    cases.append({"window_s": window_s, "t0": t0, "now": now, "wait": wait})
print(json.dumps({"grace": DRAIN_GRACE_S, "cases": cases}))
"""


def test_the_next_report_comes_as_the_running_window_can_be_drained() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(ROOT / "loadtests")], capture_output=True, text=True, check=True
    )
    result = json.loads(done.stdout)
    grace = result["grace"]
    for case in result["cases"]:
        wait, now, t0, window_s = case["wait"], case["now"], case["t0"], case["window_s"]
        assert 0 < wait <= min(0.25, window_s / 4) + 1e-9, case
        # the report after ``wait`` drains every window that ended DRAIN_GRACE_S before it
        after = now + wait
        running_then = (after - grace - t0) // window_s
        running_now = (now - grace - t0) // window_s
        assert running_then >= running_now, case
        # and it is not later than just past the next drain time
        next_drain = t0 + (running_now + 1) * window_s + grace
        assert after <= next_drain + 0.003, case
    # 0.04 s before window 1 of a 1 s window can be drained: wait those 0.04 s (and a little)
    wait_near = result["cases"][-1]["wait"]
    assert abs(wait_near - (0.04 + 0.002)) < 1e-6
