"""The load generator's check of responses against expected outputs: decoding, tolerance, first mismatch."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import numpy as np
import pytest
from tritongen.loadtests.tritonload.validation import Received, first_difference, http_outputs, step_checks

from support.paths import ROOT

ROWS = [0, 1]


def _floats(*values: float) -> Received:
    return Received("FP32", [len(values)], raw=np.array(values, np.float32).tobytes())


def test_floats_agree_within_the_tolerance_and_not_beyond() -> None:
    expected = np.array([1.0, 2.0], np.float32)
    assert first_difference(expected, _floats(1.0, 2.00001), ROWS, 1e-6, 1e-5) is None
    mismatch = first_difference(expected, _floats(1.0, 2.001), ROWS, 1e-6, 1e-5)
    assert mismatch is not None and mismatch["element"] == 1
    assert mismatch["expected"] == "2" and mismatch["received"].startswith("2.00099")


def test_nan_agrees_with_nan_and_integers_compare_exactly() -> None:
    assert first_difference(np.array([np.nan], np.float32), _floats(float("nan")), ROWS, 0, 0) is None
    got = Received("INT64", [3], raw=np.array([1, 2, 4], np.int64).tobytes())
    mismatch = first_difference(np.array([1, 2, 3], np.int64), got, ROWS, 1.0, 1.0)
    assert mismatch is not None and (mismatch["element"], mismatch["expected"], mismatch["received"]) == (
        2,
        "3",
        "4",
    )


def test_a_batched_mismatch_names_its_row_entry_and_element() -> None:
    expected = np.array([[1, 2, 3], [4, 5, 6]], np.float32)  # rows of entries 7 and 3
    mismatch = first_difference(expected, _floats(1, 2, 3, 4, 9, 6), [7, 3], 0, 0)
    assert mismatch is not None and (mismatch["entry"], mismatch["element"]) == (3, 1)


def test_an_element_count_that_differs_is_a_mismatch() -> None:
    mismatch = first_difference(np.array([1.0, 2.0], np.float32), _floats(1.0), ROWS, 0, 0)
    assert mismatch is not None and mismatch["element"] == -1
    assert mismatch["expected"] == "2 elements" and mismatch["received"].startswith("1 elements")


def test_strings_compare_as_bytes() -> None:
    raw = b"".join(len(s).to_bytes(4, "little") + s for s in (b"cat", b"dog"))
    expected = np.empty(2, dtype=object)
    expected[:] = [b"cat", b"cow"]
    mismatch = first_difference(expected, Received("BYTES", [2], raw=raw), ROWS, 0, 0)
    assert mismatch is not None and (mismatch["expected"], mismatch["received"]) == ('"cow"', '"dog"')


def _http_response(outputs: dict[str, np.ndarray[Any, Any]], binary: bool = True) -> bytes:
    tensors, raw = [], b""
    for name, array in outputs.items():
        tensor: dict[str, Any] = {"name": name, "datatype": "FP32", "shape": list(array.shape)}
        if binary:
            tensor["parameters"] = {"binary_data_size": array.nbytes}
            raw += array.tobytes()
        else:
            tensor["data"] = array.tolist()
        tensors.append(tensor)
    header = json.dumps({"model_name": "m", "outputs": tensors}).encode()
    body = header + raw
    head = "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
    if binary:
        head += f"Inference-Header-Content-Length: {len(header)}\r\n"
    return (head + f"Content-Length: {len(body)}\r\n\r\n").encode() + body


@pytest.mark.parametrize("binary", [True, False])
def test_http_outputs_read_binary_and_json_responses(binary: bool) -> None:
    outputs = http_outputs(_http_response({"a": np.array([[1.5, 2.5]], np.float32)}, binary))
    values = first_difference(np.array([1.5, 2.5], np.float32), outputs["a"], ROWS, 0, 0)
    assert values is None and outputs["a"].shape == [1, 2]


VALIDATOR_PROBE = r"""
import json, sys, time
import numpy as np

sys.path.insert(0, sys.argv[1])  # the locustfile's folder, as Locust puts it on sys.path
from tritonload.recording import Recorder
from tritonload.request_data import ENTRIES_KEY
from tritonload.validation import Validator, step_checks

responses = json.loads(sys.argv[2])
recorder = Recorder(time.time(), 60.0)
step = {"x": np.ones((1, 2), np.float32), "expected:a": np.array([1.5, 2.5], np.float32)}
checks = step_checks([{**step, ENTRIES_KEY: np.array([4], np.int64)}, {"x": np.ones((1, 2))}])
assert checks is not None and checks[1] is None
validator = Validator(checks, (0.0, 0.0), recorder)
for text in responses["step0"]:  # a repeated good one matches by its bytes alone
    error = validator.check_http(0, text.encode("latin-1"))
    recorder.record(time.perf_counter() - 0.001, time.perf_counter(), error)
assert validator.check_http(1, responses["step0"][-1].encode("latin-1")) is None  # nothing expected there
print(json.dumps(recorder.drain(everything=True)))
"""


def test_validator_counts_matches_and_keeps_the_first_mismatch_per_output() -> None:
    good = _http_response({"a": np.array([1.5, 2.5], np.float32)}).decode("latin-1")
    bad = _http_response({"a": np.array([1.5, 3.5], np.float32)}).decode("latin-1")
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            VALIDATOR_PROBE,
            str(ROOT / "loadtests"),
            json.dumps({"step0": [good, good, bad, bad]}),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    (window,) = json.loads(done.stdout.splitlines()[-1])
    assert window["errors"] == {"validation": 2} and window["counts"]["validation_matched"] == 2
    assert window["counts"]["mismatched/a"] == 2
    first = window["mismatches"]["a"]
    assert (first["entry"], first["element"], first["expected"], first["received"]) == (4, 1, "2.5", "3.5")


def test_no_validator_without_expected_outputs() -> None:
    assert step_checks([{"x": np.ones(2)}]) is None
