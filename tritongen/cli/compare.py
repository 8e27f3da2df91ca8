"""``tritongen compare``: every engine of one model, measured side by side, ranked, with recommendations."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.status import Status

from tritongen.build.request import BuildRequest, VerifyOptions, build_plan, model_dir_name
from tritongen.cli.batching_options import MaxBatchSize
from tritongen.cli.common import (
    EXIT_INTERRUPTED,
    console,
    err_console,
    parse_int_list,
    parse_name_list,
    stop_on_signals,
    user_errors,
)
from tritongen.cli.convert import default_name, source_kind_or_none
from tritongen.cli.engine_options import (
    Atol,
    AutoMixed,
    CalibrationData,
    CalibrationMethod,
    CalibrationSamples,
    ErrorMetric,
    InputSpecs,
    Int8Mode,
    KeepFp32,
    MaxError,
    OutputNames,
    Precision,
    Rtol,
    Script,
    TvmTarget,
    TvmTuneMinutes,
    TvmTuneTrials,
    VerifyData,
    precision_settings,
)
from tritongen.cli.options import (
    AdminKey,
    Confidence,
    HtmlOut,
    JsonOut,
    ProtocolChoice,
    Rounds,
    Shapes,
    Templates,
    lint_before_serving,
)
from tritongen.client.inputs import parse_shape_overrides
from tritongen.compare.measure import MeasureSettings
from tritongen.compare.recommend import RANK_KEYS
from tritongen.compare.result import CompareReport
from tritongen.compare.runner import CompareRequest, cost_text, measure_compare, prepare_compare
from tritongen.convert.formats import FORMATS, parse_formats, unavailable_reason
from tritongen.convert.tvm import TvmOptions
from tritongen.errors import ConfigError, ServerError
from tritongen.intervals import DEFAULT_CONFIDENCE, DEFAULT_ROUNDS
from tritongen.loadtest.runner import Progress
from tritongen.loadtest.spec import parse_duration
from tritongen.triton.batching import BatchingOptions


def compare_command(
    source: Annotated[
        str,
        typer.Argument(
            help="Source model as `convert` takes it: an .onnx file, a TorchScript file, or a PyTorch "
            "factory package.module:function (imported and run: trusted code only).",
            show_default=False,
        ),
    ],
    name: Annotated[
        str | None,
        typer.Option("--name", help="Model name (default: from the source).", show_default=False),
    ] = None,
    formats: Annotated[
        str,
        typer.Option(
            "--formats",
            help=f"Engines to compare: some of {', '.join(FORMATS)}; all = every one this machine can "
            "build (the others are listed as unavailable, with the reason).",
        ),
    ] = "all",
    batch_size_throughput: Annotated[
        int, typer.Option("--batch-size-throughput", help="Batch size of the throughput figure.", min=1)
    ] = 32,
    seq: Annotated[
        int | None,
        typer.Option(
            "--seq", help="Value of every dynamic non-batch dim, e.g. 128.", min=1, show_default=False
        ),
    ] = None,
    shapes: Shapes = None,
    duration: Annotated[str, typer.Option("--duration", help="Measured time of each load run.")] = "10s",
    warmup: Annotated[str, typer.Option("--warmup", help="Load before each measurement.")] = "2s",
    concurrency: Annotated[
        str,
        typer.Option(
            "--concurrency",
            help="Concurrency levels tried for throughput; the ramp stops when a level adds < 5%.",
        ),
    ] = "1,2,4,8",
    rounds: Rounds = None,
    confidence: Confidence = DEFAULT_CONFIDENCE,
    rank_by: Annotated[
        str, typer.Option("--rank-by", help=f"Order of the table: {', '.join(RANK_KEYS)}.")
    ] = "throughput",
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="Working directory: the model repository and compare.json (default compare-NAME).",
            show_default=False,
        ),
    ] = None,
    json_path: JsonOut = None,
    markdown_path: Annotated[
        Path | None, typer.Option("--markdown", help="Write the table as Markdown.", show_default=False)
    ] = None,
    html_path: HtmlOut = None,
    url: Annotated[
        str | None,
        typer.Option(
            "--url",
            help="Measure a running deployment (HTTP host:port, explicit model control) instead of "
            "the embedded server; nothing is converted.",
            show_default=False,
        ),
    ] = None,
    repo: Annotated[
        Path | None,
        typer.Option(
            "--repo",
            help="Measure the models NAME_<format> of an existing repository; nothing is converted.",
            show_default=False,
        ),
    ] = None,
    metrics_url: Annotated[
        str | None,
        typer.Option(
            "--metrics-url",
            help="Metrics endpoint of --url (default its host, port 8002).",
            show_default=False,
        ),
    ] = None,
    protocol: Annotated[ProtocolChoice, typer.Option("--protocol", help="Load-test protocol.")] = (
        ProtocolChoice.http
    ),
    input_spec: InputSpecs = None,
    output_names: OutputNames = None,
    script: Script = False,
    max_batch_size: MaxBatchSize = None,
    tvm_target: TvmTarget = None,
    tvm_tune_trials: TvmTuneTrials = 0,
    tvm_tune_minutes: TvmTuneMinutes = None,
    verify_data: VerifyData = None,
    atol: Atol = None,
    rtol: Rtol = None,
    templates: Templates = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the random inputs.")] = 0,
    admin_key: AdminKey = None,
    precision: Precision = "fp32",
    int8_mode: Int8Mode = "static",
    calibration_data: CalibrationData = None,
    calibration_method: CalibrationMethod = "minmax",
    calibration_samples: CalibrationSamples = None,
    keep_fp32: KeepFp32 = None,
    auto_mixed_precision: AutoMixed = False,
    max_error: MaxError = None,
    error_metric: ErrorMetric = "max-abs",
    max_drift: Annotated[
        float | None,
        typer.Option(
            "--max-drift",
            help="Do not recommend reduced-precision engines whose relative RMS error against FP32 "
            "exceeds this (measured on --verify-data or held-out calibration rows).",
            min=0.0,
            show_default=False,
            rich_help_panel="Precision",
        ),
    ] = None,
) -> None:
    """Compare engines for SOURCE on this machine: latency, throughput, memory, cold start, accuracy."""
    with user_errors():
        model_name = name if name is not None else default_name(source)
        work = out or Path(f"compare-{model_name}")
        settings = MeasureSettings(
            batch_size_throughput=batch_size_throughput,
            shapes=parse_shape_overrides(shapes or []),
            seq=seq,
            duration_s=parse_duration(duration, "--duration"),
            warmup_s=parse_duration(warmup, "--warmup"),
            concurrency_levels=parse_int_list(concurrency, "--concurrency") or (1,),
            protocol=protocol.value,
            seed=seed,
            rounds=DEFAULT_ROUNDS if rounds is None else rounds,
            confidence=confidence,
        )
        settings.check()
        chosen, unavailable = _formats(formats, source, url is not None or repo is not None)
        variants, precision_options = precision_settings(
            precision,
            int8_mode,
            calibration_data,
            calibration_method,
            calibration_samples,
            None,
            keep_fp32,
            auto_mixed_precision,
            max_error,
            error_metric,
        )
        build = None
        if url is None and repo is not None:  # served here: refuse configs Triton would refuse (or hang on)
            plan, _ = build_plan(chosen, variants)
            lint_before_serving(repo, [model_dir_name(model_name, f, v) for f, v in plan])
        if url is None and repo is None:
            build = BuildRequest(
                source=source if source_kind_or_none(source) == "pytorch" else Path(source),
                name=model_name,
                repo=work / "model_repository",
                formats=chosen,
                options=BatchingOptions(
                    max_batch_size=max_batch_size
                    if max_batch_size is not None
                    else max(32, batch_size_throughput)
                ),
                force=True,
                templates_dir=templates,
                input_specs=tuple(input_spec or ()),
                output_names=parse_name_list(output_names) if output_names else (),
                torchscript_mode="script" if script else "trace",
                tvm=TvmOptions(target=tvm_target, tune_trials=tvm_tune_trials, tune_minutes=tvm_tune_minutes),
                verify=VerifyOptions(data=verify_data, atol=atol, rtol=rtol),
                precisions=variants,
                precision=precision_options,
            )
        request = CompareRequest(
            source=source,
            name=model_name,
            formats=chosen,
            settings=settings,
            build=build,
            repo=repo,
            url=url,
            metrics_url=metrics_url,
            admin_key=admin_key,
            rank_by=rank_by,
            unavailable=unavailable,
            precisions=variants,
            max_drift=max_drift,
        )
        outputs = [work / "compare.json", *([json_path] if json_path else [])]

        def save(report: CompareReport) -> None:
            for path in outputs:
                report.write_json(path)

        with err_console.status("preparing") as status:
            report = prepare_compare(request, say=lambda msg: status.update(msg))
        if build is not None:
            _print_build(report)
        save(report)
        pending = sum(e.status == "pending" for e in report.engines)
        if pending:
            cost = cost_text(settings, pending)
            err_console.print(f"measuring {pending} engine(s): {cost}", highlight=False, markup=False)
        with Status("measuring", console=err_console) as status, stop_on_signals() as stopping:
            live = _Live(status)
            report = measure_compare(request, report, live.say, live.progress, save, stopping)
        _write_outputs(report, markdown_path, html_path)
        print_report(report)
        console.print(
            f"results: {', '.join(str(p) for p in outputs)}", highlight=False, soft_wrap=True, markup=False
        )
        _finish(report)


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
    from tritongen.report.html import precision_tables
    from tritongen.report.tables import compare_table, to_rich

    tables = [
        compare_table(report),
        *precision_tables([(e.label, e.accuracy) for e in report.engines if e.accuracy]),
    ]
    for table in tables:
        console.print(to_rich(table))
        for note in table.notes:
            console.print(f"  {note}", soft_wrap=True, highlight=False, markup=False)
    if report.recommendations:
        console.print("[bold]recommendations[/]")
        for rec in report.recommendations:
            console.print(
                f"  [bold]{escape(rec.title)}:[/] {escape(rec.reason)}", soft_wrap=True, highlight=False
            )


def _write_outputs(report: CompareReport, markdown: Path | None, html: Path | None) -> None:
    if markdown is not None:
        from tritongen.io.files import write_output
        from tritongen.report.tables import compare_table, to_markdown

        lines = [to_markdown(compare_table(report)), ""]
        lines += [f"- **{r.title}**: {r.reason}" for r in report.recommendations]
        write_output(markdown, "\n".join(lines) + "\n")
    if html is not None:
        from tritongen.report.html import write_documents

        write_documents([(report.name, report.to_json())], html)


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
