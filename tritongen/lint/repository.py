"""Lint what the user points at: repositories, model directories or config files.

A repository is a directory of model directories; a model directory holds ``config.pbtxt``,
or only the model files Triton completes a config from (it says so in a note).
Every config is parsed with Triton's protobuf schema (a syntax error carries file, line
and column), checked with the model-level rules, and then ensembles are checked against
the models of their repository: steps that exist, no cycles, maps that match the step
models' inputs and outputs, batch sizes and data types that agree.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tritongen.lint.findings import Finding, LintReport
from tritongen.lint.llm_layouts import check_llm_layouts
from tritongen.lint.rules.context import ModelContext, enum_name
from tritongen.lint.rules.ensembles import iter_steps
from tritongen.lint.rules.run import lint_model
from tritongen.triton.autofill import (
    autofilled_config,
    is_model_directory,
    looks_like_model,
    numeric_versions,
)
from tritongen.triton.proto import ConfigSyntaxError, parse_model_config, read_config_file

CONFIG_FILE = "config.pbtxt"


class LintUsageError(Exception):
    """The arguments cannot be linted at all (exit code 2)."""


@dataclass(frozen=True)
class Target:
    """One config to lint, and the repository it belongs to (for ensembles)."""

    config: Path
    directory: Path | None
    repository: Path | None


def resolve_targets(paths: list[Path]) -> list[Target]:
    """What each path means: a config file, a model directory, or a repository of them.

    Raises:
        LintUsageError: a path does not exist or holds no config.
    """
    targets: list[Target] = []
    for path in paths:
        if not path.exists():
            raise LintUsageError(f"{path} does not exist")
        if path.is_file():
            directory = path.parent if path.name == CONFIG_FILE else None
            targets.append(Target(path, directory, directory.parent if directory else None))
        elif is_model_directory(path):
            targets.append(Target(path / CONFIG_FILE, path, path.parent))
        else:
            children = sorted(p for p in path.iterdir() if p.is_dir())
            if not any(looks_like_model(p) for p in children):
                raise LintUsageError(
                    f"{path} holds no {CONFIG_FILE} and no model file "
                    "(neither a model directory nor a repository)"
                )
            # Triton takes every subdirectory of a repository for a model, whether it has a config or not.
            targets += [Target(p / CONFIG_FILE, p, path) for p in children]
    return targets


def parse_config(text: str, file: str, model: str) -> tuple[Any | None, Finding | None]:
    """Parse ``text`` with Triton's schema: the message, or a syntax finding with line and column."""
    try:
        return parse_model_config(text), None
    except ConfigSyntaxError as e:
        fix = "fix the text at that position (see Triton's model_config.proto)"
        return None, Finding("error", model, file, "syntax", "", e.detail, fix, e.line, e.column)
    except (ValueError, TypeError, RecursionError, OverflowError) as e:
        fix = "write the config in protobuf text format"
        return None, Finding("error", model, file, "syntax", "", f"not protobuf text: {e}", fix)


_SEGMENT = re.compile(r"^(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:\[(?P<index>[^\]]*)\])?$")


def locate(text: str, path: str) -> tuple[int, int] | None:
    """Line and column (1-based) of the field ``path`` (e.g. ``dynamic_batching.preferred_batch_size``).

    Each segment is searched for after the previous one; an element of a repeated field
    past the first is not told apart, so the search stops at its parent.
    """
    position, found = 0, None
    for segment in path.split("."):
        match = _SEGMENT.match(segment)
        if match is None:
            break
        hit = re.compile(rf"\b{match['name']}\b\s*[:{{\[]").search(text, position)
        if hit is None:
            break
        position = found = hit.start()
        index = match["index"]
        if index is not None and index not in ("", "0"):
            break
    if found is None:
        return None
    line = text.count("\n", 0, found) + 1
    return line, found - (text.rfind("\n", 0, found) + 1) + 1


def with_positions(findings: list[Finding], text: str) -> list[Finding]:
    """The findings with the line and column of their field, where it is written in ``text``."""
    placed = []
    for finding in findings:
        where = locate(text, finding.field) if finding.line is None and finding.field else None
        placed.append(replace(finding, line=where[0], column=where[1]) if where else finding)
    return placed


