"""``tritongen loadtest``: QPS, microsecond latency percentiles and utilisation, per load level."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Annotated

import typer

from tritongen.cli.boundary import stop_on_signals, user_errors
from tritongen.cli.console import console, err_console, say
from tritongen.cli.load_worker import given_options, run_worker_mode
from tritongen.cli.options.given import refuse_given
from tritongen.cli.options.groups import Pick, option_groups, reworded
from tritongen.cli.options.llm import LlmFlags
from tritongen.cli.options.load import LoadFlags, RunFlags, load_spec
from tritongen.cli.options.output import OutputFlags
from tritongen.cli.options.rounds import RoundsFlags
from tritongen.cli.options.settings import settings
from tritongen.cli.options.shape import ShapeFlags
from tritongen.cli.options.shared import FindMax, LoadTimeout, Serve, SkipFailed, SloP99, Url
from tritongen.cli.progress import live_line, run_text
from tritongen.cli.serving import serving_hooks
from tritongen.cli.verdict import finish
from tritongen.errors import ConfigError
from tritongen.intervals import check_confidence
from tritongen.loadtest.arrivals import parse_arrival
from tritongen.loadtest.client_floor import floor_lines
from tritongen.loadtest.find_max import DEFAULT_CAP, DEFAULT_PRECISION, MaxSearch, SloObjective
from tritongen.loadtest.locust_process import WEB_HOST
from tritongen.loadtest.mix import Mix
from tritongen.loadtest.result import LoadTestReport
from tritongen.loadtest.saturation import SaturationRule
from tritongen.loadtest.spec import LoadSpec
from tritongen.loadtest.validation import validation_lines
from tritongen.metrics.vllm import vllm_text
from tritongen.report.timeslice_report import plot_timeslices, write_timeslices_csv
from tritongen.workflows.loadtest import (
    DEFAULT_MAX_ERROR_RATE,
    Gates,
    LoadTestHooks,
    LoadTestRequest,
    run_label,
    run_loadtest,
)


@dataclass(frozen=True)
class ServeFlags:
    """The embedded server a load test may start for itself."""

    serve: Serve = None
    skip_failed: Annotated[
        bool,
        reworded(
            SkipFailed,
            "With --serve: serve the whole repository, leaving out (one line each) the models that fail "
            "to load; the models under load must load (default: only those models).",
        ),
    ] = False
    load_timeout: Annotated[
        float | None,
        reworded(
            LoadTimeout,
            "With --serve: seconds the server may take to start and load the models (default 120 plus "
            "15 per model). Past it the test fails, naming the models still loading; the log is kept.",
        ),
    ] = None


@dataclass(frozen=True)
class GateFlags:
    """How a load test is judged: its CI gates; the client floor and server trace beside its figures."""

    slo_p99_ms: Annotated[
        float | None, reworded(SloP99, "Exit 1 when any run's P99 exceeds this (a CI gate).")
    ] = None
    max_error_rate: Annotated[
        float,
        typer.Option(
            "--max-error-rate",
            min=0.0,
            max=1.0,
            help="Exit 1 when a run's failed requests exceed this fraction (0: any error fails).",
        ),
    ] = DEFAULT_MAX_ERROR_RATE
    calibrate: Annotated[
        bool,
        typer.Option(
            "--calibrate",
            help="First measure the client's own floor at each level (requests the server answers at once, "
            "3 s each), and say where a run's P50 is within 3x of it.",
        ),
    ] = False
    server_trace: Annotated[
        bool,
        typer.Option(
            "--server-trace",
            help="Trace requests in the server (its trace API; its settings put back after) and split the "
            "median and slowest 1% requests into client send, HTTP, queue, compute and client receive.",
        ),
    ] = False
    trace_rate: Annotated[
        int | None,
        typer.Option(
            "--trace-rate", min=1, help="With --server-trace: trace one request in N (default 1: all)."
        ),
    ] = None
    find_max: Annotated[
        bool,
        reworded(
            FindMax,
            "Search for the most load within the SLO (--slo-p99-ms, or --slo for an LLM load): from the "
            "level given, doubling, then bisecting; reports the bracket [met, missed).",
        ),
    ] = False
    max_level: Annotated[
        float | None,
        typer.Option(
            "--max-level", min=0.0, help="With --find-max: the highest level searched (256; 20000/s)."
        ),
    ] = None
    precision: Annotated[
        float | None,
        typer.Option(
            "--search-precision", help="With --find-max: stop once missed/met is within 1 + this (0.1)."
        ),
    ] = None
    wire: Annotated[
        bool,
        typer.Option(
            "--wire",
            help="Capture the loopback traffic (tcpdump; root or CAP_NET_RAW) and check each run's P50-P99.9 "
            "against the same requests' wire latency plus the client's own time.",
        ),
    ] = False


@option_groups(
    load=Pick(helps={"seed": "Seed of random inputs and Poisson arrivals."}),
    output=Pick(
        only=("json_path", "csv_path", "plot_path", "html_path"),
        helps={"plot_path": "Write a latency-vs-throughput PNG."},
    ),
)
def loadtest_command(
    load: LoadFlags,
    run: RunFlags,
    rounds: RoundsFlags,
    output: OutputFlags,
    gates: GateFlags,
    llm: LlmFlags,
    serving: ServeFlags,
    shape: ShapeFlags,
    model: Annotated[
        str | None,
        typer.Argument(help="Served model name, e.g. mlp_onnx (none with --worker).", show_default=False),
    ] = None,
    url: Url = None,
) -> None:
    """Load-test MODEL: one run per concurrency (closed loop) or rate (open loop) level (and round)."""
    with user_errors():
        if run.worker:  # a load worker of a master elsewhere, which sends the load options
            refused = _not_for_workers(url, serving)
            run_worker_mode(model, run, given_options(load, rounds, output, gates, llm, shape) + refused)
            return
        request = _request(model, url, (load, shape), run, rounds, gates, llm, serving)
        for warning in request.check():
            say(f"warning: {warning}", err=True)
        laid_out = request.spec.shape
        if laid_out is not None:  # what will be sent, and what was left out of it
            notes = laid_out.notes(request.spec.warmup_s)
            for line in (laid_out.describe(), *(f"note: {note}" for note in notes)):
                err_console.print(line, highlight=False, markup=False)
        if request.spec.rounds > 1:
            err_console.print(request.cost_text(), highlight=False, markup=False)
        if request.spec.web_port is not None:  # the same port for every run, level after level
            err_console.print(
                f"Locust web UI: http://{WEB_HOST}:{request.spec.web_port}", highlight=False, markup=False
            )
        with stop_on_signals() as stopping, live_line(run_text) as show:
            outcome = run_loadtest(request, LoadTestHooks(serving_hooks(), progress=show, stop=stopping))
        _write_outputs(outcome.report, output, gates.slo_p99_ms)
        _print_report(outcome.report)
        finish(outcome.verdict)


def _request(
    model: str | None,
    url: str | None,
    loads: tuple[LoadFlags, ShapeFlags],
    run: RunFlags,
    rounds: RoundsFlags,
    gates: GateFlags,
    llm: LlmFlags,
    serving: ServeFlags,
) -> LoadTestRequest:
    """The load test asked, from the command's options (not yet checked against each other).

    Raises:
        ConfigError: no MODEL, or a malformed option.
    """
    if model is None:
        raise ConfigError("MODEL is missing", "e.g. tritongen loadtest mlp_onnx --concurrency 1,8")
    load, shape_flags = loads
    check_confidence(rounds.confidence)  # the report's intervals use it; the spec does not carry it
    saturation = SaturationRule(gates.slo_p99_ms, rounds.confidence) if run.stop_at_saturation else None
    shape = shape_flags.load_shape(load, model, parse_arrival(run.arrival))
    spec = load_spec(
        model, url, load, run, rounds=rounds.count(default=1), llm=llm.load(), stop_at=saturation, shape=shape
    )
    if gates.trace_rate is not None and not gates.server_trace:
        raise ConfigError("--trace-rate applies with --server-trace", "add --server-trace, or drop it")
    if shape is not None and run.mix is not None:
        raise ConfigError(f"{shape.option} lays out one model's sends: --mix does not apply", "drop --mix")
    traced = (gates.trace_rate or 1) if gates.server_trace else None
    search = max_search(spec, gates, run.stop_at_saturation)
    return LoadTestRequest(
        spec=replace(
            spec,
            end_when_all_fail=gates.max_error_rate < 1
            and search is None,  # a search goes past failing levels
            server_trace=traced,
            wire=gates.wire,
            search=search or spec.search,
        ),
        mix=Mix.parse(model, run.mix),
        gates=settings(Gates, gates),
        serve=serving.serve,
        skip_failed=serving.skip_failed,
        load_timeout_s=serving.load_timeout,
        confidence=rounds.confidence,
        calibrate=gates.calibrate,
    )


def max_search(spec: LoadSpec, gates: GateFlags, saturation: bool) -> MaxSearch | None:
    """``--find-max``'s search from the one level given (None without it).

    Raises:
        ConfigError: --max-level or --search-precision without --find-max, several levels, or
            --stop-at-saturation.
    """
    if not gates.find_max:
        given = [
            flag
            for flag, value in (("--max-level", gates.max_level), ("--search-precision", gates.precision))
            if value is not None
        ]
        refuse_given(given, "applies with --find-max", "add --find-max, or drop it")
        return None
    if len(spec.levels) != 1 or saturation:
        raise ConfigError(
            "--find-max chooses its own levels from one to start at",
            "give one --concurrency or --rate, and leave --stop-at-saturation out",
        )
    slo = spec.llm.slo if spec.llm is not None else None
    objective = SloObjective(
        p99_ms=gates.slo_p99_ms,
        ttft_ms=slo.ttft_ms if slo else None,
        itl_ms=slo.itl_ms if slo else None,
        e2e_ms=slo.e2e_ms if slo else None,
    )
    return MaxSearch(
        start=spec.levels[0],
        cap=DEFAULT_CAP[spec.mode] if gates.max_level is None else gates.max_level,
        objective=objective,
        precision=DEFAULT_PRECISION if gates.precision is None else gates.precision,
        whole=spec.mode == "concurrency",
    )


def _not_for_workers(url: str | None, serving: ServeFlags) -> list[str]:
    """The options given that a load worker does not take (its master sends the load options)."""
    given = [
        ("--url", url),
        ("--serve", serving.serve),
        ("--skip-failed", serving.skip_failed),
        ("--load-timeout", serving.load_timeout),
    ]
    return [option for option, value in given if value]


def _write_outputs(report: LoadTestReport, output: OutputFlags, slo: float | None) -> None:
    if output.json_path is not None:
        report.write_json(output.json_path)
    if output.csv_path is not None:
        report.write_csv(output.csv_path)
        write_timeslices_csv(report, output.csv_path)
    if output.plot_path is not None and any(r.latency_us for r in report.runs):
        from tritongen.report.llm_plots import is_llm_report, plot_tokens
        from tritongen.report.plots import plot_latency_vs_throughput

        plot_timeslices(report, output.plot_path)  # beside it: PLOT.timeslices.png, where there are slices
        if is_llm_report(report):  # an LLM load: its token latencies and tokens/s against the load
            plot_tokens(report, output.plot_path)
        else:
            plot_latency_vs_throughput(report, output.plot_path, slo)
    if output.html_path is not None:
        from tritongen.report.html import write_documents

        write_documents([(report.model, report)], output.html_path)


def _print_report(report: LoadTestReport) -> None:
    from tritongen.loadtest.llm.runs import conversation_note
    from tritongen.report.kind_tables import llm_line
    from tritongen.report.loadtest_tables import gpu_line, loadtest_report_tables
    from tritongen.report.table_data import to_rich
    from tritongen.report.timeslice_report import schedule_lines
    from tritongen.report.trace_report import trace_lines

    if any(run.latency_us for run in report.runs):  # else a table of dashes: the errors say why
        for table in loadtest_report_tables(report):
            console.print(to_rich(table))
        for line in trace_lines(report) + schedule_lines(report):
            say(line)
    for run in report.runs:
        if run.errors_by_kind:
            say(f"{run_label(run)} errors: {run.errors_by_kind}")
        for kind in run.errors_by_kind:
            if kind in run.error_messages:
                say(f"{run_label(run)} first {kind}: {run.error_messages[kind]}")
        for line in validation_lines(run.validation):
            say(f"{run_label(run)} {line}")
        for warning in run.warnings:
            err_console.print(
                f"[yellow]warning:[/] {run_label(run)}: {warning}", highlight=False, soft_wrap=True
            )
        gpu = run.gpu_summary()
        if gpu is not None:
            console.print(gpu_line(run_label(run), gpu), highlight=False, markup=False)
        if run.output_tokens_per_s is not None:
            say(llm_line(run_label(run), run))
            for line in conversation_note(run):
                say(f"{run_label(run)} {line}")
        if run.llm_server:
            say(f"{run_label(run)} {vllm_text(run.llm_server)}")
    if report.sweep_stop is not None:
        say(report.sweep_stop.summary())
    if report.find_max is not None:
        say(report.find_max.summary())
    if report.client_floor is not None:
        for line in floor_lines(report.client_floor, report.runs, run_label):
            say(line)
