"""``tritongen compare``: every engine of one model, measured side by side, ranked, with recommendations."""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.status import Status

from tritongen.cli.boundary import EXIT_INTERRUPTED, stop_on_signals, user_errors
from tritongen.cli.console import console, err_console, say
from tritongen.cli.llm.compare import LlmCompareInput, llm_compare_request
from tritongen.cli.llm.compare import run_and_show as run_llm_compare_and_show
from tritongen.cli.llm.tune import LLM_LOAD_FIELDS
from tritongen.cli.options.batching import BatchingFlags
from tritongen.cli.options.engine import EngineFlags, PrecisionFlags, VerifyFlags, build_request
from tritongen.cli.options.given import changed_flags, refuse_given
from tritongen.cli.options.groups import Pick, option_groups, reworded
from tritongen.cli.options.llm import LlmFlags
from tritongen.cli.options.load import Cpus, LoadFlags, MaxDuration, MeasurementWindow
from tritongen.cli.options.output import OutputFlags
from tritongen.cli.options.rounds import AutoRoundsFlags
from tritongen.cli.options.settings import settings
from tritongen.cli.options.shape import ShapeFlags
from tritongen.cli.options.shared import (
    AdminKey,
    Formats,
    MetricsUrl,
    ModelNameOption,
    Repo,
    Templates,
    Url,
    WorkDir,
)
from tritongen.cli.serving import show_finding
from tritongen.cli.source_names import default_name, source_kind_or_none
from tritongen.client.inputs import parse_shape_overrides
from tritongen.compare.measure import MeasureSettings
from tritongen.compare.recommend import RANK_KEYS
from tritongen.compare.result import CompareReport
from tritongen.compare.runner import CompareRequest, cost_text, measure_compare, prepare_compare
from tritongen.convert.formats import FORMATS, parse_formats, unavailable_reason
from tritongen.errors import ConfigError, ServerError
from tritongen.loadtest.runner import Progress
from tritongen.loadtest.shapes.trace_replay import TraceReplay
from tritongen.loadtest.spec import parse_duration
from tritongen.loadtest.traces.reading import read_trace
from tritongen.pipeline.request import build_plan, model_dir_name
from tritongen.server.affinity import parse_cpus
from tritongen.server.embedded import lint_before_serving
from tritongen.sources.llm_source import is_llm_folder
from tritongen.triton.batching import BatchingOptions

SourceArg = Annotated[
    str,
    typer.Argument(
        help="Source model as `convert` takes it: an .onnx file, a TorchScript file, or a PyTorch "
        "factory package.module:function (imported and run: trusted code only).",
        show_default=False,
    ),
]


@dataclass(frozen=True)
class CompareFlags:
    """What ``compare`` measures, where, and how it ranks."""

    name: Annotated[str | None, reworded(ModelNameOption, "Model name (default: from the source).")] = None
    formats: Annotated[
        str,
        reworded(
            Formats,
            f"Engines to compare: some of {', '.join(FORMATS)}; all = every one this machine can "
            "build (the others are listed as unavailable, with the reason).",
        ),
    ] = "all"
    batch_size_throughput: Annotated[
        int, typer.Option("--batch-size-throughput", help="Batch size of the throughput figure.", min=1)
    ] = 32
    seq: Annotated[
        int | None,
        typer.Option("--seq", help="Value of every dynamic non-batch dim, e.g. 128.", min=1),
    ] = None
    rank_by: Annotated[
        str, typer.Option("--rank-by", help=f"Order of the table: {', '.join(RANK_KEYS)}.")
    ] = "throughput"
    decide: Annotated[
        str | None,
        typer.Option(
            "--decide",
            help="With --rounds auto, the figures whose pairs the rounds must decide: latency, "
            "throughput or both (default: the --rank-by figure; ranked by memory, latency). The "
            "other is reported with the interval it reached.",
        ),
    ] = None
    out: Annotated[
        Path | None,
        reworded(WorkDir, "Working directory: the model repository and compare.json (default compare-NAME)."),
    ] = None
    templates: Templates = None
    max_drift: Annotated[
        float | None,
        typer.Option(
            "--max-drift",
            help="Do not recommend reduced-precision engines whose relative RMS error against FP32 "
            "exceeds this (measured on --verify-data or held-out calibration rows).",
            min=0.0,
            rich_help_panel="Precision",
        ),
    ] = None
    window: Annotated[
        str | None,
        reworded(MeasurementWindow, "Measurement window of each run (default duration/6, 1-5 s)."),
    ] = None
    max_duration: Annotated[
        str | None,
        reworded(MaxDuration, "Cap of each run while it waits for stability (default 1.5 × duration)."),
    ] = None
    cpus: Cpus = None

    def decided(self) -> tuple[str, ...]:
        """The figures ``--decide`` names (empty: not given)."""
        return tuple(name.strip() for name in (self.decide or "").split(",") if name.strip())


