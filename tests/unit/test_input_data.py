"""Request data without a server: perf_analyzer's input-data JSON, .npz steps with strings, fixed values.

The locustfile's side (reading the steps the package writes, encoding strings as BYTES) runs
in a subprocess, since importing Locust monkey-patches the interpreter.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tritongen.client.input_data import InputPlan, input_steps, parse_input_data, parse_input_values
from tritongen.client.input_json import InputDataError, json_streams
from tritongen.client.inputs import InputSpec, ModelInterface, interface_from_metadata
from tritongen.errors import ConfigError, SourceError
from tritongen.io.arrays import ArrayDtypeError, ArrayFileUnreadableError, read_steps, write_steps
from tritongen.io.loadgen_shared import STEPS_KEY, STRING_ALPHABET

from support.paths import ROOT

LOADTESTS = ROOT / "loadtests"
"""The locustfile's folder: its package ``tritonload`` imports from there."""

MLP = ModelInterface("mlp", 8, (InputSpec("x", "FP32", (4,)),), ("y",))
TEXT = ModelInterface(
    "text",
    4,
    (InputSpec("text", "BYTES", (-1,)), InputSpec("tag", "BYTES", (1,)), InputSpec("scale", "FP32", (1,))),
    ("length", "echo"),
)
IMAGE = ModelInterface(
    "image", 0, (InputSpec("pixels", "UINT8", (-1, -1)), InputSpec("flag", "BOOL", (1,))), ("out",)
)
IDS = ModelInterface("ids", 0, (InputSpec("ids", "INT64", (2,)),), ("out",))


