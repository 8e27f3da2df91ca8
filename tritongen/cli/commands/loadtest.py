"""``tritongen loadtest``: QPS, microsecond latency percentiles and utilisation, per load level."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.live import Live
from rich.text import Text

from tritongen.cli.boundary import EXIT_INTERRUPTED, stop_on_signals, user_errors
from tritongen.cli.console import console, err_console
from tritongen.cli.load_worker import given_options, run_worker_mode
from tritongen.cli.options.groups import Pick, option_groups, reworded
from tritongen.cli.options.llm import LlmFlags
from tritongen.cli.options.load import LoadFlags, RoundsFlags, RunFlags, load_spec
from tritongen.cli.options.output import OutputFlags
from tritongen.cli.options.shared import Serve, SkipFailed, SloP99, Url
from tritongen.cli.serving import serving_hooks
from tritongen.client.openai_api import openai_address
from tritongen.errors import ConfigError, ServerError
from tritongen.intervals import check_confidence
from tritongen.loadtest.distributed import loopback_warning
from tritongen.loadtest.locust_process import WEB_HOST
from tritongen.loadtest.mix import Mix, run_mix_test
from tritongen.loadtest.result import LoadTestReport, RunResult, gpu_source_text
from tritongen.loadtest.runner import Progress, run_load_test
from tritongen.loadtest.saturation import SaturationRule
from tritongen.loadtest.spec import LoadSpec, seconds_text
from tritongen.loadtest.validation import validation_failure, validation_lines
from tritongen.metrics.vllm import vllm_text
from tritongen.server.embedded import embedded_server

DEFAULT_MAX_ERROR_RATE = 0.01


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
        if model is None:
            raise ConfigError("MODEL is missing", "e.g. tritongen loadtest mlp_onnx --concurrency 1,8")
        check_confidence(rounds.confidence)  # the report's intervals use it; the spec does not carry it
        spec = load_spec(model, url, load, run, rounds=rounds.count(default=1))
        spec = replace(spec, llm=llm.load())
        if spec.llm is not None and spec.llm.openai:
            spec = replace(spec, url=openai_address(spec.url))
        if run.stop_at_saturation:
            spec = replace(spec, stop_at=SaturationRule(gates.slo_p99_ms, rounds.confidence))
        spec.check()
        _check_master(spec, serve, skip_failed)
        mix = Mix.parse(model, run.mix)
        mix.check(spec.mode, spec.levels)
        if spec.rounds > 1:
            err_console.print(f"{rounds_cost(spec)}", highlight=False, markup=False)
        if spec.web_port is not None:  # the same port for every run, level after level
            err_console.print(
                f"Locust web UI: http://{WEB_HOST}:{spec.web_port}", highlight=False, markup=False
            )
        with _server(spec, serve, mix.models, skip_failed) as spec:
            report = _run(spec, mix)
        report.confidence = rounds.confidence
        _write_outputs(report, output, gates.slo_p99_ms)
        _print_report(report)
        _finish(report, gates.slo_p99_ms, gates.max_error_rate)


def _not_for_workers(url: str | None, serve: Path | None, skip_failed: bool) -> list[str]:
    """The options given that a load worker does not take (its master sends the load options)."""
    given = [("--url", url), ("--serve", serve), ("--skip-failed", skip_failed)]
    return [option for option, value in given if value]


def _check_master(spec: LoadSpec, serve: Path | None, skip_failed: bool = False) -> None:
    """Refuse ``--serve`` with ``--master``, and ``--skip-failed`` without ``--serve``.

    Warn when ``--master`` workers would load their own loopback.

    Raises:
        ConfigError: ``--master`` with ``--serve``, or ``--skip-failed`` without it.
    """
    if skip_failed and serve is None:
        raise ConfigError("--skip-failed needs --serve REPO", "add --serve, or drop --skip-failed")
    if spec.distributed is None:
        return
    if serve is not None:
        raise ConfigError(
            "--master and --serve exclude each other: the server would listen on this machine's "
            "loopback, which workers on other machines cannot reach",
            "serve the model where the workers reach it and give its address with --url",
        )
    warning = loopback_warning(spec.url)
    if warning is not None:
        err_console.print(f"warning: {warning}", highlight=False, markup=False, soft_wrap=True)


def rounds_cost(spec: LoadSpec) -> str:
    """How long the runs will take, said before a long run starts."""
    runs = spec.rounds * len(spec.levels)
    least, most = runs * spec.run_seconds(), runs * spec.run_seconds(longest=True)
    return (
        f"{len(spec.levels)} level(s) × {spec.rounds} round(s), levels interleaved: {runs} runs, "
        f"about {seconds_text(least)} (up to {seconds_text(most)} while runs wait to be stable)"
    )


@contextlib.contextmanager
def _server(
    spec: LoadSpec, serve: Path | None, models: tuple[str, ...], skip_failed: bool = False
) -> Iterator[LoadSpec]:
    if serve is None:
        yield spec
        return
    with embedded_server(serve, models, serving_hooks(), skip_failed=skip_failed) as server:
        yield replace(
            spec,
            url=server.http_url if spec.protocol == "http" else server.grpc_url,
            metrics_url=server.metrics_url,
        )


def _run(spec: LoadSpec, mix: Mix) -> LoadTestReport:
    line = Text("starting")

    def show(progress: Progress) -> None:
        qps = f"{progress.qps:,.0f} req/s" if progress.qps is not None else "…"
        p99 = f"P99 {progress.p99_us / 1000:.2f} ms" if progress.p99_us is not None else ""
        stable = "stable" if progress.stable else "settling"
        line.plain = (
            f"{progress.label}: {progress.phase} {progress.measured_s:.0f}/{progress.target_s:.0f} s  "
            f"{qps}  {p99}  errors {progress.errors}  {stable}"
        )

    with stop_on_signals() as stopping, Live(line, console=err_console, refresh_per_second=4, transient=True):
        if mix.mixed:
            return run_mix_test(spec, mix, progress=show, stop=stopping)
        return run_load_test(spec, progress=show, stop=stopping)


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
    console.print(to_rich(loadtest_table(document)))
    over_rounds = loadtest_rounds_table(document)
    if over_rounds is not None:
        console.print(to_rich(over_rounds))
    streams = streaming_table(document)
    if streams is not None:
        console.print(to_rich(streams))
    sequences = sequence_table(document)
    if sequences is not None:
        console.print(to_rich(sequences))
    mixed = loadtest_models_table(document)
    if mixed is not None:
        console.print(to_rich(mixed))
    per_model = server_models_table(document)
    if per_model is not None:
        console.print(to_rich(per_model))
    for run in report.runs:
        if run.errors_by_kind:
            console.print(
                f"{_level(run)} errors: {run.errors_by_kind}", highlight=False, soft_wrap=True, markup=False
            )
        for line in validation_lines(run.validation):
            console.print(f"{_level(run)} {line}", highlight=False, soft_wrap=True, markup=False)
        for warning in run.warnings:
            err_console.print(
                f"[yellow]warning:[/] {_level(run)}: {warning}", highlight=False, soft_wrap=True
            )
        if run.gpu:
            console.print(_gpu_line(run, run.gpu), highlight=False, markup=False)
        if run.output_tokens_per_s is not None:
            console.print(_llm_line(run), highlight=False, markup=False, soft_wrap=True)
        if run.llm_server:
            console.print(
                f"{_level(run)} {vllm_text(run.llm_server)}", highlight=False, markup=False, soft_wrap=True
            )
    if report.sweep_stop is not None:
        console.print(report.sweep_stop.summary(), highlight=False, markup=False, soft_wrap=True)


def _llm_line(run: RunResult) -> str:
    """An LLM run's token figures: TTFT, ITL and TPOT (P50 / P99, ms), tokens/s, goodput."""

    def ms(figures: dict[str, float] | None) -> str:
        if not figures:
            return "–"
        return f"{figures['p50'] / 1000:.2f} / {figures['p99'] / 1000:.2f} ms"

    per_user = run.output_tokens_per_s_per_user
    return (
        f"{_level(run)} TTFT {ms(run.ttft_us)}, ITL {ms(run.itl_us)}, TPOT {ms(run.tpot_us)} (P50 / P99); "
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
        f"{_level(run)} GPU util mean {gpu['util_mean']} max {gpu['util_max']}, "
        f"memory max {gpu['mem_max_bytes']} B ({source})"
    )


