"""``tritongen tune``: preferred batch sizes, queue delay, instances and max batch against a P99 SLO."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, replace
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
from tritongen.cli.groups import Pick, option_groups
from tritongen.cli.load_options import LoadFlags, RoundsFlags, RunFlags, load_spec
from tritongen.cli.options import AdminKey, embedded_server
from tritongen.cli.output_options import OutputFlags
from tritongen.errors import ConfigError
from tritongen.intervals import DEFAULT_ROUNDS, format_summary
from tritongen.loadtest.spec import LoadSpec
from tritongen.triton.model_config import ModelConfig
from tritongen.triton.proto import read_config
from tritongen.triton.rerender import model_target, rerender_model
from tritongen.tune.confirm import DEFAULT_FINALISTS, Confirmation
from tritongen.tune.control import ModelControl
from tritongen.tune.runner import TuneHooks, TuneReport, TuneRequest, check_claim, plan, run_tune
from tritongen.tune.space import Candidate, Current, SearchSpace, parse_preferred_sets
from tritongen.tune.trial import TrialRecord


@dataclass(frozen=True)
class SearchFlags:
    """The configs ``tune`` may try, and how many."""

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
        )
        space.check()
        return space


@dataclass(frozen=True)
class ServerFlags:
    """Which server the trials run on."""

    url: Annotated[
        str | None,
        typer.Option(
            "--url",
            help="A running server in explicit model-control mode (HTTP host:port) "
            "instead of the embedded one.",
            show_default=False,
        ),
    ] = None
    serve: Annotated[
        bool, typer.Option("--serve", help="Tune on the embedded server started on --repo (the default).")
    ] = False
    admin_key: AdminKey = None


@dataclass(frozen=True)
class TrialFlags:
    """Where the trials are kept and how the best are confirmed."""

    out: Annotated[
        Path | None, typer.Option("--out", help="Trial directory (default tune-MODEL).", show_default=False)
    ] = None
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
)
def tune_command(
    model: Annotated[str, typer.Argument(help="Model to tune (a directory of --repo).", show_default=False)],
    search: SearchFlags,
    load: LoadFlags,
    rounds: RoundsFlags,
    server: ServerFlags,
    trials: TrialFlags,
    output: OutputFlags,
    repo: Annotated[Path, typer.Option("--repo", help="Model repository holding MODEL.")] = Path(
        "model_repository"
    ),
    slo_p99_ms: Annotated[
        float | None, typer.Option("--slo-p99-ms", help="P99 latency budget in ms.", show_default=False)
    ] = None,
    apply: Annotated[
        bool,
        typer.Option(
            "--apply",
            help="Write the best config into the repository (.bak kept), only if it beat the current "
            "config significantly.",
        ),
    ] = False,
) -> None:
    """Tune MODEL's batching and instances live on Triton: the most inferences/s within the P99 SLO.

    The current config is the baseline; the best search configs are confirmed against it in
    interleaved rounds, and one replaces it only when it is faster beyond the noise.
    """
    with user_errors():
        if server.serve and server.url is not None:
            raise ConfigError(
                "--serve and --url exclude each other", "tune the embedded server or a running one"
            )
        model_dir = repo / model
        base = read_config(model_dir / "config.pbtxt")
        space = search.space(base)
        if base.max_batch_size == 0:
            raise ConfigError(
                f"'{model}' has max_batch_size 0: there is no batching to tune",
                "convert the model with a dynamic batch dim",
            )
        request = _request(model, space, search, load, rounds, trials, slo_p99_ms)
        if trials.resume is not None and not trials.resume.is_dir():
            raise ConfigError(
                f"--resume {trials.resume} does not exist", "pass the directory of an earlier tune"
            )
        check_claim(request)
        console.print(
            f"tuning [bold]{escape(model)}[/]: {space.size} legal configs, "
            f"{len(space.skipped())} skipped as illegal, strategy {search.strategy}, "
            f"SLO P99 {slo_p99_ms if slo_p99_ms is not None else '∞'} ms; {plan(request).text()}",
            highlight=False,
        )
        report = _tune(request, repo, server, base, apply)
        _outputs(report, output)
        _print(report)
        if not report.finalists and not report.current_feasible:
            raise ConfigError("no config met the SLO", "raise --slo-p99-ms or lower the load")
        if apply:
            _print_applied(report, model_dir)


def _request(
    model: str,
    space: SearchSpace,
    search: SearchFlags,
    load: LoadFlags,
    rounds: RoundsFlags,
    trials: TrialFlags,
    slo_p99_ms: float | None,
) -> TuneRequest:
    """What to tune and how, from the command's option groups (checked)."""
    if not load.concurrency and not load.rate:
        load = replace(load, concurrency="8")
    request = TuneRequest(
        model=model,
        space=space,
        load=load_spec(model, url=None, load=load, run=RunFlags()),
        slo_p99_ms=slo_p99_ms,
        strategy=search.strategy,
        max_trials=search.max_trials,
        max_memory_mb=search.max_memory_mb,
        out_dir=trials.resume or trials.out or Path(f"tune-{model}"),
        seed=load.seed,
        rounds=rounds.count(default=DEFAULT_ROUNDS),
        finalists=trials.finalists,
        confidence=rounds.confidence,
    )
    request.check()
    return request


