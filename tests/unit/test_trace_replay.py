"""Traces read from their three formats and laid out for replay: times, cuts, loops, requests, errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tritongen.errors import ConfigError
from tritongen.examples.tiny_llama import write_tokenizer
from tritongen.loadtest.llm.tokenizer import count_tokens, load_tokenizer
from tritongen.loadtest.shapes.base import STEP_IN_TURN
from tritongen.loadtest.shapes.trace_replay import TraceReplay
from tritongen.loadtest.shapes.trace_requests import replayed_prompts, trace_prompts
from tritongen.loadtest.traces.reading import read_trace


def _lines(path: Path, items: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(item) + "\n" for item in items))
    return path


def _triton_trace(
    path: Path, requests: list[tuple[int, str, dict[str, str] | None]], parent: int = 0
) -> Path:
    """A trace file as the server writes it: per request its model, timestamps and input tensors."""
    entries: list[dict[str, Any]] = []
    for number, (ns, model, shapes) in enumerate(requests, 1):
        entries.append({"id": number, "timestamps": [{"name": "HTTP_RECV_START", "ns": ns}]})
        entries.append({"id": number, "model_name": model, "model_version": 1, "parent_id": parent})
        entries.append({"id": number, "timestamps": [{"name": "HTTP_SEND_END", "ns": ns + 900_000}]})
        for name, shape in (shapes or {}).items():
            tensor = {"name": name, "data": "0", "shape": shape, "dtype": "FP32"}
            entries.append({"id": number, "activity": "TENSOR_QUEUE_INPUT", "tensor": tensor})
    path.write_text(json.dumps(entries))
    return path


def test_our_format_keeps_one_models_requests_from_its_first(tmp_path: Path) -> None:
    trace = read_trace(
        _lines(tmp_path / "t.jsonl", [
            {"time_s": 10.0, "model": "other"},
            {"time_s": 10.5, "model": "mlp", "batch_size": 2, "shapes": {"x": [16]}},
            {"time_s": 11.0, "batch_size": 4, "shapes": {"x": [16]}},
            {"time_s": 12.5, "model": "mlp", "batch_size": 2, "shapes": {"x": [16]}},
        ]),
        "mlp",
    )  # fmt: skip
    assert trace.format == "tritongen" and [e.time_s for e in trace.entries] == [0.0, 0.5, 2.0]
    assert trace.notes == ("1 requests to other models left out",) and trace.models == {"other": 1, "mlp": 2}
    replay = TraceReplay(trace)
    assert replay.steps.tolist() == [0, 1, 0]  # one prepared request per distinct batch size and shapes
    assert [(e.batch_size, e.shapes) for e in replay.tensor_variants()] == [
        (2, {"x": (16,)}),
        (4, {"x": (16,)}),
    ]
    assert replay.rows_per_request(1, batched=True) == pytest.approx(8 / 3)


def test_a_replay_is_cut_looped_sped_up_and_warmed_with_its_end(tmp_path: Path) -> None:
    trace = read_trace(
        _lines(tmp_path / "t.jsonl", [{"time_s": t, "data": i} for i, t in enumerate([0, 1, 2, 3])]), "m"
    )
    whole = TraceReplay(trace)
    assert whole.duration_s == 4.0 and whole.mean_rate == 1.0  # its span and one mean gap
    schedule = whole.schedule(warmup_s=1.5, seed=0)
    assert schedule.times_s.tolist() == [-1.0, 0, 1, 2, 3] and schedule.steps.tolist() == [3, 0, 1, 2, 3]
    looped = TraceReplay(trace, duration_s=10.0).schedule(0.0, seed=0)
    assert looped.times_s.tolist() == [0, 1, 2, 3, 4, 5, 6, 7, 8, 9] and looped.steps.tolist()[4:6] == [0, 1]
    cut = TraceReplay(trace, duration_s=2.5)
    assert cut.schedule(0.0, seed=0).measured_sends == 3 and "cut at 2.5 s" in cut.describe()
    fast = TraceReplay(trace, speed=2.0)
    assert fast.duration_s == 2.0 and fast.schedule(0.0, 0).times_s.tolist() == [0, 0.5, 1, 1.5]
    with pytest.raises(ConfigError, match="--trace-speed 0 is not above 0"):
        TraceReplay(trace, speed=0)


def test_mooncake_traces_are_milliseconds_and_hash_blocks(tmp_path: Path) -> None:
    trace = read_trace(
        _lines(tmp_path / "mooncake.jsonl", [
            {"timestamp": 0, "input_length": 40, "output_length": 8, "hash_ids": [0, 1]},
            {"timestamp": 250, "input_length": 30, "output_length": 4, "hash_ids": [0, 2]},
            {"timestamp": 1000, "input_length": 20, "output_length": 6},
        ]),
        "llm",
    )  # fmt: skip
    assert trace.format == "mooncake" and trace.llm and [e.time_s for e in trace.entries] == [0, 0.25, 1.0]
    replay = TraceReplay(trace)
    assert replay.steps.tolist() == [0, 1, 2]  # each entry a prompt of its own


def test_mooncake_prompts_share_the_prefix_of_their_shared_blocks(tmp_path: Path) -> None:
    tokenizer = load_tokenizer(write_tokenizer(tmp_path / "model"))
    trace = read_trace(
        _lines(tmp_path / "mooncake.jsonl", [
            {"timestamp": 0, "input_length": 300, "output_length": 8, "hash_ids": [5]},
            {"timestamp": 10, "input_length": 700, "output_length": 4, "hash_ids": [5, 6]},
            {"timestamp": 20, "input_length": 200, "output_length": 6, "hash_ids": [7]},
        ]),
        "llm",
    )  # fmt: skip
    first, second, third = trace_prompts(TraceReplay(trace), tokenizer, seed=0)
    assert [p.max_tokens for p in (first, second, third)] == [8, 4, 6]
    for prompt, want in zip((first, second, third), (300, 700, 200), strict=True):
        assert prompt.text is not None and abs(count_tokens(tokenizer, prompt.text) - want) <= 2
    assert first.text and second.text and third.text
    shared = len(first.text) - 20  # block 5 opens both prompts
    assert second.text[:shared] == first.text[:shared] and third.text[:20] != first.text[:20]
    with pytest.raises(ConfigError, match="add --tokenizer"):
        replayed_prompts(TraceReplay(trace), None, seed=0)


def test_a_triton_trace_gives_arrivals_models_and_whole_shapes(tmp_path: Path) -> None:
    path = _triton_trace(tmp_path / "trace.json", [
        (5_000_000_000, "text", {"input_ids": "4,12", "attention_mask": "4,12"}),
        (5_250_000_000, "text", {"input_ids": "1,7", "attention_mask": "1,7"}),
        (5_300_000_000, "mlp", {"input": "2,16"}),
    ])  # fmt: skip
    trace = read_trace(path, "text")
    assert trace.format == "triton" and [round(e.time_s, 6) for e in trace.entries] == [0, 0.25]
    assert trace.entries[0].shapes == {"input_ids": (4, 12), "attention_mask": (4, 12)}
    assert TraceReplay(trace).rows_per_request(1, batched=True) == 2.5


def test_a_triton_trace_in_parts_and_without_tensors(tmp_path: Path) -> None:
    _triton_trace(tmp_path / "trace.json.0", [(1_000_000, "m", None), (2_000_000, "m", None)])
    _triton_trace(tmp_path / "trace.json.1", [(3_000_000, "m", None)])
    (tmp_path / "trace.json.1").write_text(
        json.dumps([{**e, "id": e["id"] + 10} for e in json.loads((tmp_path / "trace.json.1").read_text())])
    )
    trace = read_trace(tmp_path / "trace.json", "m")
    assert len(trace.entries) == 3 and "no tensors" in trace.notes[0]
    assert TraceReplay(trace).steps.tolist() == [STEP_IN_TURN] * 3  # the load's own request, in turn


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        ([{"time_s": 1}, {"time_s": 0.5}], r"line 2: time 0.5 s is before line 1's 1 s"),
        ([{"time_s": 0}, {"time_s": 1, "shape": {}}], r"line 2: unknown field 'shape'"),
        ([{"time_s": 0, "shapes": {"x": [1]}, "data": 0}], "line 1: has both shapes and data"),
        ([{"time_s": 0}, {"model": "m"}], r"line 2: time_s None is not a number"),
        ([{"time_s": 0, "batch_size": 0}], "line 1: batch_size 0 is not a whole number above 0"),
        ([{"time_s": 0, "input_tokens": 5}], "line 1: a prompt has input_tokens and output_tokens"),
        ([{"time_s": 0, "model": "a"}], r"has no request for model 'm' \(it has: a \(1\)\)"),
        ([{"timestamp": 0, "input_length": 10}], "line 1: output_length None is not a whole number"),
        ([{"when": 0}], "is none of the trace formats"),
    ],
)
def test_a_bad_trace_is_refused_naming_its_line(
    tmp_path: Path, lines: list[dict[str, Any]], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        TraceReplay(read_trace(_lines(tmp_path / "t.jsonl", lines), "m"))


def test_files_that_are_no_trace(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello\n")
    with pytest.raises(ConfigError, match="line 1: is not a trace"):
        read_trace(tmp_path / "notes.txt", "m")
    (tmp_path / "bad.jsonl").write_text('{"time_s": 0}\n{"time_s": \n')
    with pytest.raises(ConfigError, match="line 2: not JSON"):
        read_trace(tmp_path / "bad.jsonl", "m")
    with pytest.raises(ConfigError, match="no such file"):
        read_trace(tmp_path / "missing.jsonl", "m")
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(ConfigError, match="holds no request"):
        read_trace(tmp_path / "empty.jsonl", "m")
    (tmp_path / "array.json").write_text('{"a": 1}')
    with pytest.raises(ConfigError, match="none of the trace formats"):
        read_trace(tmp_path / "array.json", "m")
    with pytest.raises(ConfigError, match="--trace-format 'csv' is unknown"):
        read_trace(tmp_path / "array.json", "m", "csv")


def test_data_entries_and_tensors_and_prompts_do_not_mix(tmp_path: Path) -> None:
    mixed = _lines(tmp_path / "t.jsonl", [{"time_s": 0, "data": 1}, {"time_s": 1}])
    with pytest.raises(ConfigError, match="line 2: no data entry, where others name one"):
        TraceReplay(read_trace(mixed, "m"))
    tensors = TraceReplay(
        read_trace(_lines(tmp_path / "s.jsonl", [{"time_s": 0, "shapes": {"x": [2]}}]), "m")
    )
    with pytest.raises(ConfigError, match="holds tensor requests"):
        replayed_prompts(tensors, None, seed=0)
    assert np.array_equal(tensors.steps, [0])


def test_a_warm_up_that_holds_few_of_the_traces_requests_is_noted(tmp_path: Path) -> None:
    bursts = [{"time_s": burst / 2} for burst in range(4) for _ in range(8)] + [{"time_s": 2.0}]
    replay = TraceReplay(read_trace(_lines(tmp_path / "t.jsonl", bursts), "m"))
    (thin,) = replay.notes(warmup_s=0.5)  # the trace's last 0.5 s: the lone request
    assert thin.startswith(
        "the warm-up (0.5 s of the trace's end) sends 1 request(s) where the trace averages 8 "
    )
    assert replay.notes(warmup_s=0.75) == ()  # the last burst as well
    assert replay.notes(warmup_s=0.1) == () and replay.notes() == ()  # too short to expect a burst
