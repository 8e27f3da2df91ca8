"""Realistic inputs against the real server: string data, JSON data steps sent round-robin, fixed values."""

from __future__ import annotations

import base64
import json
import string
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tritongen.cli.main import app
from tritongen.server.local import LocalTritonServer

from support.string_model import STRING_MODEL, recorded

runner = CliRunner()
SHORT = ["--duration", "2s", "--warmup", "1s", "--window", "1s", "--max-duration", "4s"]


def _url(server: LocalTritonServer, protocol: str) -> list[str]:
    return ["--url", server.http_url if protocol == "http" else server.grpc_url, "--protocol", protocol]


def _loadtest(server: LocalTritonServer, protocol: str, *args: str) -> tuple[int, str]:
    result = runner.invoke(
        app, ["loadtest", STRING_MODEL, *_url(server, protocol), "--metrics-url", server.metrics_url, *args]
    )
    return result.exit_code, result.stderr


def _write(path: Path, document: Any) -> Path:
    path.write_text(json.dumps(document))
    return path


def _one_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    return lines[0]


@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_json_steps_go_out_round_robin(
    triton_server: LocalTritonServer, served_repository: Path, tmp_path: Path, protocol: str
) -> None:
    texts = [[f"{protocol}-{k}"] * (k + 1) for k in range(3)]  # 1, 2 and 3 strings: three shapes
    data = _write(
        tmp_path / "data.json",
        {"data": [{"text": t, "tag": [f"{protocol}-step{k}"]} for k, t in enumerate(texts)]},
    )
    model_dir = served_repository / STRING_MODEL
    before = len(recorded(model_dir))
    out = tmp_path / "run.json"
    code, stderr = _loadtest(
        triton_server, protocol, "--concurrency", "2", "--input-data", str(data),
        "--input-value", "scale=2", *SHORT, "--json", str(out),
    )  # fmt: skip
    assert code == 0, stderr
    (run,) = json.loads(out.read_text())["runs"]
    assert run["errors"] == 0 and run["batch_size"] == 1
    # Requests of an earlier test may still reach the model (Locust stops with requests in flight).
    seen = [r for r in recorded(model_dir, since=before) if r["tag"][0].startswith(f"{protocol}-step")]
    assert len(seen) >= run["requests"]  # warm-up and measured requests alike reached the model
    steps = Counter(request["tag"][0] for request in seen)
    assert set(steps) == {f"{protocol}-step{k}" for k in range(3)}
    for request in seen:
        k = int(request["tag"][0][-1])
        assert request["text"] == [texts[k]] and request["scale"] == [2.0]
    # Each of the 2 connections cycles through the steps: its counts differ by at most one,
    # plus one request it may have had in flight when Locust stopped, so by at most 2 x 2 overall.
    assert max(steps.values()) - min(steps.values()) <= 4, steps


@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_an_optional_input_left_out_is_not_sent_and_base64_may_break_lines(
    triton_server: LocalTritonServer, served_repository: Path, tmp_path: Path, protocol: str
) -> None:
    """perf_analyzer's files as they are: ``note`` (optional) in one entry only, base64 wrapped at 76."""
    strings = [f"{protocol}-wrapped-{k:02d}".encode() for k in range(8)]  # 8 x 21 bytes: over 76 chars
    encoded = base64.b64encode(b"".join(len(s).to_bytes(4, "little") + s for s in strings)).decode()
    wrapped = "\n".join(encoded[i : i + 76] for i in range(0, len(encoded), 76))
    assert "\n" in wrapped
    data = _write(
        tmp_path / "data.json",
        {"data": [
            {"text": ["a"], "tag": [f"{protocol}-with"], "note": ["given"]},
            {"text": {"b64": wrapped}, "tag": [f"{protocol}-without"]},
        ]},
    )  # fmt: skip
    model_dir = served_repository / STRING_MODEL
    before = len(recorded(model_dir))
    out = tmp_path / "run.json"
    code, stderr = _loadtest(
        triton_server, protocol, "--concurrency", "1", "--input-data", str(data), "--input-value", "scale=1",
        *SHORT, "--json", str(out),
    )  # fmt: skip
    assert code == 0, stderr
    (run,) = json.loads(out.read_text())["runs"]
    assert run["errors"] == 0
    seen = [r for r in recorded(model_dir, since=before) if r["tag"][0].startswith(f"{protocol}-with")]
    with_note = [r for r in seen if r["tag"] == [f"{protocol}-with"]]
    without = [r for r in seen if r["tag"] == [f"{protocol}-without"]]
    assert with_note and without
    assert all(r["note"] == ["given"] for r in with_note)
    assert all("note" not in r and r["text"] == [[s.decode() for s in strings]] for r in without)


