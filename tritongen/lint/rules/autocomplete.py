"""The lint rule on configs Triton completes: directories without config.pbtxt, configs without tensors.

What Triton fills in, and from where, is in :mod:`tritongen.triton.autofill`; this rule says
so in a note, and fails a directory Triton refuses.
"""

from __future__ import annotations

from pathlib import Path

from tritongen.lint.rules.context import ModelContext
from tritongen.triton.autofill import (
    AUTO_COMPLETE_METHOD,
    FILLED_FROM,
    KNOWN_FILES,
    PYTHON_CLASS,
    AutoFill,
    autofill,
    numeric_versions,
    python_auto_complete,
    undeclared_tensors,
    version_dirs,
)


def _served_version(ctx: ModelContext) -> Path | None:
    """The directory of the newest numeric version (the one Triton serves by default)."""
    versions, _ = numeric_versions(ctx.directory)
    if ctx.directory is None or not versions:
        return None
    return ctx.directory / str(max(versions))


def check_auto_complete(ctx: ModelContext) -> None:
    """Say what Triton fills in (a note), and whether it can: no backend, or no inputs and outputs."""
    if ctx.directory is None or not ctx.check_files or ctx.is_ensemble:
        return
    name = ctx.directory.name
    if ctx.auto_completed and not ctx.backend:
        dirs = version_dirs(ctx.directory)
        missing = (
            f"{dirs[0].name}/ (the first subdirectory) holds none of {', '.join(KNOWN_FILES)}"
            if dirs
            else "no subdirectory holding a model file"
        )
        ctx.error(
            "autocomplete.no-backend",
            "",
            f"no config.pbtxt, and {missing}: Triton cannot tell the backend and refuses the directory",
            f'write {name}/config.pbtxt naming the backend (e.g. backend: "python"), '
            f"or put the model file at {name}/1/, or move the directory out of the repository",
        )
        return
    missing = undeclared_tensors(ctx.config)
    if not missing:
        return  # both declared: Triton has nothing to fill in
    lead = "no config.pbtxt" if ctx.auto_completed else f"the config declares no {missing}"
    fill = autofill(ctx.directory) if ctx.auto_completed else AutoFill(backend=ctx.backend)
    filled = (
        f"no config.pbtxt: Triton fills it in: backend '{ctx.backend}' from {fill.source}; "
        if ctx.auto_completed
        else f"{lead}: Triton fills them in: "
    )
    if ctx.backend == "python":
        _check_python(ctx, lead, filled)
        return
    source = FILLED_FROM.get(ctx.platform) or FILLED_FROM.get(ctx.backend)
    if source is not None:
        ctx.note(
            "autocomplete.filled",
            "",
            f"{filled}inputs, outputs and max_batch_size from {source}",
            "nothing to do; the full Triton image has this backend, the embedded server only the Python one "
            "(serve it with docker compose)",
        )
        return
    if fill.source == "the directory name":
        ctx.warning(
            "autocomplete.backend-from-name",
            "",
            f"no config.pbtxt: Triton takes the backend '{ctx.backend}' from the directory name "
            f"(after its first '.') and looks for {fill.default_model_filename}",
            f"write {name}/config.pbtxt naming the backend, or rename the directory",
        )
        return
    ctx.warning(
        "autocomplete.no-io",
        "",
        f"{lead}, and Triton's '{ctx.backend}' backend does not fill them in: the model has none",
        f"declare the inputs and outputs in {name}/config.pbtxt",
    )


def _check_python(ctx: ModelContext, lead: str, filled: str) -> None:
    """A Python model without declared tensors: its ``auto_complete_config`` must supply them."""
    version = _served_version(ctx)
    if version is None or ctx.directory is None:
        return  # the version rules report it
    filename = str(ctx.config.default_model_filename) or "model.py"
    path = version / filename
    shown = f"{version.name}/{filename}"
    if not path.is_file():
        return  # the model-file rule reports it
    found = python_auto_complete(path)
    if isinstance(found, SyntaxError):
        ctx.error(
            "autocomplete.python-syntax",
            "",
            f"{shown} does not parse ({found.msg or found}, line {found.lineno}): "
            "the Python backend refuses it",
            f"fix {ctx.directory.name}/{shown}",
        )
    elif found:
        ctx.note(
            "autocomplete.filled",
            "",
            f"{filled}inputs, outputs and max_batch_size from {PYTHON_CLASS}.{AUTO_COMPLETE_METHOD} "
            f"in {shown}",
            "nothing to do; write config.pbtxt (or let `tritongen tune --apply` write it) "
            "to pin the settings",
        )
    else:
        ctx.warning(
            "autocomplete.python-no-io",
            "",
            f"{lead}, and {shown} defines no {PYTHON_CLASS}.{AUTO_COMPLETE_METHOD}: "
            "Triton serves the model with no inputs or outputs",
            f"declare them in {ctx.directory.name}/config.pbtxt, or add {AUTO_COMPLETE_METHOD} to "
            f"{PYTHON_CLASS}",
        )
