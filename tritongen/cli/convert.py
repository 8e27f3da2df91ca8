"""``tritongen convert``: a source model into Triton model directories."""

from __future__ import annotations

import re
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from tritongen.cli.batching_options import (
    DynamicBatchingFlag,
    Instances,
    Kind,
    MaxBatchSize,
    MaxQueueDelay,
    PreferredBatchSizes,
    batching_options,
)
from tritongen.cli.common import console, err_console, parse_name_list, user_errors
from tritongen.cli.options import Templates
from tritongen.triton.build import FORMATS, BuildRequest, BuildResult, build_models
from tritongen.triton.model_config import ModelConfig


class TargetChoice(str, Enum):
    """Where the repository will be served."""

    local = "local"
    container = "container"


def convert_command(
    source: Annotated[Path, typer.Argument(help="Source model: an .onnx file.", show_default=False)],
    name: Annotated[
        str | None, typer.Option("--name", help="Model name (default: the file name).", show_default=False)
    ] = None,
    repo: Annotated[Path, typer.Option("--repo", help="Model repository to write into.")] = Path(
        "model_repository"
    ),
    target: Annotated[
        TargetChoice,
        typer.Option(
            "--target",
            help="local: the embedded server (Python backend, CPU); container: the full Triton image.",
        ),
    ] = TargetChoice.local,
    formats: Annotated[
        str,
        typer.Option("--formats", help=f"Formats to build, comma-separated: {', '.join(FORMATS)} or all."),
    ] = "onnx",
    max_batch_size: MaxBatchSize = None,
    preferred_batch_sizes: PreferredBatchSizes = None,
    max_queue_delay_us: MaxQueueDelay = None,
    dynamic_batching: DynamicBatchingFlag = None,
    instances: Instances = None,
    kind: Kind = None,
    templates: Templates = None,
    force: Annotated[
        bool, typer.Option("--force", help="Replace model directories that already exist.")
    ] = False,
) -> None:
    """Convert SOURCE into a Triton model directory per format, with a checked config.pbtxt."""
    options = batching_options(
        max_batch_size, preferred_batch_sizes, max_queue_delay_us, dynamic_batching, instances, kind
    )
    chosen = FORMATS if formats.strip() == "all" else parse_name_list(formats)
    request = BuildRequest(
        source=source,
        name=name if name is not None else default_name(source),
        repo=repo,
        target=target.value,
        formats=chosen,
        options=options,
        force=force,
        templates_dir=templates,
    )
    with user_errors(), err_console.status("converting") as status:
        result = build_models(request, progress=lambda msg: status.update(msg))
    print_summary(result, request)


def default_name(source: Path) -> str:
    """Derive a legal model name from a file name: ``My Model.onnx`` -> ``My_Model``."""
    stem = re.sub(r"[^A-Za-z0-9_.\-]", "_", source.stem).lstrip(".-")
    return stem or "model"


def print_summary(result: BuildResult, request: BuildRequest) -> None:
    """Show what was written: one row per model directory."""
    console.print(f"[bold]{result.source}[/]  {result.signature.describe()}", soft_wrap=True, highlight=False)
    for note in result.signature.notes:
        console.print(f"[yellow]note:[/] {note}", soft_wrap=True)
    table = Table(title=f"wrote {len(result.models)} model(s) to {request.repo} (target {request.target})")
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
