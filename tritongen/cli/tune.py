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

from tritongen.cli.common import (
    EXIT_INTERRUPTED,
    console,
    err_console,
    parse_int_list,
    stop_on_signals,
    user_errors,
)
from tritongen.cli.config_change import ShowDiff, show_diff
from tritongen.cli.groups import Pick, option_groups, reworded
from tritongen.cli.llm_convert import changed_flags
from tritongen.cli.llm_tune import (
    LLM_TUNE_FIELDS,
    LlmTuneFlags,
    LlmTuneInput,
    is_local_llm,
    llm_tune_request,
    refuse_llm_flags,
    run_and_show,
)
from tritongen.cli.load_options import (
    AutoRoundsFlags,
    Cpus,
    LoadFlags,
    MaxDuration,
    MeasurementWindow,
    OtherCpuLimit,
    RequestTimeout,
    RunFlags,
    load_spec,
)
from tritongen.cli.options import AdminKey, Repo, SkipFailed, SloP99, Url, WorkDir
from tritongen.cli.output_options import OutputFlags
from tritongen.cli.serving import serving_hooks
from tritongen.errors import ConfigError
from tritongen.intervals import format_summary
from tritongen.loadtest.background import BackgroundSpec
from tritongen.loadtest.mix import Mix
from tritongen.server.completed import base_config
from tritongen.stopping import StopRule, progress_text
from tritongen.triton.batching import preferred_sizes_refused
from tritongen.triton.model_config import ModelConfig
from tritongen.tune.composing import tuned_model
from tritongen.tune.confirm import DEFAULT_FINALISTS, Confirmation
from tritongen.tune.runner import TuneHooks, TuneReport, TuneRequest, check_claim, plan
from tritongen.tune.session import SessionHooks, TuneInterrupted, TuneOutcome, TuneSession, run_session
from tritongen.tune.space import Candidate, Current, SearchSpace, parse_preferred_sets
from tritongen.tune.trial import TrialRecord


@dataclass(frozen=True)
class SearchFlags:
    """The configs ``tune`` may try, and how many."""

    # --max-batch-size, --preferred-batch-sizes, --max-queue-delay-us and --instances are not
    # the batching options of convert and render (cli/batching_options.py): each takes the
    # values to try (a list, or sets of lists) where those take the one value to write.
    max_batch_size: Annotated[
        str | None,
        typer.Option(
            "--max-batch-size",
            help="Max batch sizes to try, e.g. 8,16,32 (default: the model's).",
            show_default=False,
        ),
    ] = None
    preferred: Annotated[
        str, typer.Option("--preferred-batch-sizes", help="Sets of preferred sizes, e.g. '4,8;8,16;none'.")
    ] = "none"
    delays: Annotated[
        str, typer.Option("--max-queue-delay-us", help="Queue delays to try in µs, e.g. 0,100,500,1000,2000.")
    ] = "0,100,500,1000,2000"
    instances: Annotated[str, typer.Option("--instances", help="Instance counts to try, e.g. 1,2.")] = "1,2"
    strategy: Annotated[str, typer.Option("--strategy", help="grid (every legal config) or adaptive.")] = (
        "adaptive"
    )
    max_trials: Annotated[
        int | None,
        typer.Option(
            "--max-trials",
            help="Trials at most (default: grid all, adaptive 30%).",
            min=1,
            show_default=False,
        ),
    ] = None
    max_memory_mb: Annotated[
        float | None,
        typer.Option(
            "--max-memory-mb",
            help="GPU memory cap of a feasible config (where the server reports GPU memory).",
            show_default=False,
        ),
    ] = None
    composing: Annotated[
        str | None,
        typer.Option(
            "--composing",
            help="Tune this composing model (an ensemble step, or a model MODEL calls through BLS) "
            "while the load goes to MODEL.",
            show_default=False,
        ),
    ] = None

    def space(self, base: ModelConfig) -> SearchSpace:
        """The search space around the model's config.

        Raises:
            ConfigError: an empty or illegal space.
        """
        space = SearchSpace(
            max_batch_sizes=parse_int_list(self.max_batch_size, "--max-batch-size") or (base.max_batch_size,),
            preferred_batch_sizes=parse_preferred_sets(self.preferred),
            max_queue_delays_us=parse_int_list(self.delays, "--max-queue-delay-us") or (0,),
            instance_counts=parse_int_list(self.instances, "--instances") or (1,),
            preferred_refused=preferred_sizes_refused(base),
        )
        space.check()
        return space


@dataclass(frozen=True)
class TuneSearchFlags(SearchFlags, LlmTuneFlags):
    """The configs ``tune`` may try: batching and instances, or a local vLLM model's engine and its load."""