def _json(tmp_path: Path, document: Any, name: str = "data.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(document) if not isinstance(document, str) else document)
    return path


def _steps(path: Path, interface: ModelInterface, **kwargs: Any) -> list[dict[str, np.ndarray]]:
    values = kwargs.pop("values", {})
    return input_steps(interface, InputPlan(source=path, values=values), **kwargs)


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def _bytes_b64(items: list[bytes]) -> str:
    return _b64(b"".join(len(item).to_bytes(4, "little") + item for item in items))


# -- the JSON format: every value form ------------------------------------------------------


def test_flat_lists_one_step_per_entry_with_the_batch_dim_added(tmp_path: Path) -> None:
    path = _json(tmp_path, {"data": [{"x": [1, 2, 3, 4]}, {"x": [5, 6, 7, 8]}]})
    steps = _steps(path, MLP)
    assert len(steps) == 2
    assert steps[0]["x"].dtype == np.float32 and steps[0]["x"].shape == (1, 4)
    np.testing.assert_array_equal(steps[1]["x"], [[5, 6, 7, 8]])


def test_a_batch_stacks_consecutive_entries_wrapping_around(tmp_path: Path) -> None:
    entries = [{"x": [float(k)] * 4} for k in range(3)]
    steps = _steps(_json(tmp_path, {"data": entries}), MLP, batch_size=2)
    assert [step["x"][:, 0].tolist() for step in steps] == [[0, 1], [1, 2], [2, 0]]
    (one,) = _steps(_json(tmp_path, {"data": entries[:1]}, "one.json"), MLP, batch_size=3)
    assert one["x"].shape == (3, 4)


def test_content_and_shape_fill_dynamic_dims_and_override_the_shape_option(tmp_path: Path) -> None:
    path = _json(
        tmp_path,
        {
            "data": [
                {"pixels": {"content": list(range(6)), "shape": [2, 3]}, "flag": [True]},
                {"pixels": {"content": list(range(6))}, "flag": [0]},
                {"pixels": [[1, 2], [3, 4], [5, 6]], "flag": {"content": [1]}},
            ]
        },
    )
    steps = _steps(path, IMAGE, shapes={"pixels": (3, 2)})
    assert [step["pixels"].shape for step in steps] == [(2, 3), (3, 2), (3, 2)]
    assert steps[0]["pixels"].dtype == np.uint8 and steps[0]["flag"].dtype == np.bool_
    assert [bool(step["flag"][0]) for step in steps] == [True, False, True]
    np.testing.assert_array_equal(steps[2]["pixels"], [[1, 2], [3, 4], [5, 6]])


def test_b64_values_are_little_endian_raw_bytes(tmp_path: Path) -> None:
    values = np.array([1.5, -2.0, 3.25, 4.0], dtype="<f4")
    ids = np.array([7, -9], dtype="<i8")
    path = _json(
        tmp_path,
        {
            "data": [
                {"x": {"b64": _b64(values.tobytes())}},
                {"x": {"content": {"b64": _b64(values.tobytes())}}},
            ]
        },
    )
    steps = _steps(path, MLP)
    for step in steps:
        np.testing.assert_array_equal(step["x"], values.reshape(1, 4))
    (step,) = _steps(_json(tmp_path, {"data": [{"ids": {"b64": _b64(ids.tobytes())}}]}, "ids.json"), IDS)
    assert step["ids"].dtype == np.int64 and step["ids"].tolist() == [7, -9]


JPEG = ModelInterface(
    "jpeg", 0, (InputSpec("image", "BYTES", (1,)), InputSpec("raw", "UINT8", (-1,))), ("out",)
)
JPEG_BYTES = (
    bytes.fromhex("ffd8ffe000104a46494600010100000100010000ffdb004300") + bytes(range(256)) + b"\xff\xd9"
)
"""The start of a JPEG (SOI, a JFIF APP0 segment, a quantisation table's head), a body, its end marker."""


def _unpadded_lines(raw: bytes, width: int = 76) -> str:
    """Base64 as some encoders write it: no ``=`` padding, broken into lines."""
    text = base64.b64encode(raw).decode().rstrip("=")
    return "\n".join(text[i : i + width] for i in range(0, len(text), width))


def test_b64_without_padding_and_with_line_breaks(tmp_path: Path) -> None:
    assert len(JPEG_BYTES) % 3  # its base64 has padding, left out here
    serialized = len(JPEG_BYTES).to_bytes(4, "little") + JPEG_BYTES  # a BYTES tensor of one element
    image, raw = _unpadded_lines(serialized), _unpadded_lines(JPEG_BYTES)
    assert "=" not in image + raw and "\n" in image and "\n" in raw
    document = {
        "data": [{"image": {"b64": image}, "raw": {"content": {"b64": raw}, "shape": [len(JPEG_BYTES)]}}]
    }
    (step,) = _steps(_json(tmp_path, document), JPEG)
    assert step["image"].tolist() == [JPEG_BYTES]
    assert step["raw"].dtype == np.uint8 and step["raw"].tobytes() == JPEG_BYTES
    broken = {"data": [{"image": {"b64": image[:-1] + "!"}, "raw": {"b64": raw}}]}
    with pytest.raises(InputDataError, match="malformed base64"):
        _steps(_json(tmp_path, broken, "broken.json"), JPEG)


def test_strings_as_lists_and_as_length_prefixed_b64(tmp_path: Path) -> None:
    path = _json(
        tmp_path,
        {
            "data": [
                {"text": ["héllo", "", "a b"], "tag": ["one"], "scale": [1]},
                {"text": {"b64": _bytes_b64([b"\x00bin\x00", b"xy"])}, "tag": ["two"], "scale": [2.5]},
                {"text": {"content": ["p", "q", "r", "s"], "shape": [4]}, "tag": ["three"], "scale": [0]},
            ]
        },
    )
    steps = _steps(path, TEXT)
    assert steps[0]["text"].dtype == np.object_
    assert steps[0]["text"].tolist() == [["héllo".encode(), b"", b"a b"]]
    assert steps[1]["text"].tolist() == [[b"\x00bin\x00", b"xy"]]  # NUL bytes kept
    assert steps[2]["text"].shape == (1, 4)
    assert [step["tag"].tolist() for step in steps] == [[[b"one"]], [[b"two"]], [[b"three"]]]
    assert steps[1]["scale"].dtype == np.float32 and steps[1]["scale"].tolist() == [[2.5]]


def test_base64_may_be_broken_over_lines_as_encoders_write_it(tmp_path: Path) -> None:
    values = np.arange(40, dtype="<f4")
    encoded = _b64(values.tobytes())  # 214 characters
    wrapped = "\n".join(encoded[i : i + 76] for i in range(0, len(encoded), 76))
    interface = ModelInterface("wide", 0, (InputSpec("x", "FP32", (40,)),), ("y",))
    spaced = " \r\n\t".join(encoded[i : i + 10] for i in range(0, len(encoded), 10))
    path = _json(tmp_path, {"data": [{"x": {"b64": wrapped}}, {"x": {"content": {"b64": spaced}}}]})
    for step in _steps(path, interface):
        np.testing.assert_array_equal(step["x"], values)
    wrapped_ids = {"data": [{"ids": {"b64": "BwAAAAAAAAD3\n/////////w=="}}]}
    (step,) = _steps(_json(tmp_path, wrapped_ids, "i.json"), IDS)
    assert step["ids"].tolist() == [7, -9]


OPTIONAL = ModelInterface(
    "opt", 4, (InputSpec("x", "FP32", (2,)), InputSpec("mask", "BOOL", (2,), optional=True)), ("y",)
)


def test_an_optional_input_may_be_left_out_and_the_request_goes_without_it(tmp_path: Path) -> None:
    path = _json(tmp_path, {"data": [{"x": [1, 2], "mask": [True, False]}, {"x": [3, 4]}]})
    steps = _steps(path, OPTIONAL)
    assert [sorted(step) for step in steps] == [["mask", "x"], ["x"]]
    np.testing.assert_array_equal(steps[1]["x"], [[3, 4]])
    with pytest.raises(
        InputDataError,
        match="data\\[0\\] to data\\[1\\] make one request of --batch-size 2, "
        "but leave out different optional inputs",
    ):
        _steps(path, OPTIONAL, batch_size=2)
    (same,) = _steps(_json(tmp_path, {"data": [{"x": [1, 2]}]}, "one.json"), OPTIONAL, batch_size=3)
    assert sorted(same) == ["x"] and same["x"].shape == (3, 2)
    with pytest.raises(InputDataError, match="data\\[0\\] has no data for required input\\(s\\) x"):
        _steps(_json(tmp_path, {"data": [{"mask": [True, True]}]}, "no_x.json"), OPTIONAL)
    npz = tmp_path / "steps.npz"
    write_steps(
        npz,
        [
            {"x": np.ones((1, 2), np.float32)},
            {"x": np.ones((1, 2), np.float32), "mask": np.ones((1, 2), bool)},
        ],
    )
    assert [sorted(step) for step in _steps(npz, OPTIONAL)] == [["x"], ["mask", "x"]]


def test_the_servers_config_marks_inputs_optional() -> None:
    metadata = {"name": "opt", "inputs": [{"name": "x", "datatype": "FP32", "shape": [-1, 2]},
                                          {"name": "mask", "datatype": "BOOL", "shape": [-1, 2]}],
                "outputs": [{"name": "y"}]}  # fmt: skip
    config = {"max_batch_size": 4, "input": [{"name": "x"}, {"name": "mask", "optional": True}]}
    interface = interface_from_metadata(metadata, config)
    assert interface.output_specs == (InputSpec("y", "", ()),)  # what the metadata says of it
    assert dataclasses.replace(interface, output_specs=()) == OPTIONAL


def test_streams_are_read_in_order_and_validation_data_is_not_sent(tmp_path: Path) -> None:
    path = _json(
        tmp_path,
        {
            "data": [[{"x": [1, 1, 1, 1]}, {"x": [2, 2, 2, 2]}], [{"x": [3, 3, 3, 3]}]],
            "validation_data": [[{"y": [0]}], [{"y": [0]}]],
        },
    )
    streams = json_streams(path, MLP)
    assert [[where for where, _ in stream] for stream in streams] == [
        ["data[0][0]", "data[0][1]"],
        ["data[1][0]"],
    ]
    assert [step["x"][0, 0] for step in _steps(path, MLP)] == [1, 2, 3]


def test_input_values_fix_inputs_the_data_leaves_out_or_gives(tmp_path: Path) -> None:
    path = _json(tmp_path, {"data": [{"text": ["a", "bb"], "tag": ["from data"]}, {"text": ["c"]}]})
    steps = _steps(path, TEXT, values={"tag": "mlp_onnx", "scale": "2"}, batch_size=1)
    assert list(steps[0]) == ["text", "tag", "scale"]  # the model's input order
    assert all(step["tag"].tolist() == [[b"mlp_onnx"]] for step in steps)
    assert all(step["scale"].dtype == np.float32 and step["scale"].tolist() == [[2.0]] for step in steps)
    (random_step,) = input_steps(TEXT, InputPlan(values={"scale": "3"}), batch_size=3)
    assert random_step["scale"].shape == (3, 1) and set(random_step["scale"].reshape(-1)) == {3.0}
    (flags,) = input_steps(IMAGE, InputPlan(values={"flag": "true", "pixels": "7"}))
    assert flags["flag"].tolist() == [True] and flags["pixels"].tolist() == [[7]]


# -- random strings --------------------------------------------------------------------------


def test_random_strings_have_the_length_asked_and_repeat_with_the_seed() -> None:
    plan = InputPlan(string_length=5)
    (step,) = input_steps(TEXT, plan, batch_size=2, shapes={"text": (3,)}, seed=7)
    assert step["text"].shape == (2, 3) and step["text"].dtype == np.object_
    items = step["text"].reshape(-1).tolist() + step["tag"].reshape(-1).tolist()
    assert all(len(item) == 5 and set(item) <= set(STRING_ALPHABET) for item in items)
    assert len(set(items)) == len(items)  # 62**5 strings: 8 draws never collide at this seed
    (again,) = input_steps(TEXT, plan, batch_size=2, shapes={"text": (3,)}, seed=7)
    assert again["text"].tolist() == step["text"].tolist()
    (zeros,) = input_steps(TEXT, InputPlan(source="zeros"))
    assert set(zeros["text"].reshape(-1).tolist()) == {b""}


# -- .npz: strings and steps ----------------------------------------------------------------


def test_npz_string_arrays_feed_bytes_inputs(tmp_path: Path) -> None:
    path = tmp_path / "text.npz"
    np.savez(
        path,
        text=np.array([["ab", "ç"], ["", "d"]]),
        tag=np.array([[b"x"], [b"y"]]),
        scale=np.ones((2, 1), np.float32),
    )
    (step,) = _steps(path, TEXT)
    assert step["text"].dtype == np.object_ and step["text"].tolist() == [[b"ab", "ç".encode()], [b"", b"d"]]
    assert step["tag"].tolist() == [[b"x"], [b"y"]]


def test_steps_round_trip_through_one_npz_without_losing_bytes(tmp_path: Path) -> None:
    strings = np.empty((2, 2), dtype=np.object_)
    strings[:] = [[b"a\x00", b""], ["é".encode(), b"\x00\x00"]]
    steps = [
        {"text": strings, "scale": np.ones((2, 1), np.float32)},
        {"text": np.array([[b"only"]], dtype=np.object_), "scale": np.zeros((1, 1), np.float32)},
    ]
    path = tmp_path / "steps.npz"
    write_steps(path, steps)
    back = read_steps(path, "steps")
    assert len(back) == 2
    for got, want in zip(back, steps, strict=True):
        assert set(got) == set(want)
        assert got["text"].dtype == np.object_ and got["text"].tolist() == want["text"].tolist()
        np.testing.assert_array_equal(got["scale"], want["scale"])
    plain = tmp_path / "plain.npz"
    np.savez(plain, x=np.ones((2, 4), np.float32))
    assert [list(step) for step in read_steps(plain, "plain")] == [["x"]]  # a single-step file as before


def test_a_malformed_steps_file_is_unreadable(tmp_path: Path) -> None:
    path = tmp_path / "bad.npz"
    np.savez(path, **{STEPS_KEY: np.array([1]), "n0/text": np.array([5]), "b0/text": np.zeros(2, np.uint8)})
    with pytest.raises(ArrayFileUnreadableError, match="malformed request steps"):
        read_steps(path, "bad")


def test_npz_strings_for_a_numeric_input_and_numbers_for_a_string_input(tmp_path: Path) -> None:
    path = tmp_path / "wrong.npz"
    np.savez(path, x=np.array([["1", "2", "3", "4"]]))
    with pytest.raises(ArrayDtypeError, match=r"holds strings \(<U1\) for input 'x', which is FP32"):
        _steps(path, MLP)
    np.savez(path, text=np.ones((1, 2)), tag=np.array([["t"]]), scale=np.ones((1, 1), np.float32))
    with pytest.raises(ArrayDtypeError, match="holds float64 for input 'text', which is BYTES"):
        _steps(path, TEXT)


# -- the checks: one line each --------------------------------------------------------------

BAD_JSON: list[tuple[str, Any, ModelInterface, str]] = [
    ("strings for numbers", {"data": [{"x": ["1", "2", "3", "4"]}]}, MLP,
     "data[0] input 'x' holds strings, but the input is FP32"),
    ("numbers for strings", {"data": [{"text": [1], "tag": ["t"], "scale": [1]}]}, TEXT,
     "data[0] input 'text' is BYTES and takes strings"),
    ("shape against the model", {"data": [{"x": {"content": [1] * 8, "shape": [2, 4]}}]}, MLP,
     "data[0] input 'x' has shape [2, 4], but the model's dims are [4], batch dim excluded"),
    ("too few values", {"data": [{"x": [1, 2, 3, 4]}, {"x": [1, 2, 3]}]}, MLP,
     "data[1] input 'x' has 3 values, but its shape [4] holds 4 (the model's dims are [4]"),
    ("unknown input", {"data": [{"x": [1, 2, 3, 4], "z": [1]}]}, MLP,
     "data[0] gives input 'z', which model 'mlp' does not have"),
    ("missing input", {"data": [{"text": ["a"], "tag": ["t"], "scale": [1]}, {"text": ["a"]}]}, TEXT,
     "data[1] has no data for required input(s) tag, scale"),
    ("malformed b64", {"data": [{"x": [1, 2, 3, 4]}, {"x": {"b64": "not base64!"}}]}, MLP,
     "data[1] input 'x' has malformed base64"),
    ("b64 of a partial value", {"data": [{"x": {"b64": _b64(b"12345")}}]}, MLP,
     "has 5 bytes of base64, not a whole number of FP32 values"),
    ("b64 strings without lengths", {"data": [{"text": {"b64": _b64(b"\x09\x00\x00\x00ab")}, "tag": ["t"],
                                                "scale": [1]}]}, TEXT,
     "data[0] input 'text' has base64 BYTES that are not 4-byte length-prefixed"),
    ("a fraction for an integer", {"data": [{"ids": [1, 2.5]}]}, IDS,
     "data[0] input 'ids' holds values that are not integers that fit int64"),
    ("out of range", {"data": [{"pixels": {"content": [300], "shape": [1, 1]}, "flag": [1]}]}, IMAGE,
     "holds values that are not integers that fit uint8"),
    ("two open dims", {"data": [{"pixels": [1, 2, 3, 4], "flag": [1]}]}, IMAGE,
     "data[0] input 'pixels' needs a shape: the model's dims are [-1, -1]"),
    ("unknown value keys", {"data": [{"x": {"values": [1, 2, 3, 4]}}]}, MLP,
     "data[0] input 'x' has keys ['values']"),
    ("not an entry", {"data": [[1, 2, 3, 4]]}, MLP, "data[0][0] is not an object of inputs"),
    ("mixed streams", {"data": [{"x": [1, 2, 3, 4]}, [{"x": [1, 2, 3, 4]}]]}, MLP,
     '"data" mixes entries and lists of entries'),
    ("no data", {"inputs": []}, MLP, 'has no "data" list of entries'),
    ("not JSON", '{"data": [', MLP, "is not valid JSON: Expecting value at line 1"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("document", "interface", "message"), [case[1:] for case in BAD_JSON], ids=[case[0] for case in BAD_JSON]
)
def test_bad_json_names_the_entry_and_the_input(
    tmp_path: Path, document: Any, interface: ModelInterface, message: str
) -> None:
    path = _json(tmp_path, document)
    with pytest.raises(InputDataError) as caught:
        _steps(path, interface)
    line = caught.value.one_line()
    assert message in line and str(path) in line and "\n" not in line


def test_entries_batched_together_must_share_a_shape(tmp_path: Path) -> None:
    path = _json(
        tmp_path,
        {
            "data": [
                {"text": ["a"], "tag": ["t"], "scale": [1]},
                {"text": ["a", "b"], "tag": ["t"], "scale": [1]},
            ]
        },
    )
    with pytest.raises(InputDataError, match=r"data\[0\] to data\[1\] make one request of --batch-size 2"):
        _steps(path, TEXT, batch_size=2)
    assert len(_steps(path, TEXT)) == 2


@pytest.mark.parametrize(
    ("plan", "message"),
    [
        (
            InputPlan(values={"scale": "abc"}),
            "--input-value scale='abc': input 'scale' is FP32, which takes a number",
        ),
        (InputPlan(values={"flag": "maybe"}), "input 'flag' is BOOL, which takes true or false"),
        (InputPlan(values={"nope": "1"}), "--input-value nope=…: model"),
        (InputPlan(string_length=-1), "--string-length -1 is negative"),
    ],
)
def test_bad_values_are_config_errors(plan: InputPlan, message: str) -> None:
    interface = IMAGE if "flag" in plan.values else TEXT
    with pytest.raises(ConfigError, match=re.escape(message)):
        input_steps(interface, plan)


def test_a_missing_file_and_the_option_parsers(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="does not exist"):
        _steps(tmp_path / "missing.json", MLP)
    with pytest.raises(ConfigError, match=re.escape("neither random, zeros, a .json nor an .npz")):
        parse_input_data("data.csv")
    assert parse_input_data("zeros") == "zeros" and parse_input_data("a.JSON") == Path("a.JSON")
    assert parse_input_values(["MODEL_NAME=mlp_onnx", "expr=a=b"]) == {
        "MODEL_NAME": "mlp_onnx",
        "expr": "a=b",
    }
    for bad in (["novalue"], ["=x"], ["a=1", "a=2"]):
        with pytest.raises(ConfigError, match="--input-value"):
            parse_input_values(bad)
    with pytest.raises(ConfigError, match="--input and a data file"):
        input_steps(MLP, InputPlan(source=tmp_path / "x.json"), files={"x": tmp_path / "x.npy"})


# -- the locustfile reads what the package writes -------------------------------------------

PROBE = r"""
import json, sys
sys.path.insert(0, sys.argv[1])  # the locustfile's folder, as Locust puts it on sys.path
from tritonload import options as opts, payloads
from tritonload.request_data import STEPS_KEY, STRING_ALPHABET
import numpy as np

steps = payloads.read_steps(sys.argv[2], "steps")
defaults = {option.name.replace("-", "_"): option.default for option in opts.OPTIONS}
options = opts.TritonOptions(**{**defaults, "string_length": 7, "batch_size": 2})
meta = {"inputs": [{"name": "text", "datatype": "BYTES", "shape": [-1, -1]}], "outputs": []}
(random_step,) = payloads.build_steps(meta, 4, options)
plain = payloads.read_steps(sys.argv[3], "plain")
print(json.dumps({
    "key": STEPS_KEY,
    "alphabet": STRING_ALPHABET.decode(),
    "steps": [{name: [a.dtype.kind, list(a.shape), payloads.wire_datatype(a), payloads.raw_bytes(a).hex()]
               for name, a in step.items()} for step in steps],
    "plain": [{name: [payloads.wire_datatype(a), payloads.raw_bytes(a).hex()] for name, a in step.items()}
              for step in plain],
    "random": [list(random_step["text"].shape), sorted({len(item) for item in random_step["text"].flat}),
               len(set(random_step["text"].flat))],
}))
"""


def _wire(items: list[bytes]) -> str:
    return b"".join(len(item).to_bytes(4, "little") + item for item in items).hex()


def test_the_locustfile_sends_the_steps_the_package_writes(tmp_path: Path) -> None:
    path = _json(
        tmp_path, {"data": [{"text": ["a\u00e9", ""], "tag": ["t0"]}, {"text": ["b"], "tag": ["t1"]}]}
    )
    steps = _steps(path, TEXT, values={"scale": "1.5"})
    write_steps(tmp_path / "steps.npz", steps)
    np.savez(tmp_path / "plain.npz", u=np.array(["x", "yz"]), s=np.array([b"q"]), f=np.ones(2, np.float32))
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            PROBE,
            str(LOADTESTS),
            str(tmp_path / "steps.npz"),
            str(tmp_path / "plain.npz"),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["key"] == STEPS_KEY and report["alphabet"].encode() == STRING_ALPHABET
    scale = np.full((1, 1), 1.5, np.float32).tobytes().hex()
    assert report["steps"] == [
        {
            "text": ["O", [1, 2], "BYTES", _wire(["a\u00e9".encode(), b""])],
            "tag": ["O", [1, 1], "BYTES", _wire([b"t0"])],
            "scale": ["f", [1, 1], "FP32", scale],
        },
        {
            "text": ["O", [1, 1], "BYTES", _wire([b"b"])],
            "tag": ["O", [1, 1], "BYTES", _wire([b"t1"])],
            "scale": ["f", [1, 1], "FP32", scale],
        },
    ]
    assert report["random"] == [[2, 8], [7], 16]  # distinct random strings of --triton-string-length
    (plain,) = report["plain"]
    assert plain["u"] == ["BYTES", _wire([b"x", b"yz"])] and plain["s"] == ["BYTES", _wire([b"q"])]
    assert plain["f"] == ["FP32", np.ones(2, np.float32).tobytes().hex()]


def test_streams_of_a_nested_file_are_kept_beside_the_steps(tmp_path: Path) -> None:
    from tritongen.client.input_json import json_stream_lengths
    from tritongen.io.loadgen_shared import decode_streams, encode_steps, read_npz

    nested = _json(tmp_path, {"data": [[{"x": [1, 2, 3, 4]}], [{"x": [5, 6, 7, 8]}, {"x": [0, 0, 0, 0]}]]})
    assert json_stream_lengths(nested) == [1, 2]
    assert json_stream_lengths(_json(tmp_path, {"data": [{"x": [1, 2, 3, 4]}]}, "flat.json")) is None
    assert json_stream_lengths("random") is None
    steps = _steps(nested, MLP)
    path = tmp_path / "steps.npz"
    write_steps(path, steps, [1, 2])
    assert decode_streams(read_npz(path, "steps")) == [1, 2] and len(read_steps(path, "steps")) == 3
    write_steps(path, steps)
    assert decode_streams(read_npz(path, "steps")) is None
    with pytest.raises(ValueError, match="do not split 3 steps"):
        encode_steps(steps, [2, 2])