def _level(run: RunResult) -> str:
    if run.sequences_per_s is not None:  # a sequence model: sequences in flight
        return f"seq={run.concurrency}"
    return f"c={run.concurrency}" if run.mode == "concurrency" else f"{run.target_rate:g}/s"


def check_validated(report: LoadTestReport) -> None:
    """Fail when any response of any run differed from its expected outputs (as perf_analyzer does).

    Raises:
        ValidationError: some response did not match, whatever ``--max-error-rate`` allows.
    """
    failure = validation_failure(report.runs, _level)
    if failure is not None:
        raise failure


def _finish(report: LoadTestReport, slo_p99_ms: float | None, max_error_rate: float) -> None:
    if report.status == "interrupted":
        err_console.print("[bold red]interrupted:[/] partial results written", soft_wrap=True)
        raise typer.Exit(EXIT_INTERRUPTED)
    if report.status == "aborted":
        reason = next((r.reason for r in report.runs if r.reason), "the run stopped early")
        raise ServerError(f"load test aborted: {reason}", "partial results were written; check the server")
    check_validated(report)
    failing = [r for r in report.runs if r.errors and r.errors > max_error_rate * r.requests]
    if failing:
        worst = max(failing, key=lambda r: r.errors / max(r.requests, 1))
        kinds = ", ".join(f"{kind}: {n}" for kind, n in sorted(worst.errors_by_kind.items()))
        raise ServerError(
            f"{_level(worst)}: {worst.errors / max(worst.requests, 1):.1%} of requests failed ({kinds}), "
            f"above --max-error-rate {max_error_rate:g}",
            "results were written; the JSON counts the errors by kind, the server log says why",
        )
    if slo_p99_ms is None:
        return
    if report.rounds > 1:
        # In rounds, a level is judged on its median P99: one noisy round does not fail the gate.
        what = f"level(s) with a median P99 over {report.rounds} rounds above"
        figures = [
            (f"c={lv.level:g}" if lv.mode == "concurrency" else f"{lv.level:g}/s", p99.median)
            for lv in report.levels()
            if (p99 := lv.latency_us.get("p99"))
        ]
    else:
        what = "run(s) above P99"
        figures = [(_level(r), r.latency_us["p99"]) for r in report.runs if r.latency_us]
    missed = [(where, p99_us) for where, p99_us in figures if p99_us > slo_p99_ms * 1000]
    if missed:
        where, worst_us = max(missed, key=lambda m: m[1])
        err_console.print(
            f"[bold red]SLO missed:[/] {len(missed)} {what} {slo_p99_ms:g} ms "
            f"(worst {where}: {worst_us / 1000:.3f} ms)",
            soft_wrap=True,
            highlight=False,
        )
        raise typer.Exit(1)