@dataclass(frozen=True)
class ServerFlags:
    """Which server the trials run on, and what other traffic it carries meanwhile."""

    url: Annotated[
        str | None,
        reworded(
            Url,
            "A running server in explicit model-control mode (HTTP host:port) "
            "instead of the embedded one; with --protocol grpc the load goes to its host's port 8001.",
        ),
    ] = None
    # Not the --serve of infer and loadtest, which names the repository to serve: the
    # repository is --repo, and this flag only says the embedded server is wanted.
    serve: Annotated[
        bool, typer.Option("--serve", help="Tune on the embedded server started on --repo (the default).")
    ] = False
    admin_key: AdminKey = None
    skip_failed: Annotated[
        bool,
        reworded(
            SkipFailed,
            "On the embedded server: serve the whole repository, leaving out (one line each) the "
            "models that fail to load; the tuned model, the model under load and --background must "
            "load (default: only those models).",
        ),
    ] = False
    background: Annotated[
        str | None,
        typer.Option(
            "--background",
            help="Keep these models (OTHER[,OTHER2]) under load for the whole tune: tune under interference.",
            show_default=False,
        ),
    ] = None
    background_concurrency: Annotated[
        int | None,
        typer.Option(
            "--background-concurrency",
            help="In-flight requests of the background load in all, split over its models (default 1 each).",
            show_default=False,
        ),
    ] = None
    background_rate: Annotated[
        float | None,
        typer.Option(
            "--background-rate",
            help="Requests/s of the background load in all (open loop), split over its models.",
            show_default=False,
        ),
    ] = None

    def background_spec(self) -> BackgroundSpec | None:
        """The background load asked for, or ``None``.

        Raises:
            ConfigError: a background level without --background, both levels, or a
                malformed model list.
        """
        level_given = self.background_concurrency is not None or self.background_rate is not None
        if self.background is None:
            if level_given:
                raise ConfigError(
                    "--background-concurrency and --background-rate need --background",
                    "name the models to keep under load, e.g. --background other_model",
                )
            return None
        if self.background_concurrency is not None and self.background_rate is not None:
            raise ConfigError(
                "--background-concurrency and --background-rate exclude each other",
                "use one: closed or open loop",
            )
        models = Mix.parse(self.background, mix=None).models
        if self.background_rate is not None:
            return BackgroundSpec(models, mode="rate", level=self.background_rate)
        return BackgroundSpec(models, level=self.background_concurrency)


@dataclass(frozen=True)
class TrialFlags:
    """Where the trials are kept, how each one's requests are judged, and how the best are confirmed."""

    out: WorkDir = None
    resume: Annotated[
        Path | None,
        typer.Option(
            "--resume",
            help="Continue a tune in this directory, skipping finished trials.",
            show_default=False,
        ),
    ] = None
    finalists: Annotated[
        int,
        typer.Option(
            "--finalists", help="Best search configs confirmed against the current config, in rounds."
        ),
    ] = DEFAULT_FINALISTS
    request_timeout: RequestTimeout = "60s"
    other_cpu_limit: OtherCpuLimit = "25%"
    max_duration: Annotated[
        str | None,
        reworded(MaxDuration, "Cap of each run while it waits for stability (default 3 × duration)."),
    ] = None
    window: Annotated[
        str | None, reworded(MeasurementWindow, "Measurement window of each run (default duration/6, 1-5 s).")
    ] = None

    cpus: Cpus = None

    def run_flags(self) -> RunFlags:
        """How each run of a trial is judged: its request timeout, window and stability cap."""
        return RunFlags(
            request_timeout=self.request_timeout,
            max_duration=self.max_duration,
            window=self.window,
            other_cpu_limit=self.other_cpu_limit,
            cpus=self.cpus,
        )


@dataclass(frozen=True)
class ApplyFlags:
    """Whether the winner goes into the repository, or is only shown."""

    apply: Annotated[
        bool,
        typer.Option(
            "--apply",
            help="Write the best config into the repository (.bak kept), only if it beat the current "
            "config significantly; a hand-written config keeps its comments and layout.",
        ),
    ] = False
    diff: Annotated[
        bool,
        reworded(
            ShowDiff, "With --apply: print the change to config.pbtxt as a unified diff and write nothing."
        ),
    ] = False


