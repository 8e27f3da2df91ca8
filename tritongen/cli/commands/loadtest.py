"""``tritongen loadtest``: QPS, microsecond latency percentiles and utilisation, per load level."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated, Any

import typer

from tritongen.cli.boundary import stop_on_signals, user_errors
from tritongen.cli.console import console, err_console, say
from tritongen.cli.load_worker import given_options, run_worker_mode
from tritongen.cli.options.groups import Pick, option_groups, reworded
from tritongen.cli.options.llm import LlmFlags
from tritongen.cli.options.load import LoadFlags, RunFlags, load_spec
from tritongen.cli.options.output import OutputFlags
from tritongen.cli.options.rounds import RoundsFlags
from tritongen.cli.options.settings import settings
from tritongen.cli.options.shared import Serve, SkipFailed, SloP99, Url
from tritongen.cli.progress import live_line, run_text
from tritongen.cli.serving import serving_hooks
from tritongen.cli.verdict import finish
from tritongen.client.openai_api import openai_address
from tritongen.errors import ConfigError
from tritongen.intervals import check_confidence
from tritongen.loadtest.locust_process import WEB_HOST
from tritongen.loadtest.mix import Mix
from tritongen.loadtest.result import LoadTestReport, RunResult, gpu_source_text
from tritongen.loadtest.saturation import SaturationRule
from tritongen.loadtest.validation import validation_lines
from tritongen.metrics.vllm import vllm_text
from tritongen.workflows.loadtest import (
    DEFAULT_MAX_ERROR_RATE,
    Gates,
    LoadTestHooks,
    LoadTestRequest,
    run_label,
    run_loadtest,
)


@dataclass(frozen=True)
class GateFlags:
    """When a load test fails as a CI gate."""

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
    model: Annotated[
        str | None,
        typer.Argument(help="Served model name, e.g. mlp_onnx (none with --worker).", show_default=False),
    ] = None,
    url: Url = None,
    serve: Serve = None,
    skip_failed: Annotated[
        bool,
        reworded(
            SkipFailed,
            "With --serve: serve the whole repository, leaving out (one line each) the models that fail "
            "to load; the models under load must load (default: only those models).",
        ),
    ] = False,
) -> None:
    """Load-test MODEL: one run per concurrency (closed loop) or rate (open loop) level (and round)."""
    with user_errors():
        if run.worker:  # a load worker of a master elsewhere, which sends the load options
            refused = _not_for_workers(url, serve, skip_failed)
            run_worker_mode(model, run, given_options(load, rounds, output, gates, llm) + refused)
            return
        request = _request(model, url, load, run, rounds, gates, llm, serve, skip_failed)
        for warning in request.check():
            say(f"warning: {warning}", err=True)
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
    load: LoadFlags,
    run: RunFlags,
    rounds: RoundsFlags,
    gates: GateFlags,
    llm: LlmFlags,
    serve: Path | None,
    skip_failed: bool,
) -> LoadTestRequest:
    """The load test asked, from the command's options (not yet checked against each other).

    Raises:
        ConfigError: no MODEL, or a malformed option.
    """
    if model is None:
        raise ConfigError("MODEL is missing", "e.g. tritongen loadtest mlp_onnx --concurrency 1,8")
    check_confidence(rounds.confidence)  # the report's intervals use it; the spec does not carry it
    spec = load_spec(model, url, load, run, rounds=rounds.count(default=1))
    spec = replace(spec, llm=llm.load())
    if spec.llm is not None and spec.llm.openai:
        spec = replace(spec, url=openai_address(spec.url))
    if run.stop_at_saturation:
        spec = replace(spec, stop_at=SaturationRule(gates.slo_p99_ms, rounds.confidence))
    return LoadTestRequest(
        spec=spec,
        mix=Mix.parse(model, run.mix),
        gates=settings(Gates, gates),
        serve=serve,
        skip_failed=skip_failed,
        confidence=rounds.confidence,
    )


def _not_for_workers(url: str | None, serve: Path | None, skip_failed: bool) -> list[str]:
    """The options given that a load worker does not take (its master sends the load options)."""
    given = [("--url", url), ("--serve", serve), ("--skip-failed", skip_failed)]
    return [option for option, value in given if value]


def _write_outputs(report: LoadTestReport, output: OutputFlags, slo: float | None) -> None:
    if output.json_path is not None:
        report.write_json(output.json_path)
    if output.csv_path is not None:
        report.write_csv(output.csv_path)
    if output.plot_path is not None and any(r.latency_us for r in report.runs):
        from tritongen.report.llm_plots import is_llm_report, plot_tokens
        from tritongen.report.plots import plot_latency_vs_throughput

        if is_llm_report(report):  # an LLM load: its token latencies and tokens/s against the load
            plot_tokens(report, output.plot_path)
        else:
            plot_latency_vs_throughput(report, output.plot_path, slo)
    if output.html_path is not None:
        from tritongen.report.html import write_documents

        write_documents([(report.model, report.to_json())], output.html_path)


def _print_report(report: LoadTestReport) -> None:
    from tritongen.report.tables import (
        loadtest_models_table,
        loadtest_rounds_table,
        loadtest_table,
        sequence_table,
        server_models_table,
        streaming_table,
        to_rich,
    )

    document = report.to_json()
    tables = (
        loadtest_table(document),
        loadtest_rounds_table(document),
        streaming_table(document),
        sequence_table(document),
        loadtest_models_table(document),
        server_models_table(document),
    )
    for table in tables:
        if table is not None:
            console.print(to_rich(table))
    for run in report.runs:
        if run.errors_by_kind:
            say(f"{run_label(run)} errors: {run.errors_by_kind}")
        for line in validation_lines(run.validation):
            say(f"{run_label(run)} {line}")
        for warning in run.warnings:
            err_console.print(
                f"[yellow]warning:[/] {run_label(run)}: {warning}", highlight=False, soft_wrap=True
            )
        if run.gpu:
            console.print(_gpu_line(run, run.gpu), highlight=False, markup=False)
        if run.output_tokens_per_s is not None:
            say(_llm_line(run))
        if run.llm_server:
            say(f"{run_label(run)} {vllm_text(run.llm_server)}")
    if report.sweep_stop is not None:
        say(report.sweep_stop.summary())


def _llm_line(run: RunResult) -> str:
    """An LLM run's token figures: TTFT, ITL and TPOT (P50 / P99, ms), tokens/s, goodput."""

    def ms(figures: dict[str, float] | None) -> str:
        if not figures:
            return "–"
        return f"{figures['p50'] / 1000:.2f} / {figures['p99'] / 1000:.2f} ms"

    per_user = run.output_tokens_per_s_per_user
    return (
        f"{run_label(run)} TTFT {ms(run.ttft_us)}, ITL {ms(run.itl_us)}, TPOT {ms(run.tpot_us)} (P50 / P99); "
        f"{run.output_tokens_per_s or 0:,.1f} output tokens/s"
        + (f" ({per_user:,.1f} per user)" if per_user is not None else "")
        + f", goodput {run.goodput_per_s or 0:,.2f} req/s; tokens counted from {run.output_token_source}"
    )


def _gpu_line(run: RunResult, gpu: dict[str, Any]) -> str:
    """A level's GPU figures and where they came from (Triton's metrics or NVML)."""
    source = gpu_source_text(gpu.get("source"), gpu.get("memory_scope"))
    if gpu.get("devices"):
        source += ": " + ", ".join(gpu["devices"])
    return (
        f"{run_label(run)} GPU util mean {gpu['util_mean']} max {gpu['util_max']}, "
        f"memory max {gpu['mem_max_bytes']} B ({source})"
    )