def lint_text(
    text: str, name: str = "model", file: str = CONFIG_FILE, slo_p99_ms: float | None = None
) -> list[Finding]:
    """Lint one config's text on its own (no directory: file and repository rules are skipped)."""
    message, syntax = parse_config(text, file, name)
    if message is None:
        return [syntax] if syntax else []
    return with_positions(
        lint_model(
            ModelContext(name or "model", message, file, directory=None, slo_p99_ms=slo_p99_ms, text=text)
        ),
        text,
    )


def lint_paths(paths: list[Path], slo_p99_ms: float | None = None) -> LintReport:
    """Lint every config under ``paths``.

    Raises:
        LintUsageError: a path does not exist or holds nothing to lint.
    """
    report = LintReport()
    contexts: dict[Path, list[ModelContext]] = {}
    seen: set[Path] = set()
    for target in resolve_targets(paths):
        if target.config.resolve() in seen:
            continue
        seen.add(target.config.resolve())
        file = str(target.config)
        model = target.directory.name if target.directory else target.config.stem
        report.models.append(model)
        if target.directory is not None and not target.config.exists():
            ctx = _auto_completed(target.directory, slo_p99_ms)
            report.files.append(ctx.file)
            report.findings += lint_model(ctx)
            if target.repository is not None:
                contexts.setdefault(target.repository, []).append(ctx)
            continue
        report.files.append(file)
        try:
            text = target.config.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            report.findings.append(
                Finding(
                    "error",
                    model,
                    file,
                    "read",
                    "",
                    f"cannot read: {e}",
                    "check the file's permissions and encoding",
                )
            )
            continue
        message, syntax = parse_config(text, file, model)
        if message is None:
            report.findings += [syntax] if syntax else []
            continue
        ctx = ModelContext(model, message, file, target.directory, slo_p99_ms, text=text)
        report.findings += with_positions(lint_model(ctx), text)
        if target.repository is not None:
            contexts.setdefault(target.repository, []).append(ctx)
    for repository, members in contexts.items():
        texts = {ctx.name: ctx.text for ctx in members}
        report.findings += [
            with_positions([f], texts.get(f.model, ""))[0] for f in check_ensembles(repository, members)
        ]
    return report


def _auto_completed(directory: Path, slo_p99_ms: float | None = None) -> ModelContext:
    """A model directory without config.pbtxt, as the config Triton starts from (backend and file only)."""
    return ModelContext(
        directory.name,
        autofilled_config(directory),
        str(directory),
        directory,
        slo_p99_ms,
        auto_completed=True,
    )


def _load_repository_models(repository: Path, known: list[ModelContext]) -> dict[str, ModelContext]:
    """Every parsable model of ``repository`` (those linted already, plus the others, silently)."""
    models = {ctx.name: ctx for ctx in known}
    try:
        children = sorted(p for p in repository.iterdir() if p.is_dir())
    except OSError:
        return models
    for child in children:
        if child.name in models:
            continue
        if not (child / CONFIG_FILE).exists():
            if looks_like_model(child):
                models[child.name] = _auto_completed(child)
            continue
        message = read_config_file(child).message
        if message is not None:
            models[child.name] = ModelContext(child.name, message, str(child / CONFIG_FILE), child)
    return models


def check_ensembles(repository: Path, linted: list[ModelContext]) -> list[Finding]:
    """Ensembles against the models of their repository (a TensorRT-LLM layout's agreements too)."""
    models = _load_repository_models(repository, linted)
    findings: list[Finding] = check_llm_layouts(models, linted)
    for ctx in linted:
        if not ctx.is_ensemble:
            continue
        before = len(ctx.findings)
        _check_steps(ctx, models)
        _check_cycles(ctx, models)
        findings += ctx.findings[before:]
    return findings


