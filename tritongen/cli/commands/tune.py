"""``tritongen tune``: preferred batch sizes, queue delay, instances and max batch against a P99 SLO."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from tritongen.cli.boundary import EXIT_INTERRUPTED, stop_on_signals, user_errors
from tritongen.cli.config_change import show_diff
from tritongen.cli.console import console, err_console, say
from tritongen.cli.llm.tune import (
    LLM_TUNE_FIELDS,
    LlmTuneFlags,
    LlmTuneInput,
    tune_llm,
)
from tritongen.cli.options.given import changed_flags, refuse_given
from tritongen.cli.options.groups import Pick, option_groups
from tritongen.cli.options.load import LoadFlags, load_spec
from tritongen.cli.options.output import OutputFlags
from tritongen.cli.options.rounds import AutoRoundsFlags
from tritongen.cli.options.settings import settings
from tritongen.cli.options.shared import Repo, SloP99
from tritongen.cli.options.tune import SHAPE_FIELDS, ApplyFlags, SearchFlags, ServerFlags, TuneTrialFlags
from tritongen.cli.serving import serving_hooks
from tritongen.errors import ConfigError
from tritongen.intervals import format_summary
from tritongen.loadtest.find_max import DEFAULT_CAP, MaxSearch, SloObjective
from tritongen.loadtest.spec import LoadSpec
from tritongen.stopping import StopRule, progress_text
from tritongen.triton.repository import is_local_vllm
from tritongen.tune.confirm import Confirmation
from tritongen.tune.document import TuneDocument
from tritongen.tune.report import TuneReport
from tritongen.tune.request import TuneRequest, plan
from tritongen.tune.runner import TuneHooks
from tritongen.tune.session import SessionHooks, TuneInterrupted, TuneOutcome, TuneSession, run_session
from tritongen.tune.space import Candidate, Current
from tritongen.tune.trial import TrialRecord, judged_by_latency

TRIAL_DURATION = "10s"
"""Each trial's measured time by default (a trace or stages: their own length)."""


@dataclass(frozen=True)
class TuneSearchFlags(SearchFlags, LlmTuneFlags):
    """The configs ``tune`` may try: batching and instances, or a local vLLM model's engine and its load."""


@option_groups(
    search=Pick(only=tuple(f.name for f in fields(SearchFlags)) + LLM_TUNE_FIELDS),
    load=Pick(
        defaults={"duration": TRIAL_DURATION, "warmup": "2s"},
        helps={
            "concurrency": "Closed-loop levels per trial (default 8).",
            "rate": "Open-loop levels per trial (requests/s).",
            "duration": "Measured time per level.",
            "warmup": "Load before measuring each trial.",
            "seed": "Seed of the adaptive search and the inputs.",
        },
    ),
    output=Pick(
        only=("json_path", "plot_path", "html_path"), helps={"plot_path": "Write a throughput-vs-P99 PNG."}
    ),
)
def tune_command(
    model: Annotated[str, typer.Argument(help="Model to tune (a directory of --repo).", show_default=False)],
    search: TuneSearchFlags,
    load: LoadFlags,
    rounds: AutoRoundsFlags,
    server: ServerFlags,
    trials: TuneTrialFlags,
    output: OutputFlags,
    applying: ApplyFlags,
    repo: Repo = Path("model_repository"),
    slo_p99_ms: SloP99 = None,
) -> None:
    """Tune MODEL's batching and instances live on Triton: the most inferences/s within the P99 SLO.

    The current config is the baseline; the best search configs are confirmed against it in
    interleaved rounds (by default until each one is decided), and one replaces it only when
    it is faster beyond the noise. Under --trace, --stages or one --rate (a load that sets the
    throughput itself), the lower P99 under that load decides instead. A local vLLM model: its
    engine's settings, for the most goodput.
    """
    with user_errors():
        if is_local_vllm(repo / model):  # a local vLLM model: its engine's settings, not batching
            refuse_given(
                changed_flags(trials, ("arrival", *SHAPE_FIELDS)),
                f"is not taken by the tune of a local vLLM model ({model}): its trials are scored by goodput",
                "replay it against the model as it is with tritongen loadtest --trace, or drop it",
            )
            given = LlmTuneInput(
                model=model, repo=repo, load=load, run=trials.run_flags(), llm=search,
                classic=_batching_options_given(search, server, trials, output, slo_p99_ms),
                rounds=rounds, max_trials=search.max_trials, url=server.url, admin_key=server.admin_key,
            )  # fmt: skip
            tune_llm(given, output.json_path, applying.apply, applying.diff)
            return
        refuse_given(
            changed_flags(search, LLM_TUNE_FIELDS),
            f"tunes a local vLLM model's engine; {model} is not one",
            "convert a language model with tritongen convert MODEL_DIR --formats vllm",
        )
        _check_server(server, applying)
        request = _request(model, search, load, rounds, trials, slo_p99_ms, server)
        session = settings(TuneSession, server, applying)
        hooks = SessionHooks(
            serving=serving_hooks(),
            trials=functools.partial(_trial_lines, request.stopping),
            on_start=_announce,
        )
        try:
            outcome = run_session(request, repo, session, hooks)
        except TuneInterrupted as e:
            err_console.print(
                f"interrupted: model config restored, partial results in {e.out_dir}", markup=False
            )
            raise typer.Exit(EXIT_INTERRUPTED) from e
        _outputs(outcome.report, output)
        _print(outcome.report)
        _finish(outcome, applying)


