"""``tritongen loadtest``: QPS, microsecond latency percentiles and utilisation, per load level."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer
from rich.live import Live
from rich.text import Text

from tritongen.cli.common import (
    EXIT_INTERRUPTED,
    console,
    err_console,
    parse_int_list,
    stop_on_signals,
    user_errors,
)
from tritongen.cli.options import (
    Confidence,
    HtmlOut,
    JsonOut,
    ModelName,
    Protocol,
    ProtocolChoice,
    Rounds,
    Serve,
    Shapes,
    Url,
    embedded_server,
)
from tritongen.client.endpoint import DEFAULT_PORTS
from tritongen.client.inputs import parse_shape_overrides
from tritongen.errors import ConfigError, ServerError
from tritongen.intervals import DEFAULT_CONFIDENCE, check_confidence
from tritongen.loadtest.result import LoadTestReport, RunResult
from tritongen.loadtest.runner import Progress, run_load_test
from tritongen.loadtest.spec import LoadSpec, parse_duration, seconds_text


def loadtest_command(
    model: ModelName,
    url: Url = None,
    protocol: Protocol = ProtocolChoice.http,
    concurrency: Annotated[
        str | None,
        typer.Option(
            "--concurrency", help="Closed loop: in-flight requests per run, e.g. 1,8,32.", show_default=False
        ),
    ] = None,
    rate: Annotated[
        str | None,
        typer.Option("--rate", help="Open loop: requests/s per run, e.g. 500,1000.", show_default=False),
    ] = None,
    arrival: Annotated[
        str, typer.Option("--arrival", help="Open-loop arrivals: constant or poisson.")
    ] = "constant",
    batch_size: Annotated[int, typer.Option("--batch-size", help="Batch size of each request.", min=1)] = 1,
    shapes: Shapes = None,
    input_data: Annotated[
        str, typer.Option("--input-data", help="random, zeros, or an .npz with one array per input.")
    ] = "random",
    duration: Annotated[str, typer.Option("--duration", help="Measured time per run, e.g. 30s.")] = "30s",
    warmup: Annotated[
        str, typer.Option("--warmup", help="Load before measuring, excluded from figures.")
    ] = "5s",
    max_duration: Annotated[
        str | None,
        typer.Option(
            "--max-duration",
            help="Cap while waiting for stability (default 3 × duration).",
            show_default=False,
        ),
    ] = None,
    window: Annotated[
        str | None,
        typer.Option("--window", help="Measurement window (default duration/6, 1-5 s).", show_default=False),
    ] = None,
    processes: Annotated[
        str,
        typer.Option(
            "--processes", help="Locust worker processes, or auto (enough not to be the bottleneck)."
        ),
    ] = "auto",
    metrics_url: Annotated[
        str | None,
        typer.Option(
            "--metrics-url",
            help="Prometheus endpoint (default: the server host, port 8002).",
            show_default=False,
        ),
    ] = None,
    json_path: JsonOut = None,
    csv_path: Annotated[
        Path | None, typer.Option("--csv", help="Write results as CSV.", show_default=False)
    ] = None,
    plot_path: Annotated[
        Path | None, typer.Option("--plot", help="Write a latency-vs-throughput PNG.", show_default=False)
    ] = None,
    html_path: HtmlOut = None,
    slo_p99_ms: Annotated[
        float | None,
        typer.Option(
            "--slo-p99-ms", help="Exit 1 when any run's P99 exceeds this (a CI gate).", show_default=False
        ),
    ] = None,
    max_error_rate: Annotated[
        float,
        typer.Option(
            "--max-error-rate",
            min=0.0,
            max=1.0,
            help="Exit 1 when a run's failed requests exceed this fraction (0: any error fails).",
        ),
    ] = 0.01,
    serve: Serve = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of random inputs and Poisson arrivals.")] = 0,
    rounds: Rounds = None,
    confidence: Confidence = DEFAULT_CONFIDENCE,
) -> None:
    """Load-test MODEL: one run per concurrency (closed loop) or rate (open loop) level (and round)."""
    with user_errors():
        check_confidence(confidence)
        spec = load_spec(
            model, url, protocol.value, concurrency, rate, arrival, batch_size, shapes, input_data,
            duration, warmup, max_duration, window, processes, metrics_url, seed,
            rounds=1 if rounds is None else rounds,
        )  # fmt: skip
        spec.check()
        if spec.rounds > 1:
            err_console.print(f"{rounds_cost(spec)}", highlight=False, markup=False)
        with _server(spec, serve) as spec:
            report = _run(spec)
        report.confidence = confidence
        _write_outputs(report, json_path, csv_path, plot_path, slo_p99_ms, html_path)
        _print_report(report)
        _finish(report, slo_p99_ms, max_error_rate)


def load_spec(
    model: str,
    url: str | None,
    protocol: str,
    concurrency: str | None,
    rate: str | None,
    arrival: str,
    batch_size: int,
    shapes: list[str] | None,
    input_data: str,
    duration: str,
    warmup: str,
    max_duration: str | None,
    window: str | None,
    processes: str,
    metrics_url: str | None,
    seed: int,
    rounds: int = 1,
) -> LoadSpec:
    """The load spec from the command-line values (shared by ``loadtest`` and ``tune``).

    Raises:
        ConfigError: contradictory or malformed values.
    """
    if concurrency and rate:
        raise ConfigError("--concurrency and --rate exclude each other", "use one: closed or open loop")
    if arrival not in ("constant", "poisson"):
        raise ConfigError(f"--arrival {arrival!r} is unknown", "use constant or poisson")
    levels: tuple[float, ...]
    if rate:
        try:
            levels = tuple(float(v) for v in rate.split(",") if v.strip())
        except ValueError as e:
            raise ConfigError(f"--rate {rate!r} is not a list of numbers", "e.g. --rate 500,1000") from e
        mode = "rate"
    else:
        levels = tuple(float(v) for v in (parse_int_list(concurrency or "1", "--concurrency") or (1,)))
        mode = "concurrency"
    if processes != "auto" and not processes.isdigit():
        raise ConfigError(f"--processes {processes!r} is not a number", "use a count or auto")
    data: str | Path = input_data
    if input_data not in ("random", "zeros"):
        data = Path(input_data)
    return LoadSpec(
        model=model,
        url=url or f"localhost:{DEFAULT_PORTS[protocol]}",
        protocol=protocol,  # type: ignore[arg-type]
        mode=mode,  # type: ignore[arg-type]
        levels=levels,
        arrival=arrival,  # type: ignore[arg-type]
        batch_size=batch_size,
        shapes=parse_shape_overrides(shapes or []),
        input_data=data,  # type: ignore[arg-type]
        duration_s=parse_duration(duration, "--duration"),
        warmup_s=parse_duration(warmup, "--warmup"),
        max_duration_s=parse_duration(max_duration, "--max-duration") if max_duration else None,
        window_s=parse_duration(window, "--window") if window else None,
        processes=None if processes == "auto" else int(processes),
        metrics_url=metrics_url,
        seed=seed,
        rounds=rounds,
    )


def rounds_cost(spec: LoadSpec) -> str:
    """How long the runs will take, said before a long run starts."""
    runs = spec.rounds * len(spec.levels)
    least, most = runs * spec.run_seconds(), runs * spec.run_seconds(longest=True)
    return (
        f"{len(spec.levels)} level(s) × {spec.rounds} round(s), levels interleaved: {runs} runs, "
        f"about {seconds_text(least)} (up to {seconds_text(most)} while runs wait to be stable)"
    )


@contextlib.contextmanager
def _server(spec: LoadSpec, serve: Path | None) -> Iterator[LoadSpec]:
    if serve is None:
        yield spec
        return
    with embedded_server(serve, spec.model) as server:
        yield replace(
            spec,
            url=server.http_url if spec.protocol == "http" else server.grpc_url,
            metrics_url=server.metrics_url,
        )


def _run(spec: LoadSpec) -> LoadTestReport:
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
        return run_load_test(spec, progress=show, stop=stopping)


def _write_outputs(
    report: LoadTestReport,
    json_path: Path | None,
    csv_path: Path | None,
    plot_path: Path | None,
    slo: float | None,
    html_path: Path | None = None,
) -> None:
    if json_path is not None:
        report.write_json(json_path)
    if csv_path is not None:
        report.write_csv(csv_path)
    if plot_path is not None and any(r.latency_us for r in report.runs):
        from tritongen.report.plots import plot_latency_vs_throughput

        plot_latency_vs_throughput(report, plot_path, slo)
    if html_path is not None:
        from tritongen.report.html import write_documents

        write_documents([(report.model, report.to_json())], html_path)


def _print_report(report: LoadTestReport) -> None:
    from tritongen.report.tables import loadtest_rounds_table, loadtest_table, to_rich

    document = report.to_json()
    console.print(to_rich(loadtest_table(document)))
    over_rounds = loadtest_rounds_table(document)
    if over_rounds is not None:
        console.print(to_rich(over_rounds))
    for run in report.runs:
        if run.errors_by_kind:
            console.print(
                f"{_level(run)} errors: {run.errors_by_kind}", highlight=False, soft_wrap=True, markup=False
            )
        for warning in run.warnings:
            err_console.print(
                f"[yellow]warning:[/] {_level(run)}: {warning}", highlight=False, soft_wrap=True
            )
        if run.gpu:
            gpu = run.gpu
            console.print(
                f"{_level(run)} GPU util mean {gpu['util_mean']} max {gpu['util_max']}, "
                f"memory max {gpu['mem_max_bytes']} B",
                highlight=False,
            )


def _level(run: RunResult) -> str:
    return f"c={run.concurrency}" if run.mode == "concurrency" else f"{run.target_rate:g}/s"


def _finish(report: LoadTestReport, slo_p99_ms: float | None, max_error_rate: float) -> None:
    if report.status == "interrupted":
        err_console.print("[bold red]interrupted:[/] partial results written", soft_wrap=True)
        raise typer.Exit(EXIT_INTERRUPTED)
    if report.status == "aborted":
        reason = next((r.reason for r in report.runs if r.reason), "the run stopped early")
        raise ServerError(f"load test aborted: {reason}", "partial results were written; check the server")
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