TRACE_FIELDS = ("trace", "trace_speed", "trace_format")
"""``--trace`` and its options, taken from the shape options (compare replays a trace, nothing else)."""


@dataclass(frozen=True)
class CompareLlmFlags(CompareFlags, LlmFlags, ShapeFlags):
    """What ``compare`` measures; for a language model, its load as loadtest takes it; a trace replayed."""


COMPARE_LEVELS = "1,2,4,8"


@dataclass(frozen=True)
class DeploymentFlags:
    """An existing deployment or repository to measure instead of converting."""

    url: Annotated[
        str | None,
        reworded(
            Url,
            "Measure a running deployment (HTTP host:port, explicit model control) instead of "
            "the embedded server; nothing is converted.",
        ),
    ] = None
    repo: Annotated[
        Path | None,
        reworded(
            Repo,
            "Measure the models NAME_<format> of an existing repository; nothing is converted.",
            show_default=False,
        ),
    ] = None
    metrics_url: Annotated[
        str | None, reworded(MetricsUrl, "Metrics endpoint of --url (default its host, port 8002).")
    ] = None
    admin_key: AdminKey = None

    @property
    def existing(self) -> bool:
        """Whether the engines exist already (nothing is converted)."""
        return self.url is not None or self.repo is not None


@option_groups(
    load=Pick(
        only=("concurrency", "shapes", "duration", "warmup", "protocol", "seed"),
        defaults={"concurrency": COMPARE_LEVELS, "duration": "10s", "warmup": "2s"},
        helps={
            "concurrency": "Concurrency levels tried for throughput; the ramp stops when a level adds < 5%."
        },
    ),
    batching=Pick(only=("max_batch_size",)),
    verify=Pick(only=("verify_data", "atol", "rtol")),
    precision=Pick(only=tuple(f.name for f in fields(PrecisionFlags) if f.name != "calibration_cache")),
    output=Pick(only=("json_path", "markdown_path", "html_path")),
    compare=Pick(
        only=tuple(f.name for f in fields(CompareFlags)) + LLM_LOAD_FIELDS + TRACE_FIELDS,
        helps={
            "trace": "Also replay these recorded requests at their times against every engine, in each "
            "round (each engine's P99 under them: rank or decide by trace); formats as loadtest --trace."
        },
    ),
)
def compare_command(
    source: SourceArg,
    compare: CompareLlmFlags,
    deployment: DeploymentFlags,
    load: LoadFlags,
    rounds: AutoRoundsFlags,
    batching: BatchingFlags,
    engines: EngineFlags,
    verify: VerifyFlags,
    precision: PrecisionFlags,
    output: OutputFlags,
) -> None:
    """Compare engines for SOURCE on this machine: latency, throughput, memory, cold start, accuracy."""
    with user_errors():
        if is_llm_folder(source):  # a language model: vLLM's own server beside vLLM inside Triton
            _compare_llm(
                source, compare, load, rounds, output, (deployment, batching, engines, verify, precision)
            )
            return
        _refuse_llm_load(compare, source)
        measure = _settings(compare, load, rounds, _trace(compare))
        name = compare.name if compare.name is not None else default_name(source)
        chosen, unavailable = _formats(compare.formats, source, deployment.existing)
        _refuse_foreign_tvm(chosen, engines.tvm_target)
        variants, _ = precision.settings()
        if deployment.url is None and deployment.repo is not None:
            planned, _ = build_plan(chosen, variants)  # served here: refuse what Triton would refuse
            lint_before_serving(
                deployment.repo, [model_dir_name(name, f, v) for f, v in planned], on_finding=show_finding
            )
        work = compare.out or Path(f"compare-{name}")
        build = None
        if not deployment.existing:
            build = build_request(
                source,
                engines,
                verify,
                precision,
                name=name,
                repo=work / "model_repository",
                formats=chosen,
                options=BatchingOptions(max_batch_size=_max_batch(batching, compare)),
                force=True,
                templates_dir=compare.templates,
            )
        request = settings(
            CompareRequest, deployment, compare,
            source=source,
            name=name,
            formats=chosen,
            settings=measure,
            build=build,
            decide=compare.decided(),
            unavailable=unavailable,
            precisions=variants,
        )  # fmt: skip
        _run(request, [work / "compare.json", *([output.json_path] if output.json_path else [])], output)


