"""``tritongen convert``: a source model into Triton model directories."""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from tritongen.cli.boundary import user_errors
from tritongen.cli.console import console, err_console
from tritongen.cli.llm.convert import convert_llm, llm_request
from tritongen.cli.options.batching import BatchingFlags
from tritongen.cli.options.engine import (
    EngineFlags,
    PrecisionFlags,
    TensorRtFlags,
    VerifyFlags,
    build_request,
)
from tritongen.cli.options.groups import Pick, option_groups, reworded
from tritongen.cli.options.llm_engine import LlmEngineFlags
from tritongen.cli.options.output import OutputFlags
from tritongen.cli.options.shared import Force, Formats, ModelNameOption, Repo, Shapes, Templates
from tritongen.cli.source_names import default_name, source_kind_or_none
from tritongen.client.inputs import parse_shape_overrides
from tritongen.convert.formats import parse_formats
from tritongen.convert.tvm import foreign_arch
from tritongen.errors import ConfigError
from tritongen.pipeline.request import BuildRequest, BuildResult
from tritongen.pipeline.run import build_models
from tritongen.sources.adaptation import parse_constants
from tritongen.sources.llm_source import is_llm_folder
from tritongen.triton.model_config import ModelConfig


class TargetChoice(str, Enum):
    """Where the repository will be served."""

    local = "local"
    container = "container"


Source = Annotated[
    str,
    typer.Argument(
        help="Source model: an .onnx file, a TorchScript file (.pt), a PyTorch factory "
        "package.module:function returning an nn.Module (imported and run: trusted code only), or a "
        "Hugging Face language-model folder (config, weights, tokenizer) for --formats vllm,tensorrtllm.",
        show_default=False,
    ),
]


@dataclass(frozen=True)
class ConvertFlags:
    """What ``convert`` writes, and where."""

    name: ModelNameOption = None
    repo: Annotated[Path, reworded(Repo, "Model repository to write into.")] = Path("model_repository")
    target: Annotated[
        TargetChoice,
        typer.Option(
            "--target",
            help="local: the embedded server (Python backend, CPU); container: the full Triton image.",
        ),
    ] = TargetChoice.local
    formats: Formats = "onnx"
    templates: Templates = None
    force: Force = False


@dataclass(frozen=True)
class ShapeFlags:
    """The dims the source is run at, and what is frozen into it."""

    shape: Annotated[
        list[str] | None,
        reworded(
            Shapes,
            "NAME=DIMS, repeatable: the dims of an input (batch dim included or not, e.g. x=1,3,640,640) "
            "that verification, calibration and TVM's default buckets use. Without it, dynamic dims come "
            "from the model's clues, else the first of 8, 32, 64, 224, 320, 640 the source runs at.",
        ),
    ] = None
    fixed_shape: Annotated[
        bool,
        typer.Option(
            "--fixed-shape",
            help="Also write the --shape dims into config.pbtxt: the model serves those dims only.",
        ),
    ] = False
    constant: Annotated[
        list[str] | None,
        typer.Option(
            "--constant",
            help="NAME=VALUE, repeatable: freeze an input (ONNX) or a forward() argument (an int, float "
            "or bool a TorchScript or PyTorch module takes) into the served model, e.g. sr=16000.",
            show_default=False,
        ),
    ] = None

    def shapes(self) -> dict[str, tuple[int, ...]]:
        """``--shape`` by input name.

        Raises:
            ConfigError: an item is not NAME=DIMS.
        """
        return parse_shape_overrides(self.shape or [])


@dataclass(frozen=True)
class ConvertShapeFlags(ShapeFlags, ConvertFlags):
    """What to convert and where, and the dims the source is run at."""


