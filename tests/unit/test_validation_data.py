"""Expected outputs (``validation_data`` in JSON, ``expected:NAME`` in an .npz): read, laid out, refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tritongen.client.input_json import InputDataError
from tritongen.client.inputs import InputSpec, ModelInterface
from tritongen.client.validation_data import expected_outputs
from tritongen.io.arrays import read_steps, write_steps
from tritongen.io.loadgen_shared import (
    ENTRIES_KEY,
    EXPECTED_PREFIX,
    decode_tolerance,
    read_npz,
    split_step,
)

BATCHED = ModelInterface(
    name="mlp",
    max_batch_size=8,
    inputs=(InputSpec("x", "FP32", (2,)),),
    outputs=("y", "label"),
    output_specs=(InputSpec("y", "FP32", (2,)), InputSpec("label", "BYTES", (1,))),
)
PLAIN = ModelInterface(
    name="counter",
    max_batch_size=0,
    inputs=(InputSpec("x", "INT32", (-1,)),),
    outputs=("y",),
    output_specs=(InputSpec("y", "INT32", (-1, 2)),),
)


def _write(tmp_path: Path, document: Any) -> Path:
    path = tmp_path / "data.json"
    path.write_text(json.dumps(document))
    return path


def _refusal(tmp_path: Path, document: Any, interface: ModelInterface = BATCHED, batch: int = 1) -> str:
    with pytest.raises(InputDataError) as caught:
        expected_outputs(_write(tmp_path, document), interface, batch)
    return caught.value.one_line()


def test_entries_become_steps_with_their_rows_entries(tmp_path: Path) -> None:
    document = {
        "data": [{"x": [1, 2]}, {"x": [3, 4]}, {"x": [5, 6]}],
        "validation_data": [{"y": [2, 4]}, {"y": [6, 8], "label": ["b"]}, {"y": {"content": [10, 12]}}],
    }
    with pytest.raises(InputDataError, match="name different outputs"):
        expected_outputs(_write(tmp_path, document), BATCHED, 2)
    document["validation_data"][1] = {"y": [6, 8]}
    expected = expected_outputs(_write(tmp_path, document), BATCHED, 2)
    assert expected is not None
    assert expected.labels == ["data[0]", "data[1]", "data[2]"] and expected.outputs == ("y",)
    last = expected.steps[2]  # entries 2 and 0, stacked as perf_analyzer stacks them
    assert last[ENTRIES_KEY].tolist() == [2, 0]
    np.testing.assert_array_equal(last[EXPECTED_PREFIX + "y"], np.array([[10, 12], [2, 4]], np.float32))


def test_data_without_validation_checks_nothing(tmp_path: Path) -> None:
    assert expected_outputs(_write(tmp_path, {"data": [{"x": [1, 2]}]}), BATCHED) is None
    assert expected_outputs("random", BATCHED) is None


def test_streams_align_step_by_step(tmp_path: Path) -> None:
    document = {
        "data": [[{"x": [1]}, {"x": [1, 2]}], [{"x": [3]}]],
        "validation_data": [[{"y": [1, 1]}, {"y": {"b64": "AQAAAAIAAAADAAAABAAAAA=="}}], [{}]],
    }
    expected = expected_outputs(_write(tmp_path, document), PLAIN)
    assert expected is not None
    assert expected.labels == ["data[0][0]", "data[0][1]", "data[1][0]"]
    assert expected.steps[1][EXPECTED_PREFIX + "y"].tolist() == [1, 2, 3, 4]
    assert expected.steps[2] == {}  # an empty entry: that step is not checked


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"data": [{"x": [1, 2]}], "validation_data": {"y": [1, 2]}}, "is not a list of entries"),
        (
            {"data": [{"x": [1, 2]}, {"x": [1, 2]}], "validation_data": [{"y": [1, 2]}]},
            '"validation_data" has 1 entries, "data" 2',
        ),
        ({"data": [{"x": [1, 2]}], "validation_data": [[{"y": [1, 2]}]]}, "is a plain list of entries"),
        ({"data": [{"x": [1, 2]}], "validation_data": [{"z": [1]}]}, "gives output 'z', which model 'mlp'"),
        ({"data": [{"x": [1, 2]}], "validation_data": [{"y": [1, 2, 3]}]}, "has 3 values, but output 'y'"),
        ({"data": [{"x": [1, 2]}], "validation_data": [{"label": [1]}]}, "takes strings"),
        ({"data": [{"x": [1, 2]}], "validation_data": [{"y": {"b64": "@@"}}]}, "malformed base64"),
    ],
)
def test_validation_data_that_does_not_fit_is_refused(tmp_path: Path, document: Any, message: str) -> None:
    line = _refusal(tmp_path, document)
    assert message in line and "\n" not in line


def test_stream_lengths_must_agree(tmp_path: Path) -> None:
    document = {"data": [[{"x": [1]}, {"x": [2]}]], "validation_data": [[{"y": [1, 1]}]]}
    line = _refusal(tmp_path, document, PLAIN)
    assert 'the streams of "validation_data" have [1] entries, those of "data" [2]' in line


def test_dynamic_output_takes_a_multiple_of_its_fixed_dims(tmp_path: Path) -> None:
    document = {"data": [{"x": [1]}], "validation_data": [{"y": [1, 2, 3]}]}
    assert "it holds a multiple of 2" in _refusal(tmp_path, document, PLAIN)


def test_npz_carries_expected_outputs_by_name(tmp_path: Path) -> None:
    path = tmp_path / "data.npz"
    np.savez(
        path, x=np.ones((3, 2), np.float32), **{"expected:y": np.arange(6, dtype=np.float64).reshape(3, 2)}
    )
    expected = expected_outputs(path, BATCHED)
    assert expected is not None and expected.labels == ["row 0", "row 1", "row 2"]
    step = expected.steps[0]
    assert step[EXPECTED_PREFIX + "y"].dtype == np.float32 and step[ENTRIES_KEY].tolist() == [0, 1, 2]
    np.savez(path, x=np.ones((3, 2), np.float32), **{"expected:nope": np.ones((3, 2))})
    with pytest.raises(InputDataError, match="has no output 'nope'"):
        expected_outputs(path, BATCHED)


def test_steps_file_keeps_expected_outputs_and_the_tolerance(tmp_path: Path) -> None:
    step = {"x": np.ones((1, 2), np.float32), "expected:label": np.array([[b"a"]], dtype=object)}
    step[ENTRIES_KEY] = np.array([0], np.int64)
    path = tmp_path / "steps.npz"
    write_steps(path, [step], tolerance=(1e-3, 1e-2))
    inputs, expected, entries = split_step(read_steps(path, "steps")[0])
    assert list(inputs) == ["x"] and expected["label"].tolist() == [[b"a"]]
    assert entries is not None and entries.tolist() == [0]
    assert decode_tolerance(read_npz(path, "steps")) == (1e-3, 1e-2)