def _batching_options_given(
    search: SearchFlags,
    server: ServerFlags,
    trials: TuneTrialFlags,
    output: OutputFlags,
    slo_p99_ms: float | None,
) -> tuple[str, ...]:
    """The batching, background and report options given: a local vLLM model's tune refuses them."""
    return (
        *changed_flags(search, tuple(f.name for f in fields(SearchFlags) if f.name != "max_trials")),
        *changed_flags(
            server,
            ("background", "background_concurrency", "background_rate", "skip_failed", "load_timeout_s"),
        ),
        *changed_flags(trials, ("resume", "finalists")),
        *changed_flags(output, ("plot_path", "html_path")),
        *(["--slo-p99-ms"] if slo_p99_ms is not None else []),
    )


def _check_server(server: ServerFlags, applying: ApplyFlags) -> None:
    """Refuse server and apply options that exclude each other.

    Raises:
        ConfigError: ``--diff`` without ``--apply``; ``--serve`` or ``--skip-failed`` with ``--url``.
    """
    if applying.diff and not applying.apply:
        raise ConfigError("--diff shows what --apply would write", "add --apply")
    if server.url is None:
        return
    if server.serve:
        raise ConfigError("--serve and --url exclude each other", "tune the embedded server or a running one")
    embedded_only = (
        (server.skip_failed, "--skip-failed", "it chooses what the embedded server loads"),
        (server.load_timeout_s is not None, "--load-timeout", "it bounds the embedded server's start"),
    )
    for given, flag, why in embedded_only:
        if given:
            raise ConfigError(f"{flag} and --url exclude each other: {why}", "drop one of them")


def _request(
    model: str,
    search: SearchFlags,
    load: LoadFlags,
    rounds: AutoRoundsFlags,
    trials: TuneTrialFlags,
    slo_p99_ms: float | None,
    server: ServerFlags,
) -> TuneRequest:
    """What to tune and how, from the command's option groups (the space is completed from the config).

    Raises:
        ConfigError: a malformed or contradictory option.
    """
    count, stopping = rounds.rule(default_auto=True)  # a rule that cannot decide: refused first
    if search.composing == model:
        raise ConfigError(f"--composing {model} is the model under load itself", "drop --composing")
    shape = trials.load_shape_of(load, model, TRIAL_DURATION)  # a trace or stages: no default level
    if shape is None and not load.concurrency and not load.rate and not load.sequences:
        load = replace(load, concurrency="8")
    tuned = search.composing or model
    default_out = Path(f"tune-{model}" if tuned == model else f"tune-{model}-{tuned}")
    if trials.resume is not None and not trials.resume.is_dir():
        raise ConfigError(f"--resume {trials.resume} does not exist", "pass the directory of an earlier tune")
    return settings(
        TuneRequest, search, trials, rounds, load,
        model=tuned,
        space=search.space(),
        load=_trial_load(
            load_spec(model, url=None, load=load, run=trials.run_flags(), shape=shape), trials, slo_p99_ms
        ),
        slo_p99_ms=slo_p99_ms,
        out_dir=trials.resume or trials.out or default_out,
        rounds=count,
        background=server.background_spec(),
        stopping=stopping,
    )  # fmt: skip


