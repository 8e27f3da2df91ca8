"""BF16 in the load generator: random data are normal floats, saved data (``|V2``) go out as BF16, and a
user that cannot start says why in one line instead of leaving the run to its time cap.

The locustfile is imported in a subprocess (importing Locust patches the interpreter).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
from tritongen.loadtests.tritonload.options import OPTIONS, TritonOptions
from tritongen.loadtests.tritonload.payloads import http_body, random_arrays, read_steps, wire_datatype
from tritongen.loadtests.tritonload.request_data import bf16_from_floats, tensor_byte_size
from tritongen.loadtests.tritonload.shared import WORKER_FAILURE

from tritongen.client.inputs import random_array
from tritongen.io.arrays import write_steps

from support.paths import ROOT


def test_random_bf16_inputs_are_normal_floats_on_both_sides() -> None:
    meta = {"inputs": [{"name": "INPUT0", "datatype": "BF16", "shape": [-1, 64]}], "outputs": []}
    defaults = {option.name.replace("-", "_"): option.default for option in OPTIONS}
    options = TritonOptions(**{**defaults, "batch_size": 4, "seed": 1})
    (array,) = random_arrays(meta, 8, options).values()  # type: ignore[arg-type]
    values = array.view(ml_dtypes.bfloat16).astype(np.float32)
    assert array.shape == (4, 64) and wire_datatype(array) == "BF16"
    assert (
        len(np.unique(values)) > 100 and -0.5 < float(values.mean()) < 0.5 and 0.7 < float(values.std()) < 1.3
    )
    client = random_array("BF16", [4, 64], np.random.default_rng(0)).astype(np.float32)
    assert len(np.unique(client)) > 100  # not 0 and 1
    assert tensor_byte_size("BF16", [4, 64]) == 512


def test_saved_bf16_data_read_back_as_v2_go_out_as_bf16_bytes(tmp_path: Path) -> None:
    sent = np.array([[1.5, -2.25, 3.0e-3]], dtype=ml_dtypes.bfloat16)
    path = tmp_path / "steps.npz"
    write_steps(path, [{"INPUT0": sent}])
    (step,) = read_steps(str(path), "inputs")
    read = step["INPUT0"]
    assert read.dtype.str == "|V2" and wire_datatype(read) == "BF16"
    body, headers = http_body({"INPUT0": read}, ["OUTPUT0"])
    head = int(headers["Inference-Header-Content-Length"])
    assert body[head:] == sent.tobytes() and b'"datatype":"BF16"' in body[:head]
    rounded = bf16_from_floats(np.array([1.0, 1.00390625, -0.1], dtype=np.float32))
    np.testing.assert_array_equal(
        rounded.view(ml_dtypes.bfloat16),
        np.array([1.0, 1.00390625, -0.1], dtype=np.float32).astype(ml_dtypes.bfloat16),
    )


PROBE = r"""
import sys

sys.path.insert(0, sys.argv[1])  # the locustfile's folder, as Locust puts it on sys.path
import locustfile
from tritonload.workers import WorkerFailed


class Runner:
    def quit(self):
        print("runner quit", flush=True)


class Environment:
    runner = Runner()
    parsed_options = object()  # no --triton-* options: reading them fails in the user's start
    process_exit_code = 0
    events = None


user = locustfile.TritonUser.__new__(locustfile.TritonUser)
user.environment = Environment()
try:
    user.on_start()
except WorkerFailed:
    print("raised", flush=True)
import gevent
gevent.sleep(0.1)
"""


def test_a_user_that_cannot_start_says_why_in_one_line_and_quits() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(ROOT / "loadtests")], capture_output=True, text=True, timeout=120
    )
    lines = done.stdout.splitlines()
    failures = [line for line in lines if line.startswith(WORKER_FAILURE)]
    assert len(failures) == 1 and "a user cannot start: AttributeError" in failures[0], (
        done.stdout + done.stderr
    )
    assert "raised" in lines and "runner quit" in lines