def _run(request: CompareRequest, outputs: list[Path], output: OutputFlags) -> None:
    """Prepare (build or find) the engines, measure them, print and write the results."""

    def save(report: CompareReport) -> None:
        for path in outputs:
            report.write_json(path)

    with err_console.status("preparing") as status:
        report = prepare_compare(request, say=lambda msg: status.update(msg))
    if request.build is not None:
        _print_build(report)
    save(report)
    pending = sum(e.status == "pending" for e in report.engines)
    if pending:
        cost = cost_text(request.settings, pending)
        err_console.print(f"measuring {pending} engine(s): {cost}", highlight=False, markup=False)
    with Status("measuring", console=err_console) as status, stop_on_signals() as stopping:
        live = _Live(status)
        report = measure_compare(request, report, live.say, live.progress, save, stopping)
    _write_outputs(report, output.markdown_path, output.html_path)
    print_report(report)
    say(f"results: {', '.join(str(p) for p in outputs)}")
    _finish(report)


def _compare_llm(
    source: str,
    compare: CompareLlmFlags,
    load: LoadFlags,
    rounds: AutoRoundsFlags,
    output: OutputFlags,
    engine_groups: tuple[object, ...],
) -> None:
    """A language model: vLLM's server beside vLLM in Triton; engines' options refused."""
    name = compare.name if compare.name is not None else default_name(Path(source).name)
    given = LlmCompareInput(
        source=Path(source), name=name, work=compare.out or Path(f"compare-{name}"),
        concurrency=load.concurrency if load.concurrency != COMPARE_LEVELS else None,
        duration=load.duration, warmup=load.warmup, seed=load.seed, llm=compare, rounds=rounds,
        classic=_engine_options_given(compare, load, output, engine_groups),
    )  # fmt: skip
    run_llm_compare_and_show(llm_compare_request(given), output.json_path)


def _refuse_llm_load(compare: CompareLlmFlags, source: str) -> None:
    """Refuse a language model's load options for a source that is no language model."""
    refuse_given(
        changed_flags(compare, LLM_LOAD_FIELDS),
        f"sets a language model's load; {source} is no Hugging Face model folder",
        "give the folder holding config.json, the weights and the tokenizer",
    )


def _engine_options_given(
    compare: CompareFlags, load: LoadFlags, output: OutputFlags, groups: tuple[object, ...]
) -> tuple[str, ...]:
    """The engines' options given (of ``groups`` all): a language model's comparison refuses them."""
    own = ("name", "out", "window", "max_duration", *LLM_LOAD_FIELDS)
    return (
        *changed_flags(compare, tuple(f.name for f in fields(CompareFlags) if f.name not in own)),
        *[flag for group in groups for flag in changed_flags(group)],
        *changed_flags(load, ("shapes", "protocol")),
        *changed_flags(output, ("markdown_path", "html_path")),
    )


def _trace(compare: CompareLlmFlags) -> TraceReplay | None:
    """``--trace`` as every engine replays it (every request in the file, whichever model it names).

    Raises:
        ConfigError: a trace that cannot be read, or ``--rank-by``/``--decide trace`` without one.
    """
    if compare.trace is None:
        asked = (
            ("--rank-by trace", compare.rank_by == "trace"),
            ("--decide trace", "trace" in compare.decided()),
        )
        wanting = [flag for flag, asks in asked if asks]
        refuse_given(wanting, "needs --trace", "add --trace FILE")
        refuse_given(changed_flags(compare, TRACE_FIELDS[1:]), "applies with --trace", "add --trace FILE")
        return None
    trace = read_trace(compare.trace, model=None, format=compare.trace_format or "auto")
    return TraceReplay(trace, 1.0 if compare.trace_speed is None else compare.trace_speed)


def _settings(
    compare: CompareFlags, load: LoadFlags, rounds: AutoRoundsFlags, trace: TraceReplay | None = None
) -> MeasureSettings:
    """How every engine is measured (checked)."""
    count, stopping = rounds.rule(default_auto=True)
    measure = settings(
        MeasureSettings, compare, load, rounds,
        shapes=parse_shape_overrides(load.shapes or []),
        duration_s=load.duration_s(),
        warmup_s=load.warmup_s(),
        concurrency_levels=load.concurrency_levels(),
        rounds=count,
        stopping=stopping,
        window_s=_seconds_or_none(compare.window, "--window"),
        max_duration_s=_seconds_or_none(compare.max_duration, "--max-duration"),
        cpus=parse_cpus(compare.cpus) if compare.cpus else None,
        trace=trace,
    )  # fmt: skip
    measure.check()
    return measure