def _trial_load(spec: LoadSpec, trials: TuneTrialFlags, slo_p99_ms: float | None) -> LoadSpec:
    """Each trial's load: ``spec``, or with ``--find-max`` a search for its most load within the SLO.

    Raises:
        ConfigError: ``--find-max`` without ``--slo-p99-ms``, or with several levels.
    """
    if not trials.find_max:
        return spec
    if slo_p99_ms is None:
        raise ConfigError("--find-max looks for each trial's most load within an SLO", "add --slo-p99-ms MS")
    if len(spec.levels) != 1:
        raise ConfigError("--find-max searches from one level", "give one --concurrency or --rate")
    search = MaxSearch(
        start=spec.levels[0],
        cap=DEFAULT_CAP[spec.mode],
        objective=SloObjective(p99_ms=slo_p99_ms),
        whole=spec.mode == "concurrency",
    )
    return replace(spec, search=search, end_when_all_fail=False)


def _announce(request: TuneRequest, note: str | None) -> None:
    """What will be tuned, under which load, in how many configs, and roughly how long it takes.

    ``note``: why the tune starts from the config the server reports, where it does.
    """
    if note is not None:
        console.print(f"[bold]{escape(request.model)}[/]: {escape(note)}", highlight=False, soft_wrap=True)
    space, slo, loaded = request.space, request.slo_p99_ms, request.load.model
    under = f" under the load of [bold]{escape(loaded)}[/]" if loaded != request.model else ""
    console.print(
        f"tuning [bold]{escape(request.model)}[/]{under}: {space.size} legal configs, "
        f"{len(space.skipped())} skipped as illegal, strategy {request.strategy}, "
        f"SLO P99 {slo if slo is not None else '∞'} ms; {plan(request).text()}"
        + (
            "; each trial searches its most load within the SLO (--find-max), so it runs more levels than one"
            if request.load.search is not None
            else ""
        )
        + _judging_text(request.load),
        highlight=False,
    )
    if request.load.shape is not None:
        for shape_note in request.load.shape.notes(request.load.warmup_s):
            console.print(f"note: {escape(shape_note)}", highlight=False, soft_wrap=True)


def _judging_text(load: LoadSpec) -> str:
    """What decides under a load that sets the throughput itself (a trace, stages, one rate); else nothing."""
    if load.shape is not None:
        return f"; every trial replays {load.shape.describe()}: the lower P99 under it wins"
    if judged_by_latency(load):
        return f"; every config that keeps up serves the {load.levels[0]:g}/s sent: the lower P99 wins"
    return ""


def _finish(outcome: TuneOutcome, applying: ApplyFlags) -> None:
    """After the report: a refusal or no config within the SLO as one error; what --apply did.

    Raises:
        ConfigError: the winner was refused, or no config met the SLO.
    """
    report, applied, refusal = outcome.report, outcome.applied, outcome.refusal
    if refusal is not None:
        raise ConfigError(f"not applied: {refusal.message}", refusal.hint)
    if not report.finalists and not report.current_feasible:
        raise ConfigError("no config met the SLO", "raise --slo-p99-ms or lower the load")
    if not applying.apply:
        return
    if applied is not None and applying.diff:
        show_diff(applied)
    elif applied is not None and report.winner is not None:
        say(f"applied {report.winner.key}: {applied.summary()}")
    else:
        config = outcome.config_path
        console.print(
            f"not applied: no config beat the current one significantly; {config} "
            + ("is unchanged" if config.exists() else "was not written (the server completes the config)"),
            markup=False,
            highlight=False,
            soft_wrap=True,
        )


@contextlib.contextmanager
def _trial_lines(rule: StopRule | None = None) -> Iterator[TuneHooks]:
    """A progress bar and a line per trial and round on stderr; SIGINT and SIGTERM stop the tune in order.

    ``rule``: the confirmation's rounds stop by it (``--rounds auto``), so the lines say so.
    """
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with stop_on_signals() as stopping, Progress(*columns, console=err_console, transient=True) as bar:
        lines = _TrialLines(bar, rule)
        yield TuneHooks(
            on_start=lines.started,
            on_done=lines.done,
            stop=stopping,
            on_round_start=lines.round_started,
            on_round=lines.round_done,
        )