@option_groups(output=Pick(only=("json_path", "html_path")))
def convert_command(
    ctx: typer.Context,
    source: Source,
    convert: ConvertShapeFlags,
    batching: BatchingFlags,
    engines: EngineFlags,
    precision: PrecisionFlags,
    tensorrt: TensorRtFlags,
    verify: VerifyFlags,
    output: OutputFlags,
    llm: LlmEngineFlags,
) -> None:
    """Convert SOURCE into one verified Triton model directory per format, each with a checked config."""
    if is_llm_folder(source):
        _convert_llm(ctx, source, convert, llm, output)
        return
    options = batching.options()
    with user_errors():
        if llm.given():
            raise ConfigError(
                f"{llm.given()[0]} sets a language model's engine; {source} is no Hugging Face model folder",
                "give the folder holding config.json, the weights and the tokenizer",
            )
        request = build_request(
            source,
            engines,
            verify,
            precision,
            name=convert.name if convert.name is not None else default_name(source),
            repo=convert.repo,
            target=convert.target.value,
            formats=parse_formats(convert.formats, source_kind_or_none(source)),
            options=options,
            force=convert.force,
            templates_dir=convert.templates,
            tensorrt=tensorrt.options(),
            # "all" means every format that can be built here: precisions a format does not
            # take are not asked of it.
            list_unsupported_precisions=convert.formats.strip().lower() != "all",
            shapes=convert.shapes(),
            fixed_shape=convert.fixed_shape,
            constants=parse_constants(convert.constant or []),
        )
        with err_console.status("converting") as status:
            result = build_models(request, progress=lambda msg: status.update(msg))
        print_summary(result, request)
        write_results(result, request, output.json_path, output.html_path)
    if result.failures:
        raise typer.Exit(1)


def _convert_llm(
    ctx: typer.Context, source: str, convert: ConvertFlags, llm: LlmEngineFlags, output: OutputFlags
) -> None:
    """A Hugging Face folder: its LLM formats (exit 1 when one is not built)."""
    with user_errors():
        name = convert.name if convert.name is not None else default_name(Path(source).name)
        request = llm_request(
            ctx, Path(source), name, convert.repo, convert.target.value, convert.formats, llm
        )
        request = replace(request, force=convert.force, templates_dir=convert.templates)
        result = convert_llm(request, output.json_path)
    if result.failures:
        raise typer.Exit(1)


def write_results(
    result: BuildResult, request: BuildRequest, json_path: Path | None, html: Path | None
) -> None:
    """Write the ``tritongen.convert/1`` document and its HTML report where asked."""
    if json_path is None and html is None:
        return
    import json

    from tritongen.io.files import write_output

    document = result.document(request)
    if json_path is not None:
        write_output(json_path, json.dumps(document.to_json(), indent=2) + "\n")
    if html is not None:
        from tritongen.report.html import write_documents

        write_documents([(request.name, document)], html)


def print_summary(result: BuildResult, request: BuildRequest) -> None:
    """Show what was written (one row per model directory), the verification, and what failed."""
    console.print(
        f"[bold]{escape(str(result.source))}[/]  {escape(result.signature.describe())}",
        soft_wrap=True,
        highlight=False,
    )
    for note in result.signature.notes:
        console.print(f"[yellow]note:[/] {escape(note)}", soft_wrap=True)
    if result.models:
        table = Table(
            title=f"wrote {len(result.models)} model(s) to {request.repo} (target {request.target})"
        )
        table.add_column("model")
        table.add_column("backend")
        table.add_column("max batch", justify="right")
        table.add_column("dynamic batching")
        table.add_column("instances")
        table.add_column("files")
        for model in result.models:
            table.add_row(
                model.name,
                model.config.backend or model.config.platform,
                str(model.config.max_batch_size),
                describe_batching(model.config),
                describe_instances(model.config),
                ", ".join(model.files),
            )
        console.print(table)
    console.print(verification_table(result, skipped=request.verify.skip))
    print_precision(result)
    for model in result.models:
        if model.format == "tvm" and (arch := foreign_arch(model.engine)):
            console.print(
                f"[bold]{escape(model.name)}[/]: cross-compiled for {arch}, not verified here", soft_wrap=True
            )
        commands = model.engine.get("commands") if model.engine.get("dry_run") else None
        if isinstance(commands, dict):
            console.print(
                f"[bold]{escape(model.name)}[/]: no plan built (dry run); build it with", soft_wrap=True
            )
            console.print(f"  {commands['trtexec']}", soft_wrap=True, highlight=False, markup=False)
            console.print(
                f"  or on the GPU host: {commands['compose']}", soft_wrap=True, highlight=False, markup=False
            )
    for outcome in result.outcomes:
        for warning in outcome.warnings:
            err_console.print(
                f"warning: {warning}", style="yellow", soft_wrap=True, highlight=False, markup=False
            )
    print_notes(result)
    for outcome in result.failures:
        style = "yellow" if outcome.status in ("unavailable", "kept") else "red"
        line = f"[{style}]{escape(outcome.label)} {outcome.status}:[/] {escape(outcome.reason or '')}"
        err_console.print(line, soft_wrap=True, highlight=False)
        if outcome.hint:
            err_console.print(outcome.hint, soft_wrap=True, highlight=False, markup=False)


