"""Re-render an existing model directory's config with new settings, atomically."""

from __future__ import annotations

from pathlib import Path

from tritongen.errors import ConfigError, RepositoryError
from tritongen.io.files import atomic_write_text
from tritongen.lint.repository import lint_model_text
from tritongen.triton.batching import BatchingOptions, apply_batching
from tritongen.triton.model_config import ModelConfig
from tritongen.triton.proto import read_config
from tritongen.triton.render import render_config
from tritongen.triton.repository import read_metadata

BACKUP_SUFFIX = ".bak"


def model_target(model_dir: Path) -> str | None:
    """The target a model was built for, from tritongen's metadata file (None if unknown)."""
    data = read_metadata(model_dir)
    target = data.get("target") if data is not None else None
    return target if isinstance(target, str) else None


def rerender_model(
    model_dir: Path,
    options: BatchingOptions,
    templates_dir: Path | None = None,
    base: ModelConfig | None = None,
) -> ModelConfig:
    """Apply ``options`` to ``model_dir/config.pbtxt`` (or to ``base``, when given) and write it back.

    The new text is rendered and checked before anything is written; the previous
    file, if any, is kept as ``config.pbtxt.bak``. ``base`` stands for the model's config
    where the file is missing or partial and the server completed it.

    Raises:
        TritongenError: the directory or config is unusable, or the options are illegal.
    """
    if not model_dir.is_dir():
        raise RepositoryError(
            f"{model_dir} is not a directory", "pass a model directory, e.g. model_repository/mlp_onnx"
        )
    path = model_dir / "config.pbtxt"
    config = apply_batching(base if base is not None else read_config(path), options, model_target(model_dir))
    text = render_config(config, templates_dir)
    findings = lint_model_text(text, model_dir, str(path), check_files=False)
    errors = [f for f in findings if f.severity == "error"]
    if errors:
        raise ConfigError(f"the new config breaks Triton's rules: {errors[0].text()}", "nothing was written")
    atomic_write_text(path, text, backup_suffix=BACKUP_SUFFIX)
    return config
