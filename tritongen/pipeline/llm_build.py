"""Build LLM model directories from a Hugging Face folder: read, settle the settings, write, lint, publish.

Everything a user can get wrong is refused before anything is written: a folder that is no
causal LM or has no tokenizer, settings the engine refuses, the vLLM environment missing,
a model directory already there. The directories are written in a staging directory inside
the repository, rendered and linted there as one repository (the TensorRT-LLM layout's
models are checked against each other), and moved into place only when every one passes.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from tritongen import __version__
from tritongen.convert.artifact import TARGETS, Target
from tritongen.convert.llm.environment import check_vllm_env, vllm_env_path
from tritongen.convert.llm.files import WrittenModel
from tritongen.convert.llm.formats import LLM_FORMATS, target_refusal, tensorrtllm_build_reason
from tritongen.convert.llm.settings import EngineOptions, EngineSettings, resolve_settings
from tritongen.convert.llm.tensorrtllm import BUILD_SCRIPT, layout_names, write_tensorrtllm
from tritongen.convert.llm.vllm import write_vllm_container, write_vllm_local
from tritongen.errors import ConfigError, ConversionError
from tritongen.lint.findings import Finding
from tritongen.lint.repository import lint_paths
from tritongen.sources.llm_source import LlmSource, load_llm_source
from tritongen.triton.names import check_model_name
from tritongen.triton.render import render_config
from tritongen.triton.repository import METADATA_FILE, check_free, ensure_writable_repo, publish, staging_dir

Progress = Callable[[str], None]
LlmStatus = Literal["built", "unavailable", "failed"]


@dataclass(frozen=True)
class LlmBuildRequest:
    """What ``tritongen convert MODEL_DIR`` asks for a language model."""

    source: Path
    name: str
    repo: Path
    target: Target = "local"
    formats: tuple[str, ...] = ("vllm",)
    engine: EngineOptions = field(default_factory=EngineOptions)
    force: bool = False
    templates_dir: Path | None = None
    vllm_env: Path | None = None
    """The local vLLM model's environment (None: ``$TRITONGEN_VLLM_ENV``, else ``.venv-vllm-triton``)."""


@dataclass(frozen=True)
class LlmOutcome:
    """What became of one requested format: its model directories, or why there are none."""

    format: str
    status: LlmStatus
    models: tuple[WrittenModel, ...] = ()
    reason: str | None = None
    hint: str | None = None
    notes: tuple[str, ...] = ()
    """What remains to do (the TensorRT-LLM engine to build), one line each."""
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class LlmBuildResult:
    """Every format's outcome, with the source and settings they were built from."""

    source: LlmSource
    settings: EngineSettings
    outcomes: tuple[LlmOutcome, ...]

    @property
    def failures(self) -> list[LlmOutcome]:
        """The formats that were not built."""
        return [o for o in self.outcomes if o.status != "built"]

    def to_json(self, request: LlmBuildRequest) -> dict[str, Any]:
        """The ``tritongen.convert/1`` document of a language model's build."""
        return {
            "schema": "tritongen.convert/1",
            "tritongen_version": __version__,
            "source": {
                "path": str(request.source),
                "kind": "huggingface",
                "architecture": self.source.architecture,
            },
            "target": request.target,
            "repository": str(request.repo),
            "engine_settings": self.settings.to_json(),
            "formats": [
                {
                    "format": o.format,
                    "status": o.status,
                    "reason": o.reason,
                    "hint": o.hint,
                    "notes": list(o.notes),
                    "models": [
                        {
                            "name": m.name,
                            "role": m.role,
                            "path": str(request.repo / m.name),
                            "files": list(m.files),
                        }
                        for m in o.models
                    ],
                }
                for o in self.outcomes
            ],
        }


def model_names(request: LlmBuildRequest, fmt: str) -> list[str]:
    """The model directories ``fmt`` writes for ``request``."""
    if fmt == "tensorrtllm":
        return list(layout_names(request.name).values())
    return [f"{request.name}_{fmt}"]


def check_llm_request(request: LlmBuildRequest) -> tuple[LlmSource, EngineSettings, Path | None]:
    """Everything checked before a file is written: the name, target, formats, source, settings, environment.

    Raises:
        TritongenError: what is wrong, in one line with what to do.
    """
    check_model_name(request.name)
    if request.target not in TARGETS:
        raise ConfigError(f"unknown target {request.target!r}", "use --target local or --target container")
    unknown = [f for f in request.formats if f not in LLM_FORMATS]
    if unknown or not request.formats:
        raise ConfigError(
            f"no LLM format {unknown[0] if unknown else ''!r}", f"choose from {', '.join(LLM_FORMATS)}"
        )
    source = load_llm_source(request.source)
    settings = resolve_settings(request.engine, source, request.target)
    env = None
    if "vllm" in request.formats and request.target == "local":
        env = check_vllm_env(vllm_env_path(request.vllm_env))
    ensure_writable_repo(request.repo)
    buildable = [f for f in request.formats if target_refusal(f, request.target) is None]
    check_free(request.repo, [n for f in buildable for n in model_names(request, f)], request.force)
    return source, settings, env


