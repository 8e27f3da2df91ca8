"""perf_analyzer's command line as tritongen reads it: defaults, ranges, shapes, refusals, its CSV header."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from typer.testing import CliRunner

from tritongen.cli.main import app
from tritongen.client.inputs import InputSpec, ModelInterface
from tritongen.loadtest.spec import LoadSpec
from tritongen.loadtest.sweep_rules import Bisection, LatencyLimit
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
        (["--async"], "--async: with a concurrency every level keeps N requests in flight"),
        (["--sync", "--concurrency-range", "1:4"], "--sync: with a concurrency every level keeps N"),
        (["--max-threads", "8"], "--max-threads: with a concurrency every level keeps N requests"),
        (["--request-rate-range", "100", "--async", "--max-threads", "8"], "--max-threads with --async"),
        (["--binary-search", "--concurrency-range", "1:8"], "--binary-search needs a latency limit"),
        (["--binary-search", "-l", "5", "--concurrency-range", "1:0"], "--binary-search needs a range"),
        (["--binary-search", "-l", "5"], "--binary-search needs a range to search"),
        (["--service-kind", "tfserving"], "--service-kind tfserving: tritongen measures Triton servers only"),
        (["--triton-c-api"], "--triton-c-api: use tritongen loadtest MODEL --serve REPO"),
        (["--shared-memory", "cuda"], "--shared-memory cuda: tritongen passes tensors through system"),
        (["--no-such-thing"], "--no-such-thing: not a perf_analyzer option tritongen knows"),
        (["--concurency-range", "1:2"], "did you mean --concurrency-range?"),
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
    metrics = csv_header(
        parse_pa_args(["-m", "m", "--collect-metrics", "--verbose-csv", "--percentile", "97"])
    )
    assert "p97 latency" in metrics and metrics[-6:][0] == "Avg GPU Utilization"


def test_usage_errors_exit_2_in_one_line() -> None:
    for args in (["--async"], ["--concurency-range", "1:2"], ["--max-threads", "2"]):
        result = runner.invoke(app, ["perf-analyzer", "-m", "m", "-u", "127.0.0.1:1", *args])
        assert result.exit_code == 2, result.stderr
        assert len([line for line in result.stderr.splitlines() if line.strip()]) == 1


def test_sync_request_rates_keep_at_most_max_threads_in_flight() -> None:
    sync = sweep_spec(
        parse_pa_args(["-m", "m", "--request-rate-range", "100", "--max-threads", "3"]), FACTS, "zeros"
    )
    assert (sync.processes, sync.max_inflight) == (1, 3)
    default = sweep_spec(parse_pa_args(["-m", "m", "--request-rate-range", "100"]), FACTS, "zeros")
    assert (default.processes, default.max_inflight) == (1, 4)  # perf_analyzer's default: sync, 4 threads
    unbounded = sweep_spec(parse_pa_args(["-m", "m", "--request-rate-range", "100", "-a"]), FACTS, "zeros")
    assert (unbounded.processes, unbounded.max_inflight) == (None, LoadSpec.max_inflight)
    closed = sweep_spec(parse_pa_args(["-m", "m", "--concurrency-range", "8"]), FACTS, "zeros")
    assert (closed.processes, closed.max_inflight) == (None, LoadSpec.max_inflight)


def _bisect(search: Bisection, passes: Callable[[float], bool]) -> list[float]:
    measured: list[tuple[float, bool]] = []
    level = search.next_level(measured)
    while level is not None:
        measured.append((level, passes(level)))
        level = search.next_level(measured)
    return [level for level, _ in measured]


def test_binary_search_bisects_as_perf_analyzer_does() -> None:
    options = parse_pa_args(["-m", "m", "--binary-search", "-l", "5", "--concurrency-range", "1:64"])
    search = sweep_spec(options, FACTS, "zeros").search
    assert isinstance(search, Bisection)
    # start, end, then the middle of the highest passing and the lowest failing, halves rounded down
    assert _bisect(search, lambda level: level <= 21) == [1, 64, 32, 16, 24, 20, 22, 21]
    assert _bisect(search, lambda level: True) == [1, 64]  # the end is within the limit: done
    assert _bisect(search, lambda level: False) == [1]  # not even the start
    rates = Bisection(100, 1000, 50, LatencyLimit(5), whole=False)
    assert _bisect(rates, lambda level: level <= 420) == [100, 1000, 550, 325, 437.5, 381.25, 409.375]
    assert Bisection.best([(1, True), (64, False), (32, True), (48, False)]) == 32