class _TrialLines:
    """The progress bar of the search and of the confirmation, and the line each trial and round ends with."""

    def __init__(self, bar: Progress, rule: StopRule | None = None) -> None:
        self.bar = bar
        self.rule = rule
        self.search = bar.add_task("trials", total=None)
        self.confirming = bar.add_task("confirmation", total=None, visible=False)

    def started(self, number: int, total: int, candidate: Candidate | Current) -> None:
        self.bar.update(self.search, total=total + 1, description=f"trial {number}/{total}: {candidate.key}")

    def done(self, record: TrialRecord, reused: bool) -> None:
        self.bar.advance(self.search)
        m = record.measurement
        what = "reused" if reused else ("failed" if m.failed else "ok")
        p99 = f"{m.p99_us / 1000:.2f} ms" if m.p99_us is not None else "-"
        mark = "✓" if record.feasible else "✗"
        line = f"  {mark} {record.key}: {m.infer_per_s:,.0f} infer/s, P99 {p99} ({what})"
        line += f" {record.reason}" if record.reason else ""
        err_console.print(line, highlight=False, markup=False)

    def round_started(self, number: int, rounds: int, key: str) -> None:
        if not self.bar.tasks[self.confirming].visible:
            how = f"{rounds} round(s), interleaved"
            if self.rule is not None:
                how = f"interleaved rounds {self.rule.text()}"
            err_console.print(
                f"confirming the best search configs against the current config: {how}",
                highlight=False,
                markup=False,
            )
            self.bar.update(self.search, visible=False)
            self.bar.update(self.confirming, visible=True)
        of = f"{number} (at most {rounds})" if self.rule is not None else f"{number}/{rounds}"
        self.bar.update(self.confirming, description=f"round {of}: {key}")
        err_console.print(f"  round {of}: {key}", highlight=False, markup=False)

    def round_done(self, confirmation: Confirmation) -> None:
        figures = ", ".join(
            (
                f"{c.key} median P99 {c.p99_us.median / 1000:.1f} ms"
                if confirmation.by_latency and c.p99_us is not None
                else f"{c.key} {format_summary(c.infer_per_s)}/s"
            )
            + (f" ({c.ratio.text()})" if c.ratio is not None else "")
            for c in confirmation.contenders
        )
        of, deciding = f"{confirmation.completed}/{confirmation.rounds}", ""
        if confirmation.rule is not None:
            of = f"{confirmation.completed} (at most {confirmation.rounds})"
            deciding = f"; {progress_text(confirmation.verdicts)}"
        err_console.print(
            f"  round {of} done: {figures}{deciding}",
            highlight=False,
            markup=False,
        )


def _outputs(report: TuneReport, output: OutputFlags) -> None:
    json_path, plot_path, html_path = output.json_path, output.plot_path, output.html_path
    report.write_json(report.request.out_dir / "tune.json")
    if json_path is not None:
        report.write_json(json_path)
    if plot_path is not None:
        from tritongen.report.plots import confirmed_points, plot_tune, tune_points

        document = report.document()
        points, reference = tune_points(document)
        plot_tune(
            points, plot_path, f"tune {report.request.model}", report.request.slo_p99_ms, reference,
            confirmed_points(document),
        )  # fmt: skip
    if html_path is not None:
        from tritongen.report.html import write_documents

        write_documents([(report.request.model, report.document())], html_path)


def _print(report: TuneReport) -> None:
    from tritongen.report.table_data import to_rich
    from tritongen.report.tune_tables import background_text, tune_table

    document = report.document()
    console.print(to_rich(tune_table(document)))
    say(report.verdict())
    background = document.background_summary()
    if background is not None:
        say(background_text(background))
    for warning in report.warnings:
        err_console.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False, soft_wrap=True)
    _print_stopping(document)
    confirmation = report.confirmation
    if confirmation is not None and not confirmation.current.feasible:
        p99 = confirmation.current.p99_us
        shown = f"{p99.median / 1000:.2f} ms" if p99 is not None else "none measured"
        say(f"note: the current config misses the SLO (median P99 {shown})")


def _print_stopping(document: TuneDocument) -> None:
    """``--rounds auto``: why the confirmation's rounds stopped, and each finalist's verdict."""
    from tritongen.report.rounds_notes import stopping_notes

    confirmation = document.confirmation
    if confirmation is None or confirmation.stopping is None:
        return
    for line in stopping_notes(confirmation.stopping, document.confidence):
        say(line)
