"""Model-level rules: the name, the platform and backend with their model files, the version policy."""

from __future__ import annotations

import re

from tritongen.lint.rules.context import ModelContext
from tritongen.lint.rules.layout import CHECKED_BACKENDS, DEFAULT_FILES, PLATFORM_BACKENDS
from tritongen.triton.autofill import numeric_versions

NAME_CHARACTERS = re.compile(r"^[A-Za-z0-9_.\-]+$")


def check_name(ctx: ModelContext) -> None:
    """The config's name must equal its directory's (an empty name is filled in from it)."""
    name = str(ctx.config.name)
    shown = name or (ctx.directory.name if ctx.directory else "")
    if shown and not NAME_CHARACTERS.match(shown):
        ctx.warning(
            "name.characters",
            "name",
            f"model name '{shown}' has characters that need escaping in URLs and shells",
            "use letters, digits, '_', '-' and '.' only",
        )
    if ctx.directory is not None and name and name != ctx.directory.name:
        ctx.error(
            "name.matches-directory",
            "name",
            f"name '{name}' differs from the directory name '{ctx.directory.name}'",
            f'set name: "{ctx.directory.name}", or rename the directory to {name}',
        )


def check_backend(ctx: ModelContext) -> None:
    """Platform and backend known, consistent, and the model file present."""
    config, platform = ctx.config, ctx.platform
    if ctx.is_ensemble:
        if config.backend:
            ctx.error(
                "backend.ensemble",
                "backend",
                "an ensemble must not name a backend",
                'remove backend: platform "ensemble" is all an ensemble needs',
            )
        return
    backend = ctx.backend
    if not backend:
        if ctx.auto_completed:
            return  # no config at all: check_auto_complete says why Triton refuses the directory
        if platform:
            ctx.error(
                "backend.unknown-platform",
                "platform",
                f"platform '{platform}' is not one Triton knows, and no backend is given",
                'set backend (e.g. "python") or a known platform',
            )
        else:
            ctx.error(
                "backend.missing",
                "backend",
                "no backend or platform, and no model file Triton recognises in the first version directory",
                'set backend, e.g. backend: "python"',
            )
        return
    if backend in CHECKED_BACKENDS and platform and PLATFORM_BACKENDS.get(platform) != backend:
        ctx.error(
            "backend.platform-pair",
            "platform",
            f"platform '{platform}' does not go with backend '{backend}'",
            "drop the platform, or use the backend's platform (e.g. onnxruntime_onnx)",
        )
    if platform and platform not in PLATFORM_BACKENDS and not config.backend:
        ctx.error(
            "backend.unknown-platform",
            "platform",
            f"platform '{platform}' is not one Triton knows",
            'set backend instead, e.g. backend: "python"',
        )
    if ctx.directory is None or not ctx.check_files:
        return
    filename = str(config.default_model_filename) or DEFAULT_FILES.get(platform) or DEFAULT_FILES.get(backend)
    if not filename or (backend not in DEFAULT_FILES and platform not in DEFAULT_FILES):
        return
    versions, _ = numeric_versions(ctx.directory)
    for version in versions:
        if not (ctx.directory / str(version) / filename).exists():
            ctx.error(
                "files.model-file",
                "default_model_filename",
                f"version {version} has no {filename}",
                f"put the model file at {ctx.directory.name}/{version}/{filename}",
            )


def check_versions(ctx: ModelContext) -> None:
    """At least one version directory that the version policy selects."""
    if ctx.directory is None or not ctx.check_files or (ctx.auto_completed and not ctx.backend):
        return
    versions, ignored = numeric_versions(ctx.directory)
    for name in ignored:
        ctx.warning(
            "versions.ignored-dir",
            "",
            f"directory '{name}' is not a version number: Triton ignores it",
            "name version directories 1, 2, … (no leading zeros)",
        )
    policy = ctx.config.version_policy
    chosen = policy.WhichOneof("policy_choice") if ctx.config.HasField("version_policy") else "latest"
    selected: list[int]
    if chosen == "latest":
        count = policy.latest.num_versions if ctx.config.HasField("version_policy") else 1
        if ctx.config.HasField("version_policy") and count == 0:
            ctx.error(
                "versions.latest-zero",
                "version_policy.latest.num_versions",
                "latest policy with num_versions 0 selects no version",
                "set num_versions: 1 or more",
            )
            return
        selected = sorted(versions)[-count:] if count else []
    elif chosen == "specific":
        wanted = list(policy.specific.versions)
        if not wanted:
            ctx.error(
                "versions.specific-empty",
                "version_policy.specific.versions",
                "specific policy lists no version",
                "list the versions to serve, e.g. versions: [1]",
            )
            return
        for version in wanted:
            if version not in versions:
                ctx.warning(
                    "versions.specific-missing",
                    "version_policy.specific.versions",
                    f"version {version} is listed but has no directory",
                    f"create {ctx.directory.name}/{version}/ or drop it from the list",
                )
        selected = [v for v in wanted if v in versions]
    else:
        selected = versions
    if not selected:
        ctx.error(
            "versions.none",
            "version_policy",
            "no version directory is available under the version policy",
            f"add a version directory, e.g. {ctx.directory.name}/1/ holding the model file",
        )