@option_groups(
    load=Pick(
        defaults={"duration": "10s", "warmup": "2s"},
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
    search=Pick(only=tuple(f.name for f in fields(SearchFlags)) + LLM_TUNE_FIELDS),
)
def tune_command(
    model: Annotated[str, typer.Argument(help="Model to tune (a directory of --repo).", show_default=False)],
    search: TuneSearchFlags,
    load: LoadFlags,
    rounds: AutoRoundsFlags,
    server: ServerFlags,
    trials: TrialFlags,
    output: OutputFlags,
    applying: ApplyFlags,
    repo: Repo = Path("model_repository"),
    slo_p99_ms: SloP99 = None,
) -> None:
    """Tune MODEL's batching and instances live on Triton: the most inferences/s within the P99 SLO.

    The current config is the baseline; the best search configs are confirmed against it in
    interleaved rounds (by default until each one is decided), and one replaces it only when
    it is faster beyond the noise. A local vLLM model: its engine's settings, for the most goodput.
    """
    if is_local_llm(repo, model):  # a local vLLM model: its engine's settings, not batching
        _tune_llm(model, repo, search, load, rounds, server, trials, output, applying, slo_p99_ms)
        return
    with user_errors():
        refuse_llm_flags(changed_flags(search, LLM_TUNE_FIELDS), model)
        rounds.rule(default_auto=True)  # a rule that cannot decide: refused before anything is read
        session = _session(repo, server, applying)
        tuned = tuned_model(repo, model, search.composing)
        base = _base_config(repo, tuned, server)
        request = _request(model, base, search, load, rounds, trials, slo_p99_ms, server)
        check_claim(request)
        _announce(request)
        try:
            trial_lines = functools.partial(_trial_lines, request.stopping)
            hooks = SessionHooks(serving=serving_hooks(), trials=trial_lines)
            outcome = run_session(request, session, base, hooks)
        except TuneInterrupted as e:
            err_console.print(
                f"interrupted: model config restored, partial results in {e.out_dir}", markup=False
            )
            raise typer.Exit(EXIT_INTERRUPTED) from e
        _outputs(outcome.report, output)
        _print(outcome.report)
        _finish(outcome, session, repo / tuned)


def _tune_llm(
    model: str,
    repo: Path,
    search: TuneSearchFlags,
    load: LoadFlags,
    rounds: AutoRoundsFlags,
    server: ServerFlags,
    trials: TrialFlags,
    output: OutputFlags,
    applying: ApplyFlags,
    slo_p99_ms: float | None,
) -> None:
    """The tune of a local vLLM model's engine settings (cli/llm_tune.py); batching options refused."""
    classic = [
        *changed_flags(search, tuple(f.name for f in fields(SearchFlags) if f.name != "max_trials")),
        *changed_flags(server, ("background", "background_concurrency", "background_rate", "skip_failed")),
        *changed_flags(trials, ("resume", "finalists")),
        *changed_flags(output, ("plot_path", "html_path")),
        *(["--slo-p99-ms"] if slo_p99_ms is not None else []),
    ]
    with user_errors():
        if applying.diff and not applying.apply:
            raise ConfigError("--diff shows what --apply would write", "add --apply")
        given = LlmTuneInput(
            model=model, repo=repo, load=load, run=trials.run_flags(), llm=search, classic=tuple(classic),
            rounds=rounds.rule(default_auto=True), max_trials=search.max_trials, url=server.url,
            admin_key=server.admin_key,
        )  # fmt: skip
        run_and_show(llm_tune_request(given), output.json_path, applying.apply, applying.diff)


def _session(repo: Path, server: ServerFlags, applying: ApplyFlags) -> TuneSession:
    """Which server the tune runs on and what becomes of the winner (checked)."""
    if applying.diff and not applying.apply:
        raise ConfigError("--diff shows what --apply would write", "add --apply")
    if server.serve and server.url is not None:
        raise ConfigError("--serve and --url exclude each other", "tune the embedded server or a running one")
    if server.skip_failed and server.url is not None:
        raise ConfigError(
            "--skip-failed and --url exclude each other: it chooses what the embedded server loads",
            "drop one of them",
        )
    return TuneSession(
        repo=repo,
        url=server.url,
        admin_key=server.admin_key,
        apply=applying.apply,
        diff=applying.diff,
        skip_failed=server.skip_failed,
    )


def _base_config(repo: Path, model: str, server: ServerFlags) -> ModelConfig:
    """The config the tune starts from; where the server completes it, one line says so."""
    start = base_config(repo, model, server.url, server.admin_key, hooks=serving_hooks())
    if start.note is not None:
        console.print(f"[bold]{escape(model)}[/]: {escape(start.note)}", highlight=False, soft_wrap=True)
    return start.config


def _announce(request: TuneRequest) -> None:
    """What will be tuned, under which load, in how many configs, and roughly how long it takes."""
    space, slo, loaded = request.space, request.slo_p99_ms, request.load.model
    under = f" under the load of [bold]{escape(loaded)}[/]" if loaded != request.model else ""
    console.print(
        f"tuning [bold]{escape(request.model)}[/]{under}: {space.size} legal configs, "
        f"{len(space.skipped())} skipped as illegal, strategy {request.strategy}, "
        f"SLO P99 {slo if slo is not None else '∞'} ms; {plan(request).text()}",
        highlight=False,
    )


def _request(
    model: str,
    base: ModelConfig,
    search: SearchFlags,
    load: LoadFlags,
    rounds: AutoRoundsFlags,
    trials: TrialFlags,
    slo_p99_ms: float | None,
    server: ServerFlags,
) -> TuneRequest:
    """What to tune and how, from the command's option groups and the model's config (checked)."""
    count, stopping = rounds.rule(default_auto=True)
    space = search.space(base)
    if base.max_batch_size == 0:
        raise ConfigError(
            f"'{search.composing or model}' has max_batch_size 0: there is no batching to tune",
            "convert the model with a dynamic batch dim",
        )
    if not load.concurrency and not load.rate and not load.sequences:
        load = replace(load, concurrency="8")
    tuned = search.composing or model
    default_out = Path(f"tune-{model}" if tuned == model else f"tune-{model}-{tuned}")
    request = TuneRequest(
        model=tuned,
        space=space,
        load=load_spec(model, url=None, load=load, run=trials.run_flags()),
        slo_p99_ms=slo_p99_ms,
        strategy=search.strategy,
        max_trials=search.max_trials,
        max_memory_mb=search.max_memory_mb,
        out_dir=trials.resume or trials.out or default_out,
        seed=load.seed,
        rounds=count,
        finalists=trials.finalists,
        confidence=rounds.confidence,
        background=server.background_spec(),
        stopping=stopping,
    )
    request.check()
    if trials.resume is not None and not trials.resume.is_dir():
        raise ConfigError(f"--resume {trials.resume} does not exist", "pass the directory of an earlier tune")
    return request


def _finish(outcome: TuneOutcome, session: TuneSession, model_dir: Path) -> None:
    """After the report: a refusal or no config within the SLO as one error; what --apply did.

    Raises:
        ConfigError: the winner was refused, or no config met the SLO.
    """
    report, applied, refusal = outcome.report, outcome.applied, outcome.refusal
    if refusal is not None:
        raise ConfigError(f"not applied: {refusal.message}", refusal.hint)
    if not report.finalists and not report.current_feasible:
        raise ConfigError("no config met the SLO", "raise --slo-p99-ms or lower the load")
    if not session.apply:
        return
    if applied is not None and session.diff:
        show_diff(applied)
    elif applied is not None and report.winner is not None:
        console.print(
            f"applied {report.winner.key}: {applied.summary()}", markup=False, highlight=False, soft_wrap=True
        )
    else:
        config = model_dir / "config.pbtxt"
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
            f"{c.key} {format_summary(c.infer_per_s)}/s"
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

        document = report.to_json()
        points, reference = tune_points(document)
        plot_tune(
            points, plot_path, f"tune {report.request.model}", report.request.slo_p99_ms, reference,
            confirmed_points(document),
        )  # fmt: skip
    if html_path is not None:
        from tritongen.report.html import write_documents

        write_documents([(report.request.model, report.to_json())], html_path)


def _print(report: TuneReport) -> None:
    from tritongen.report.tables import to_rich, tune_table

    console.print(to_rich(tune_table(report.to_json())))
    console.print(report.verdict(), highlight=False, markup=False, soft_wrap=True)
    if report.background is not None:
        from tritongen.report.tables import background_text

        console.print(background_text(report.background), highlight=False, markup=False, soft_wrap=True)
    for warning in report.warnings:
        err_console.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False, soft_wrap=True)
    _print_stopping(report)
    confirmation = report.confirmation
    if confirmation is not None and not confirmation.current.feasible:
        p99 = confirmation.current.p99_us
        shown = f"{p99.median / 1000:.2f} ms" if p99 is not None else "none measured"
        console.print(
            f"note: the current config misses the SLO (median P99 {shown})",
            highlight=False,
            markup=False,
            soft_wrap=True,
        )


def _print_stopping(report: TuneReport) -> None:
    """``--rounds auto``: why the confirmation's rounds stopped, and each finalist's verdict."""
    from tritongen.report.tables import stopping_notes

    confirmation = report.confirmation
    if confirmation is None or confirmation.rule is None:
        return
    for line in stopping_notes(confirmation.stopping_record(), report.request.confidence):
        console.print(line, highlight=False, markup=False, soft_wrap=True)