@pytest.mark.slow
def test_random_strings_of_the_length_asked(
    triton_server: LocalTritonServer, served_repository: Path, tmp_path: Path
) -> None:
    model_dir = served_repository / STRING_MODEL
    before = len(recorded(model_dir))
    out = tmp_path / "run.json"
    code, stderr = _loadtest(
        triton_server, "http", "--concurrency", "1", "--batch-size", "2", "--shape", "text=3",
        "--string-length", "5", "--input-value", "scale=1", "--input-value", "tag=random-strings",
        *SHORT, "--json", str(out),
    )  # fmt: skip
    assert code == 0, stderr
    (run,) = json.loads(out.read_text())["runs"]
    assert run["errors"] == 0 and run["batch_size"] == 2
    seen = [r for r in recorded(model_dir, since=before) if r["tag"] == ["random-strings"] * 2]
    assert seen
    alphabet = set(string.ascii_letters + string.digits)
    for request in seen:
        assert [len(row) for row in request["text"]] == [3, 3]
        items = [item for row in request["text"] for item in row]
        assert all(len(item) == 5 and set(item) <= alphabet for item in items)
    # Random data is drawn once (like perf_analyzer's): every request carries the same strings.
    assert len({json.dumps(request["text"]) for request in seen}) == 1
    assert len(set(seen[0]["text"][0] + seen[0]["text"][1])) == 6


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_infer_with_json_data_and_a_fixed_value(
    triton_server: LocalTritonServer, served_repository: Path, tmp_path: Path, protocol: str
) -> None:
    data = _write(
        tmp_path / "data.json",
        {
            "data": [
                {"text": ["x"], "scale": [1]},
                {"text": {"content": ["abc", "de"], "shape": [2]}, "scale": [2]},
            ]
        },
    )
    model_dir = served_repository / STRING_MODEL
    before = len(recorded(model_dir))
    result = runner.invoke(
        app,
        [
            "infer", STRING_MODEL, *_url(triton_server, protocol), "--input-data", str(data),
            "--input-value", f"tag={protocol}-bls", "--step", "1", "--warmup", "0",
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    assert f"b'{protocol}-bls'" in result.stdout and "[6., 4.]" in result.stdout
    (request,) = [r for r in recorded(model_dir, since=before) if r["tag"] == [f"{protocol}-bls"]]
    assert request == {"text": [["abc", "de"]], "tag": [f"{protocol}-bls"], "scale": [2.0]}


BAD = [
    ({"data": [{"text": ["a"], "tag": ["t"], "scale": ["x"]}]}, [],
     "data[0] input 'scale' holds strings, but the input is FP32"),
    ({"data": [{"text": ["a"], "tag": {"content": ["t", "u"], "shape": [2]}, "scale": [1]}]}, [],
     "data[0] input 'tag' has shape [2], but the model's dims are [1], batch dim excluded"),
    ({"data": [{"text": ["a"], "tag": ["t"], "scale": [1], "nope": [1]}]}, [],
     "data[0] gives input 'nope', which model 'string_echo' does not have"),
    ({"data": [{"text": ["a"], "tag": ["t"]}]}, [], "data[0] has no data for required input(s) scale"),
    ({"data": [{"text": ["a"], "note": ["n"], "scale": [1]}]}, [],
     "data[0] has no data for required input(s) tag"),
    ({"data": [{"text": ["a"], "tag": ["t"], "scale": [1], "note": {"b64": "bm90 ZQ=!"}}]}, [],
     "data[0] input 'note' has malformed base64"),
    ({"data": [{"text": ["a"], "tag": ["t"], "scale": [1]}, {"text": {"b64": "%%"}, "tag": ["t"],
                                                              "scale": [1]}]},
     [], "data[1] input 'text' has malformed base64"),
    ({"data": [{"text": ["a"], "tag": ["t"]}]}, ["--input-value", "scale=abc"],
     "input 'scale' is FP32, which takes a number"),
]  # fmt: skip


@pytest.mark.parametrize(("document", "extra", "message"), BAD)
def test_bad_input_data_is_one_line(
    triton_server: LocalTritonServer, tmp_path: Path, document: Any, extra: list[str], message: str
) -> None:
    data = _write(tmp_path / "data.json", document)
    result = runner.invoke(
        app, ["infer", STRING_MODEL, *_url(triton_server, "http"), "--input-data", str(data), *extra]
    )
    assert result.exit_code == 1 and message in _one_line(result.stderr)


def test_bad_input_data_stops_a_load_test_before_it_starts(
    triton_server: LocalTritonServer, tmp_path: Path
) -> None:
    data = _write(tmp_path / "data.json", BAD[0][0])
    out = tmp_path / "run.json"
    code, stderr = _loadtest(triton_server, "grpc", "--input-data", str(data), *SHORT, "--json", str(out))
    assert code == 1 and BAD[0][2] in _one_line(stderr)
    assert not out.exists()
    code, stderr = _loadtest(triton_server, "http", "--input-data", "data.csv", *SHORT)
    assert code == 1 and "neither random, zeros, a .json nor an .npz" in _one_line(stderr)
    code, stderr = _loadtest(triton_server, "http", "--input-value", "nope=1", *SHORT)
    assert code == 1 and "--input-value nope=…: model 'string_echo' has no input 'nope'" in _one_line(stderr)