def _seconds_or_none(text: str | None, option: str) -> float | None:
    """A duration option in seconds, or ``None`` when not given (the default rule applies)."""
    return parse_duration(text, option) if text else None


def _max_batch(batching: BatchingFlags, compare: CompareFlags) -> int:
    """``--max-batch-size``, by default at least the throughput figure's batch size (and 32)."""
    if batching.max_batch_size is not None:
        return batching.max_batch_size
    return max(32, compare.batch_size_throughput)


def _formats(text: str, source: str, existing: bool) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """The formats to build and measure, and those left out as unavailable here (with why)."""
    kind = source_kind_or_none(source)
    if text.strip().lower() != "all":
        return parse_formats(text, kind), ()
    if existing:
        return FORMATS, ()  # whatever the deployment has is measured; the rest shows as missing
    chosen = parse_formats("all", kind)
    left_out = tuple((f, unavailable_reason(f, kind) or "") for f in FORMATS if f not in chosen)
    if not chosen:
        raise ConfigError("no engine can be built here from this source", "install tritongen's dependencies")
    return chosen, left_out


class _Live:
    """The status line: which engine, which measurement, live figures."""

    def __init__(self, status: Status) -> None:
        self.status = status
        self.step = "measuring"

    def say(self, message: str) -> None:
        self.step = message
        self.status.update(message)

    def progress(self, progress: Progress) -> None:
        qps = f"{progress.qps:,.0f} req/s" if progress.qps is not None else "…"
        p99 = f"P99 {progress.p99_us / 1000:.2f} ms" if progress.p99_us is not None else ""
        self.status.update(
            f"{self.step}: {progress.phase} {progress.measured_s:.0f}/{progress.target_s:.0f} s  {qps}  {p99}"
        )


def _print_build(report: CompareReport) -> None:
    for engine in report.engines:
        if engine.status == "failed":  # shown now: measuring the others takes a while
            err_console.print(
                f"[red]{engine.label} failed:[/] {escape(engine.reason or '')}",
                soft_wrap=True,
                highlight=False,
            )


def print_report(report: CompareReport) -> None:
    """The ranked table, the accuracy of reduced-precision engines, their notes, and the recommendations."""
    from tritongen.report.compare_tables import compare_table
    from tritongen.report.convert_tables import precision_tables
    from tritongen.report.table_data import to_rich

    tables = [
        compare_table(report),
        *precision_tables([(e.label, e.accuracy) for e in report.engines if e.accuracy is not None]),
    ]
    for table in tables:
        console.print(to_rich(table))
        for note in table.notes:
            say(f"  {note}")
    if report.recommendations:
        console.print("[bold]recommendations[/]")
        for rec in report.recommendations:
            console.print(
                f"  [bold]{escape(rec.title)}:[/] {escape(rec.reason)}", soft_wrap=True, highlight=False
            )


def _write_outputs(report: CompareReport, markdown: Path | None, html: Path | None) -> None:
    if markdown is not None:
        from tritongen.io.files import write_output
        from tritongen.report.compare_tables import compare_table
        from tritongen.report.table_data import to_markdown

        lines = [to_markdown(compare_table(report)), ""]
        lines += [f"- **{r.title}**: {r.reason}" for r in report.recommendations]
        write_output(markdown, "\n".join(lines) + "\n")
    if html is not None:
        from tritongen.report.html import write_documents

        write_documents([(report.name, report)], html)


def _finish(report: CompareReport) -> None:
    if report.status == "interrupted":
        err_console.print("[bold red]interrupted:[/] partial results written", soft_wrap=True)
        raise typer.Exit(EXIT_INTERRUPTED)
    if report.status == "aborted":
        raise ServerError(
            "the server stopped answering during the comparison", "partial results were written"
        )
    if not any(e.ok for e in report.engines):
        raise ServerError("no engine could be measured", "see the reasons in the table")


def _refuse_foreign_tvm(formats: tuple[str, ...], tvm_target: str | None) -> None:
    """Refuse to compare a TVM engine built for another machine: it cannot run here.

    Raises:
        ConfigError: ``--tvm-target`` compiles for another architecture.
    """
    if "tvm" not in formats or tvm_target is None:
        return
    from tritongen.convert.tvm import resolve_target
    from tritongen.convert.tvm.cross import host_arch, target_arch

    arch = target_arch(resolve_target(tvm_target))
    if arch != host_arch():
        raise ConfigError(
            f"compare measures engines on this machine ({host_arch()}), but --tvm-target {tvm_target} "
            f"builds for {arch}",
            f"build for the board with tritongen convert --tvm-target {tvm_target}; compare here without it",
        )
