"""``convert`` of a Hugging Face model folder: the LLM formats, built and shown (shared by ``convert``)."""

from __future__ import annotations

import json
from pathlib import Path

import typer
import typer.models
from rich.markup import escape
from rich.table import Table

from tritongen.cli.console import console, err_console
from tritongen.cli.options.given import refuse_given
from tritongen.cli.options.llm_engine import LlmEngineFlags
from tritongen.convert.artifact import Target
from tritongen.convert.llm.formats import DEFAULT_LLM_FORMAT, parse_llm_formats
from tritongen.convert.llm.tensorrtllm import BUILD_SCRIPT, build_command, layout_names
from tritongen.pipeline.llm_build import LlmBuildRequest, LlmBuildResult, build_llm_models

CLASSIC_GROUPS = ("batching__", "engines__", "precision__", "tensorrt__", "verify__", "output__html_path")
"""The ``convert`` options of the classic formats: refused for a language model."""
GIVEN = ("COMMANDLINE", "ENVIRONMENT")
"""Where a parameter given by the user comes from (its source's name)."""


def given_flags(ctx: typer.Context, prefixes: tuple[str, ...]) -> list[str]:
    """The flags of the running command given by the user among the parameters named with ``prefixes``."""
    given = []
    for param in ctx.command.params:
        if not param.name or not param.name.startswith(prefixes):
            continue
        source = ctx.get_parameter_source(param.name)
        if source is not None and source.name in GIVEN:
            given.append(param.opts[0])
    return given


def llm_request(
    ctx: typer.Context,
    source: Path,
    name: str,
    repo: Path,
    target: Target,
    formats: str,
    engine: LlmEngineFlags,
) -> LlmBuildRequest:
    """The build of a language model; the classic formats' options are refused.

    Raises:
        ConfigError: a classic option given, or formats that do not serve a language model.
    """
    refuse_given(
        given_flags(ctx, CLASSIC_GROUPS),
        "does not apply to a language model (a Hugging Face folder)",
        "its engine takes --max-num-seqs, --max-num-batched-tokens, --chunked-prefill, "
        "--prefix-caching, --kv-cache-fraction, --kv-cache-gib and --max-model-len",
    )
    chosen = formats if given_flags(ctx, ("convert__formats",)) else DEFAULT_LLM_FORMAT
    return LlmBuildRequest(
        source=source,
        name=name,
        repo=repo,
        target=target,
        formats=parse_llm_formats(chosen, target),
        engine=engine.options(),
        vllm_env=engine.vllm_env,
    )


def convert_llm(request: LlmBuildRequest, json_path: Path | None) -> LlmBuildResult:
    """Build the language model's directories, show them, write the JSON document where asked."""
    with err_console.status("converting") as status:
        result = build_llm_models(request, progress=lambda message: status.update(message))
    print_llm_summary(result, request)
    if json_path is not None:
        from tritongen.io.files import write_output

        write_output(json_path, json.dumps(result.to_json(request), indent=2) + "\n")
    return result


def print_llm_summary(result: LlmBuildResult, request: LlmBuildRequest) -> None:
    """The source, the engine settings, a row per model directory, and what failed or remains."""
    console.print(
        f"[bold]{escape(str(request.source))}[/]  {escape(result.source.describe())}",
        soft_wrap=True,
        highlight=False,
    )
    settings = result.settings
    kv = (
        f"KV cache {settings.kv_cache_bytes / 2**30:.3g} GiB"
        if settings.kv_cache_bytes is not None
        else f"KV cache {settings.kv_cache_fraction:g} of GPU memory"
    )
    console.print(
        f"engine: max_model_len {settings.max_model_len}, max_num_seqs {settings.max_num_seqs}, "
        f"max_num_batched_tokens {settings.max_num_batched_tokens}, chunked prefill "
        f"{_on(settings.chunked_prefill)}, prefix caching {_on(settings.prefix_caching)}, {kv}",
        soft_wrap=True,
        highlight=False,
    )
    models = [(o, m) for o in result.outcomes for m in o.models]
    if models:
        table = Table(title=f"wrote {len(models)} model(s) to {request.repo} (target {request.target})")
        for column in ("model", "format", "role", "backend", "files"):
            table.add_column(column)
        for outcome, model in models:
            backend = model.config.backend or model.config.platform
            table.add_row(model.name, outcome.format, model.role, backend, ", ".join(model.files))
        console.print(table)
    _print_remaining(result, request)


def _print_remaining(result: LlmBuildResult, request: LlmBuildRequest) -> None:
    """What remains (the engine to build), the warnings, and each format not built."""
    for outcome in result.outcomes:
        for note in outcome.notes:
            console.print(escape(note), soft_wrap=True, highlight=False)
        if outcome.format == "tensorrtllm" and outcome.status == "built":
            from tritongen.deploy.compose import default_triton_image
            from tritongen.deploy.llm import tensorrtllm_image

            engine = layout_names(request.name)["engine"]
            image = tensorrtllm_image(default_triton_image())
            command = build_command(engine, str(request.repo.absolute()), image)
            console.print(f"  {command}", soft_wrap=True, highlight=False, markup=False)
            console.print(
                f"  ({engine}/{BUILD_SCRIPT} holds the build's settings)", soft_wrap=True, markup=False
            )
        for warning in outcome.warnings:
            err_console.print(
                f"warning: {warning}", style="yellow", soft_wrap=True, highlight=False, markup=False
            )
        if outcome.status != "built":
            style = "yellow" if outcome.status == "unavailable" else "red"
            line = f"[{style}]{outcome.format} {outcome.status}:[/] {escape(outcome.reason or '')}"
            err_console.print(line, soft_wrap=True, highlight=False)
            if outcome.hint:
                err_console.print(outcome.hint, soft_wrap=True, highlight=False, markup=False)


def _on(value: bool) -> str:
    return "on" if value else "off"
