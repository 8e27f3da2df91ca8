"""``tritongen perf-analyzer`` (``tritongen pa``): perf_analyzer's command line, its report and its CSV.

The command line is perf_analyzer's, parsed by :mod:`tritongen.perfanalyzer.options`, so the
options are not Typer's: ``--help`` prints the table of what it takes.
"""

from __future__ import annotations

import typer
from rich.live import Live
from rich.text import Text

from tritongen.cli.boundary import EXIT_INTERRUPTED, stop_on_signals, user_errors
from tritongen.cli.console import console, err_console
from tritongen.client.endpoint import TritonEndpoint
from tritongen.errors import ServerError, TritongenError
from tritongen.io.loadgen_shared import STABILITY_WINDOWS
from tritongen.loadtest.result import RunResult
from tritongen.loadtest.runner import Progress
from tritongen.loadtest.validation import validation_failure
from tritongen.perfanalyzer.csv_file import write_pa_csv
from tritongen.perfanalyzer.options import PaOptions, help_text, parse_pa_args
from tritongen.perfanalyzer.sweep import ModelFacts, Sweep, model_facts, run_sweep
from tritongen.perfanalyzer.text import (
    level_lines,
    settings_lines,
    summary_lines,
    threshold_line,
    unstable_line,
)

CONTEXT = {"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []}
"""perf_analyzer's options reach the command as they are."""


def perf_analyzer_command(ctx: typer.Context) -> None:
    """Measure a model with perf_analyzer's command line: its options, its report and its CSV (-f)."""
    args = list(ctx.args)
    if not args or "--help" in args or "-h" in args:
        console.print(help_text(), highlight=False, markup=False, soft_wrap=True)
        return
    with user_errors():
        options = parse_pa_args(args)
        endpoint = TritonEndpoint(options.target_url, options.protocol_name, timeout_s=10)
        try:
            facts = model_facts(options, endpoint)
        finally:
            endpoint.close()
        _say(settings_lines(options, facts))
        sweep = _sweep(options, facts)
        _outputs(sweep)
        _say(summary_lines(sweep))
        _finish(sweep)


class UnstableError(TritongenError):
    """A level did not stabilise within ``-r`` windows: the sweep stopped there, as perf_analyzer stops."""


def _say(lines: list[str]) -> None:
    for line in lines:
        console.print(line, highlight=False, markup=False, soft_wrap=True)


def _sweep(options: PaOptions, facts: ModelFacts) -> Sweep:
    line = Text("starting")

    def show(progress: Progress) -> None:
        qps = f"{progress.qps:,.0f} req/s" if progress.qps is not None else "…"
        line.plain = f"{progress.label}: {progress.phase} {progress.measured_s:.0f} s  {qps}"

    def level_done(run: RunResult) -> None:
        _say([*level_lines(run, options), ""])
        if run.status == "ok" and not run.stable:
            err_console.print(unstable_line(run, options), highlight=False, markup=False, soft_wrap=True)

    with stop_on_signals() as stopping, Live(line, console=err_console, refresh_per_second=4, transient=True):
        return run_sweep(options, facts, progress=show, stop=stopping, on_level=level_done)


def _outputs(sweep: Sweep) -> None:
    options = sweep.options
    if options.csv is not None and sweep.report.runs:
        write_pa_csv(options.csv, sweep.report.runs, options)
    if options.profile_export is not None:
        sweep.report.write_json(options.profile_export)


def _finish(sweep: Sweep) -> None:
    report = sweep.report
    if report.status == "interrupted":
        err_console.print("[bold red]interrupted:[/] partial results written", soft_wrap=True)
        raise typer.Exit(EXIT_INTERRUPTED)
    if report.status == "aborted":
        reason = next((r.reason for r in report.runs if r.reason), "the run stopped early")
        raise ServerError(f"measurement aborted: {reason}", "partial results were written; check the server")
    over = threshold_line(sweep)
    if over is not None:
        err_console.print(over, highlight=False, markup=False, soft_wrap=True)
    failure = validation_failure(report.runs, _level)
    if failure is not None:
        raise failure
    if sweep.unstable is not None:
        raise UnstableError(
            f"Failed to obtain stable measurement at {_level(sweep.unstable)}: its last "
            f"{STABILITY_WINDOWS} windows differ by more than {sweep.options.stability_percentage:g}% "
            "(results were written)",
            "raise -p (the measurement window) or -r (the max trials), or loosen -s",
        )


def _level(run: RunResult) -> str:
    return (
        f"concurrency {run.concurrency}" if run.mode == "concurrency" else f"request rate {run.target_rate:g}"
    )
