"""Hypothesis over the command-line parsers and the config parser: only tritongen's own errors."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import pytest
import typer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tritongen.cli.options.parsing import parse_int_list, parse_name_list
from tritongen.client.inputs import parse_input_files, parse_shape_overrides
from tritongen.convert.formats import parse_formats
from tritongen.convert.tensorrt import parse_dim_ranges
from tritongen.errors import TritongenError
from tritongen.loadtest.spec import parse_duration
from tritongen.sources.input_spec import parse_data_type, parse_input_spec
from tritongen.triton.names import check_model_name
from tritongen.triton.proto import parse_config_text
from tritongen.tune.space import parse_preferred_sets

# Text made of the characters these parsers care about, and any text at all.
PIECES = st.sampled_from(
    [",", ";", ":", "=", "x", "-", "-1", "0", "1", "8", "128", "1.5", "s", "ms", "m", "h", "FP32", "INT64",
     "input", "none", " ", "", "..", "/", "\n", "1e9", "99999999999999999999", "é", "\x00", "all", "onnx"]
)  # fmt: skip
TEXT = st.one_of(st.text(max_size=60), st.lists(PIECES, max_size=20).map("".join))
FUZZ = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _only_own_errors(parse: Callable[[str], Any], text: str) -> None:
    # A clean, one-line refusal is fine; any other exception fails the test.
    with contextlib.suppress(TritongenError, typer.BadParameter):
        parse(text)


PARSERS: dict[str, Callable[[str], Any]] = {
    "input spec": parse_input_spec,
    "data type": parse_data_type,
    "shape": lambda t: parse_shape_overrides([t]),
    "input file": lambda t: parse_input_files([t]),
    "duration": lambda t: parse_duration(t, "--duration"),
    "int list": lambda t: parse_int_list(t, "--concurrency"),
    "name list": parse_name_list,
    "formats": parse_formats,
    "dim ranges": parse_dim_ranges,
    "preferred sets": parse_preferred_sets,
    "model name": check_model_name,
    "config text": parse_config_text,
}


@pytest.mark.parametrize("name", sorted(PARSERS))
def test_parsers_refuse_cleanly(name: str) -> None:
    @FUZZ
    @given(TEXT)
    def run(text: str) -> None:
        _only_own_errors(PARSERS[name], text)

    run()


@FUZZ
@given(st.integers(-10, 10_000), st.sampled_from(["", "s", "ms", "m", "h"]))
def test_durations_that_parse_are_what_they_say(value: int, unit: str) -> None:
    text = f"{value}{unit}"
    try:
        seconds = parse_duration(text, "--duration")
    except TritongenError:
        assert value < 0
        return
    scale = {"": 1.0, "s": 1.0, "ms": 0.001, "m": 60.0, "h": 3600.0}[unit]
    assert seconds == pytest.approx(value * scale)


@FUZZ
@given(st.lists(st.integers(1, 4096), min_size=1, max_size=6))
def test_int_lists_round_trip(values: list[int]) -> None:
    assert parse_int_list(",".join(str(v) for v in values), "--x") == tuple(values)
    assert parse_shape_overrides([f"t={'x'.join(str(v) for v in values)}"]) == {"t": tuple(values)}