def _tune(
    request: TuneRequest, repo: Path, server: ServerFlags, base: ModelConfig, apply: bool
) -> TuneReport:
    """Run the trials and the confirmation; apply the winner when asked; restore the config on Ctrl-C."""
    model_dir = repo / request.model
    admin_key = server.admin_key if server.url is not None else None
    with (
        _server(repo, request.model, server.url, request.load) as (control_url, spec),
        stop_on_signals() as stopping,
    ):
        control = ModelControl(control_url, request.model, admin_key=admin_key)
        try:
            report = _run(replace(request, load=spec), control, base, model_target(model_dir), stopping)
            winner = report.winner
            if apply and winner is not None and isinstance(winner.candidate, Candidate):
                control.load(rerender_model(model_dir, winner.candidate.to_options()))
            return report
        except KeyboardInterrupt as e:
            err_console.print(
                f"interrupted: model config restored, partial results in {request.out_dir}", markup=False
            )
            raise typer.Exit(EXIT_INTERRUPTED) from e
        finally:
            control.close()


def _print_applied(report: TuneReport, model_dir: Path) -> None:
    winner = report.winner
    if winner is not None:
        console.print(
            f"applied {winner.key} to {model_dir / 'config.pbtxt'} (previous kept as .bak)",
            markup=False,
            soft_wrap=True,
        )
    else:
        console.print(
            f"not applied: no config beat the current one significantly; {model_dir / 'config.pbtxt'} "
            "is unchanged",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )


@contextlib.contextmanager
def _server(repo: Path, model: str, url: str | None, spec: LoadSpec) -> Iterator[tuple[str, LoadSpec]]:
    if url is not None:
        yield url, replace(spec, url=url if spec.protocol == "http" else spec.url)
        return
    with embedded_server(repo, model) as server:
        target = server.http_url if spec.protocol == "http" else server.grpc_url
        yield server.http_url, replace(spec, url=target, metrics_url=server.metrics_url)


def _run(request: TuneRequest, control: ModelControl, base, target, stopping) -> TuneReport:  # type: ignore[no-untyped-def]
    with Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=err_console, transient=True,
    ) as bar:  # fmt: skip
        task = bar.add_task("trials", total=None)

        def started(number: int, total: int, candidate: Candidate | Current) -> None:
            bar.update(task, total=total + 1, description=f"trial {number}/{total}: {candidate.key}")

        def done(record: TrialRecord, reused: bool) -> None:
            bar.advance(task)
            m = record.measurement
            what = "reused" if reused else ("failed" if m.failed else "ok")
            p99 = f"{m.p99_us / 1000:.2f} ms" if m.p99_us is not None else "-"
            mark = "✓" if record.feasible else "✗"
            line = f"  {mark} {record.key}: {m.infer_per_s:,.0f} infer/s, P99 {p99} ({what})"
            line += f" {record.reason}" if record.reason else ""
            err_console.print(line, highlight=False, markup=False)

        confirming = bar.add_task("confirmation", total=None, visible=False)

        def round_started(number: int, rounds: int, key: str) -> None:
            if not bar.tasks[confirming].visible:
                err_console.print(
                    f"confirming the best search configs against the current config: {rounds} "
                    "round(s), interleaved",
                    highlight=False,
                    markup=False,
                )
                bar.update(task, visible=False)
                bar.update(confirming, visible=True)
            bar.update(confirming, description=f"round {number}/{rounds}: {key}")
            err_console.print(f"  round {number}/{rounds}: {key}", highlight=False, markup=False)

        def round_done(confirmation: Confirmation) -> None:
            figures = ", ".join(
                f"{c.key} {format_summary(c.infer_per_s)}/s"
                + (f" ({c.ratio.text()})" if c.ratio is not None else "")
                for c in confirmation.contenders
            )
            err_console.print(
                f"  round {confirmation.completed}/{confirmation.rounds} done: {figures}",
                highlight=False,
                markup=False,
            )

        hooks = TuneHooks(
            on_start=started, on_done=done, stop=stopping, on_round_start=round_started, on_round=round_done
        )
        return run_tune(request, control, base, target, hooks)


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