def print_notes(result: BuildResult) -> None:
    """The shapes verification ran at (when chosen, not declared) and where the engines' messages went."""
    plan = result.shape_plan
    if plan is not None and plan.chosen_by not in ("static", "default"):
        shapes = ", ".join(f"{n}{s}" for n, s in plan.first_shapes(result.signature).items())
        reasons = "; ".join(plan.reasons)
        console.print(f"verified at {shapes} ({reasons})", soft_wrap=True, highlight=False, markup=False)
    if result.log_path is not None:
        err_console.print(f"engine messages: {result.log_path}", style="dim", soft_wrap=True, highlight=False)


def print_precision(result: BuildResult) -> None:
    """The accuracy of every reduced-precision variant and the steps of each mixed-precision search."""
    from tritongen.report.convert_tables import precision_tables
    from tritongen.report.table_data import to_rich

    entries = [(o.label, o.precision) for o in result.outcomes if o.precision is not None]
    for table in precision_tables(entries):
        console.print(to_rich(table))
        for note in table.notes:
            console.print(f"  {note}", soft_wrap=True, highlight=False, markup=False)


def verification_table(result: BuildResult, skipped: bool = False) -> Table:
    """Per format: status, the worst error of each output against the source, time taken."""
    table = Table(title="verification against the source")
    table.add_column("format")
    table.add_column("status")
    table.add_column("output")
    table.add_column("max abs err", justify="right")
    table.add_column("max rel err", justify="right")
    table.add_column("rel RMS", justify="right")
    table.add_column("tolerance")
    table.add_column("samples", justify="right")
    table.add_column("time s", justify="right")
    colours = {"built": "green", "kept": "yellow", "failed": "red", "unavailable": "yellow"}
    for outcome in result.outcomes:
        status = f"[{colours[outcome.status]}]{outcome.status}[/]"
        check = outcome.verification
        if check is None or not check.outputs:
            if outcome.status == "built":
                dry = outcome.model is not None and bool(outcome.model.engine.get("dry_run"))
                note = "no plan yet (dry run)" if dry else ""
                note = note or ("not verified (--no-verify)" if skipped else "not verified: cannot run here")
            else:
                note = "see below"
            table.add_row(outcome.label, status, note, "", "", "", "", "", f"{outcome.seconds:.1f}")
            continue
        for i, output in enumerate(check.outputs):
            mark = "" if output.passed else " [red]✗[/]"
            on = f" on {check.device}" if check.device != "cpu" else ""
            table.add_row(
                outcome.label + on if i == 0 else "",
                status if i == 0 else "",
                escape(output.name) + mark,
                f"{output.max_abs:.2e}",
                f"{output.max_rel:.2e}",
                f"{output.rel_rms:.2e}",
                check.tolerance.describe() if i == 0 else "",
                str(check.samples) if i == 0 else "",
                f"{outcome.seconds:.1f}" if i == 0 else "",
            )
    return table


def describe_batching(config: ModelConfig) -> str:
    """Summarise the dynamic batcher, e.g. ``preferred 4,8 · 500 µs``."""
    batching = config.dynamic_batching
    if batching is None:
        return "off"
    sizes = ",".join(str(s) for s in batching.preferred_batch_size) or "auto"
    return f"preferred {sizes} · {batching.max_queue_delay_microseconds} µs"


def describe_instances(config: ModelConfig) -> str:
    """Summarise instance groups, e.g. ``2 × CPU``."""
    return (
        ", ".join(f"{g.count} × {g.kind.removeprefix('KIND_')}" for g in config.instance_group) or "default"
    )
