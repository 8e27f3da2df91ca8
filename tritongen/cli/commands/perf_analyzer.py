"""``tritongen perf-analyzer`` (``tritongen pa``): perf_analyzer's command line, its report and its CSV.

The command line is perf_analyzer's, parsed by :mod:`tritongen.perfanalyzer.options`, so the
options are not Typer's: ``--help`` prints the table of what it takes.
"""

from __future__ import annotations

import typer

from tritongen.cli.boundary import stop_on_signals, user_errors
from tritongen.cli.console import say
from tritongen.cli.progress import live_line, sweep_text
from tritongen.cli.verdict import finish
from tritongen.loadtest.result import RunResult
from tritongen.perfanalyzer.csv_file import write_pa_csv
from tritongen.perfanalyzer.help import help_text
from tritongen.perfanalyzer.options import parse_pa_args
from tritongen.perfanalyzer.run import SweepHooks, run_perf_analyzer
from tritongen.perfanalyzer.sweep import ModelFacts, Sweep
from tritongen.perfanalyzer.text import level_lines, settings_lines, summary_lines, unstable_line

CONTEXT = {"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []}
"""perf_analyzer's options reach the command as they are."""


def perf_analyzer_command(ctx: typer.Context) -> None:
    """Measure a model with perf_analyzer's command line: its options, its report and its CSV (-f)."""
    args = list(ctx.args)
    if not args or "--help" in args or "-h" in args:
        say(help_text())
        return
    with user_errors():
        options = parse_pa_args(args)

        def facts_read(facts: ModelFacts) -> None:
            _say(settings_lines(options, facts))

        def level_done(run: RunResult) -> None:
            _say([*level_lines(run, options), ""])
            if run.status == "ok" and not run.stable:
                say(unstable_line(run, options), err=True)

        with stop_on_signals() as stopping, live_line(sweep_text) as show:
            hooks = SweepHooks(on_facts=facts_read, progress=show, on_level=level_done, stop=stopping)
            outcome = run_perf_analyzer(options, hooks)
        _outputs(outcome.sweep)
        _say(summary_lines(outcome.sweep))
        finish(outcome.verdict)


def _say(lines: list[str]) -> None:
    for line in lines:
        say(line)


def _outputs(sweep: Sweep) -> None:
    options = sweep.options
    if options.csv is not None and sweep.report.runs:
        write_pa_csv(options.csv, sweep.report.runs, options)
    if options.profile_export is not None:
        sweep.report.write_json(options.profile_export)
