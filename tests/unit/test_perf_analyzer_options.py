"""perf_analyzer's command line as tritongen reads it: defaults, ranges, shapes, refusals, its CSV header."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from tritongen.cli.main import app
from tritongen.client.inputs import InputSpec, ModelInterface
from tritongen.perfanalyzer.csv_file import BASE, csv_header
from tritongen.perfanalyzer.options import UNSUPPORTED, PaUsageError, parse_pa_args
from tritongen.perfanalyzer.sweep import ModelFacts, sweep_spec

from support.cli_output import error_line

runner = CliRunner()
FACTS = ModelFacts(
    ModelInterface("m", 8, (InputSpec("x", "FP32", (16,)), InputSpec("t", "BYTES", (1,))), ("y",)),
    sequence=False,
    decoupled=False,
)


def test_perf_analyzers_defaults() -> None:
    options = parse_pa_args(["-m", "mlp"])
    assert (options.protocol, options.target_url, options.levels()) == ("http", "localhost:8000", [1.0])
    assert (options.measurement_ms, options.stability_percentage, options.max_trials) == (5000, 10.0, 10)
    assert options.percentile is None and options.string_length == 128 and not options.asynchronous
    assert parse_pa_args(["-m", "mlp", "-i", "grpc"]).target_url == "localhost:8001"


def test_ranges_and_their_levels() -> None:
    assert parse_pa_args(["-m", "m", "--concurrency-range", "1:8:2"]).levels() == [1, 3, 5, 7]
    assert parse_pa_args(["-m", "m", "--concurrency-range=4"]).levels() == [4]
    rates = parse_pa_args(
        ["-m", "m", "--request-rate-range", "100:200:50", "--request-distribution", "poisson"]
    )
    assert rates.mode == "rate" and rates.levels() == [100, 150, 200] and rates.distribution == "poisson"


def test_one_level_in_tritongens_terms() -> None:
    options = parse_pa_args(
        ["-m", "m", "-p", "2000", "-s", "5", "-r", "6", "--percentile", "95", "-b", "4",
         "--shape", "x:16", "--string-data", "hello"]
    )  # fmt: skip
    spec = sweep_spec(options, FACTS, "random")
    assert (spec.window_s, spec.duration_s, spec.max_duration_s, spec.warmup_s) == (2.0, 6.0, 12.0, 0.0)
    assert (spec.stability_tolerance, spec.stability_percentile) == (0.05, 95.0)
    assert spec.batch_size == 4 and spec.shapes == {"x": (16,)} and spec.input_values == {"t": "hello"}
    counted = sweep_spec(parse_pa_args(["-m", "m", "--measurement-mode", "count_windows"]), FACTS, "zeros")
    assert counted.count_window_requests == 50 and counted.max_count_windows == 10
    swept = sweep_spec(parse_pa_args(["-m", "m", "--concurrency-range", "1:4:1", "-l", "5"]), FACTS, "zeros")
    assert swept.levels == (1, 2, 3, 4) and swept.stop_at is not None


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--concurrency-range", "4:1"], "--concurrency-range 4:1: the end (1) is below the start (4)"),
        (["--concurrency-range", "a:b"], "--concurrency-range a: not a whole number"),
        (["--shape", "INPUT0"], "--shape INPUT0: not NAME:DIMS"),
        (["--shape", "INPUT0:0,3"], "the dims must be positive integers"),
        (["-p", "0"], "-p 0: must be at least 1"),
        (["--percentile", "101"], "--percentile 101 is out of range"),
        (["-s", "0"], "the stability percentage must be above 0"),
        (["-i", "tcp"], "-i tcp: not one of http, grpc"),
        (["--async", "--sync"], "--async and --sync exclude each other"),
        (["--service-kind", "tfserving"], "--service-kind tfserving: tritongen measures Triton servers only"),
        (["--triton-c-api"], "--triton-c-api: use tritongen loadtest MODEL --serve REPO"),
        (["--shared-memory", "cuda"], "--shared-memory cuda: tritongen passes tensors through system"),
        (["--no-such-thing"], "--no-such-thing: not a perf_analyzer option tritongen knows"),
    ],
)
def test_what_it_cannot_run_is_refused_in_one_line(args: list[str], message: str) -> None:
    with pytest.raises(PaUsageError) as caught:
        parse_pa_args(["-m", "m", *args])
    line = caught.value.one_line()
    assert message in line and "\n" not in line


def test_every_refusal_names_the_way() -> None:
    assert all(hint.strip() for hint in UNSUPPORTED.values())
    with pytest.raises(PaUsageError, match="-m MODEL is required"):
        parse_pa_args(["--concurrency-range", "1:2"])


def test_the_command_refuses_before_sending_anything() -> None:
    result = runner.invoke(
        app, ["perf-analyzer", "-m", "mlp_onnx", "--concurrency-range", "4:1", "-u", "127.0.0.1:1"]
    )
    assert result.exit_code != 0
    assert "--concurrency-range 4:1: the end (1) is below the start (4)" in error_line(result.stderr)
    shown = runner.invoke(app, ["pa", "--help"])
    assert shown.exit_code == 0 and "--concurrency-range START[:END[:STEP]]" in shown.stdout


def test_csv_header_is_perf_analyzers() -> None:
    plain = csv_header(parse_pa_args(["-m", "m"]))
    assert plain == ["Concurrency", *BASE]
    verbose = csv_header(parse_pa_args(["-m", "m", "--request-rate-range", "10", "--verbose-csv"]))
    assert verbose[0] == "Request Rate" and verbose[-3:] == [
        "Avg latency",
        "request/response",
        "response wait",
    ]
    metrics = csv_header(parse_pa_args(["-m", "m", "--collect-metrics", "--percentile", "97"]))
    assert "p97 latency" in metrics and metrics[-4:][0] == "Avg GPU Utilization"