def _check_steps(ctx: ModelContext, models: dict[str, ModelContext]) -> None:
    ensemble_types = {t.name: t for t in [*ctx.config.input, *ctx.config.output]}
    for index, step in iter_steps(ctx):
        path = f"ensemble_scheduling.step[{index}]"
        model = models.get(step.model_name)
        if model is None:
            if step.model_name:
                ctx.error(
                    "ensemble.step-unknown-model",
                    f"{path}.model_name",
                    f"step model '{step.model_name}' is not in the repository",
                    "add that model, or fix the name",
                )
            continue
        versions, _ = numeric_versions(model.directory)
        if step.model_version != -1 and model.directory is not None and step.model_version not in versions:
            ctx.error(
                "ensemble.step-version",
                f"{path}.model_version",
                f"step requires version "
                f"{step.model_version} of '{step.model_name}' (0 when omitted), which it does not have",
                "set model_version: -1 (the latest version)",
            )
        if model.auto_completed or not (model.config.input or model.config.output):
            continue  # its tensors and batching are known only once Triton has filled its config in
        mb, step_mb = ctx.config.max_batch_size, model.config.max_batch_size
        if step_mb and step_mb < mb:
            ctx.error(
                "ensemble.step-batch",
                f"{path}.model_name",
                f"the ensemble allows batch {mb} but '{model.name}' only {step_mb}",
                f"set the ensemble's max_batch_size to {step_mb} or less",
            )
        step_inputs = {t.name: t for t in model.config.input}
        step_outputs = {t.name: t for t in model.config.output}
        _check_map(ctx, path, "input", step.input_map, step_inputs, ensemble_types, model.name)
        for name, tensor in step_inputs.items():
            if name not in step.input_map and not tensor.optional:
                ctx.error(
                    "ensemble.map-input-missing",
                    f"{path}.input_map",
                    f"input '{name}' of '{model.name}' is not mapped",
                    f"map '{name}' to an ensemble tensor",
                )
        _check_map(ctx, path, "output", step.output_map, step_outputs, ensemble_types, model.name)


def _check_map(
    ctx: ModelContext,
    path: str,
    kind: str,
    mapping: Any,
    declared: dict[str, Any],
    ensemble_types: dict[str, Any],
    model: str,
) -> None:
    """A step's input_map or output_map: keys the step model has, data types that agree."""
    for key, tensor in mapping.items():
        if key not in declared:
            ctx.error(
                f"ensemble.map-{kind}",
                f"{path}.{kind}_map",
                f"'{model}' has no {kind} '{key}'",
                f"map one of: {', '.join(sorted(declared)) or 'none'}",
            )
        else:
            _same_type(ctx, path, tensor, ensemble_types.get(tensor), declared[key], model)


def _same_type(ctx: ModelContext, path: str, tensor: str, ours: Any, theirs: Any, model: str) -> None:
    if ours is None:
        return
    if ours.data_type != theirs.data_type:
        ctx.error(
            "ensemble.data-type",
            path,
            f"ensemble tensor '{tensor}' is {enum_name(ours, 'data_type')} "
            f"here and {enum_name(theirs, 'data_type')} in '{model}'",
            "use one data type",
        )


def _check_cycles(ctx: ModelContext, models: dict[str, ModelContext]) -> None:
    """Ensembles that reach themselves through their steps."""
    path: list[str] = []

    def visit(name: str) -> list[str] | None:
        if name in path:
            return [*path[path.index(name) :], name]
        model = models.get(name)
        if model is None or not model.is_ensemble:
            return None
        path.append(name)
        for _, step in iter_steps(model):
            cycle = visit(step.model_name)
            if cycle:
                return cycle
        path.pop()
        return None

    cycle = visit(ctx.name)
    if cycle:
        ctx.error(
            "ensemble.cycle",
            "ensemble_scheduling.step",
            "circular dependency: " + " -> ".join(cycle),
            "break the cycle: an ensemble cannot contain itself",
        )


def lint_model_text(
    text: str, directory: Path, file: str | None = None, check_files: bool = True
) -> list[Finding]:
    """Lint config text meant for ``directory`` (before it is written there).

    ``check_files=False`` leaves out the version directories and model files: what a
    re-render or a build without its artifact yet cannot change.
    """
    shown = file or str(directory / CONFIG_FILE)
    message, syntax = parse_config(text, shown, directory.name)
    if message is None:
        return [syntax] if syntax else []
    context = ModelContext(directory.name, message, shown, directory, check_files=check_files, text=text)
    return with_positions(lint_model(context), text)