def build_llm_models(request: LlmBuildRequest, progress: Progress) -> LlmBuildResult:
    """Write, render, lint and publish the model directories of every requested format.

    Raises:
        TritongenError: the request is refused before anything is written (see :func:`check_llm_request`).
    """
    source, settings, env = check_llm_request(request)
    outcomes: list[LlmOutcome] = []
    with staging_dir(request.repo) as staged:
        for fmt in request.formats:
            refusal = target_refusal(fmt, request.target)
            if refusal is not None:
                outcomes.append(LlmOutcome(fmt, "unavailable", reason=refusal))
                continue
            progress(f"writing {fmt}")
            outcomes.append(_build_format(request, fmt, source, settings, env, staged))
        built = [m.name for o in outcomes if o.status == "built" for m in o.models]
        if built:
            progress("publishing")
            publish(staged, request.repo, built, request.force)
    return LlmBuildResult(source, settings, tuple(_after_publish(request, o) for o in outcomes))


def _build_format(
    request: LlmBuildRequest,
    fmt: str,
    source: LlmSource,
    settings: EngineSettings,
    env: Path | None,
    staged: Path,
) -> LlmOutcome:
    """One format's directories in ``staged``, rendered and linted; a failed one is removed."""
    try:
        models = _write(request, fmt, source, settings, env, staged)
        for model in models:
            text = render_config(model.config, request.templates_dir)
            (staged / model.name / "config.pbtxt").write_text(text, encoding="utf-8")
            metadata = _metadata(request, source, model)
            (staged / model.name / METADATA_FILE).write_text(
                json.dumps(metadata, indent=2) + "\n", encoding="utf-8"
            )
    except (ConfigError, ConversionError) as e:
        _discard(staged, model_names(request, fmt))
        return LlmOutcome(fmt, "failed", reason=e.message, hint=e.hint)
    findings = _lint(staged, [m.name for m in models], request.repo)
    errors = [f for f in findings if f.severity == "error"]
    if errors:
        _discard(staged, [m.name for m in models])
        return LlmOutcome(
            fmt,
            "failed",
            reason=f"the layout breaks Triton's rules: {errors[0].text()}",
            hint="tritongen lint explains every rule",
        )
    warnings = tuple(f.text() for f in findings if f.severity == "warning")
    return LlmOutcome(fmt, "built", models=tuple(models), warnings=warnings)


def _write(
    request: LlmBuildRequest,
    fmt: str,
    source: LlmSource,
    settings: EngineSettings,
    env: Path | None,
    staged: Path,
) -> list[WrittenModel]:
    """The format's model directories, unrendered."""
    name = f"{request.name}_{fmt}"
    if fmt == "tensorrtllm":
        return write_tensorrtllm(source, settings, staged, request.name)
    if request.target == "local":
        assert env is not None  # checked with the request
        return [write_vllm_local(source, settings, staged / name, env)]
    return [write_vllm_container(source, settings, staged / name)]


def _metadata(request: LlmBuildRequest, source: LlmSource, model: WrittenModel) -> dict[str, object]:
    """The ``tritongen.json`` beside an LLM model directory."""
    return {
        "schema": "tritongen.model/1",
        "tritongen_version": __version__,
        "format": model.format,
        "target": request.target,
        "role": model.role,
        "source": {"path": str(request.source), "kind": "huggingface", "architecture": source.architecture},
        "engine": model.engine,
        "python_requirements": [],
    }


def _lint(staged: Path, names: list[str], repo: Path) -> list[Finding]:
    """Lint the written directories as one repository; findings name them where they will be."""
    report = lint_paths([staged / name for name in names])
    prefix = str(staged)
    return [dataclasses.replace(f, file=f.file.replace(prefix, str(repo), 1)) for f in report.findings]


def _discard(staged: Path, names: list[str]) -> None:
    """Remove the staged directories of a format that will not be published."""
    for name in names:
        shutil.rmtree(staged / name, ignore_errors=True)


def _after_publish(request: LlmBuildRequest, outcome: LlmOutcome) -> LlmOutcome:
    """The TensorRT-LLM engine: built here where ``trtllm-build`` is, else left to its script, said so."""
    if outcome.format != "tensorrtllm" or outcome.status != "built":
        return outcome
    engine = layout_names(request.name)["engine"]
    script = request.repo / engine / BUILD_SCRIPT
    reason = tensorrtllm_build_reason()
    if reason is not None:
        note = f"engine not built: {reason}; build it in Triton's TensorRT-LLM image with {script}"
        return dataclasses.replace(outcome, notes=(note,))
    done = subprocess.run(
        ["bash", str(script)],
        env={**os.environ, "MODELS": str(request.repo.absolute())},
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return dataclasses.replace(outcome, status="failed", reason=f"the engine build failed: {last}")
    return dataclasses.replace(outcome, notes=(f"engine built into {request.repo / engine / '1'}",))
