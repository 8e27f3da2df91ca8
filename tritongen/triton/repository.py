"""Model repository layout and atomic writes: build aside, then rename into place."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from tritongen.errors import RepositoryError
from tritongen.io.files import STAGING_PREFIX

METADATA_FILE = "tritongen.json"


def read_metadata(model_dir: Path) -> dict[str, Any] | None:
    """What tritongen wrote beside a model (its :data:`METADATA_FILE`); None if absent or unreadable."""
    try:
        data = json.loads((model_dir / METADATA_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def is_local_vllm(model_dir: Path) -> bool:
    """Whether ``model_dir`` holds tritongen's local vLLM model (served by vLLM inside Triton)."""
    metadata = read_metadata(model_dir) or {}
    return metadata.get("format") == "vllm" and metadata.get("target") == "local"


def model_count(repo: Path, models: Sequence[str] | None) -> int:
    """How many models the server loads: those named, or every model directory of ``repo``."""
    if models is not None:
        return len(models)
    try:
        return sum(1 for entry in repo.iterdir() if entry.is_dir() and not entry.name.startswith("."))
    except OSError:
        return 0


def ensure_writable_repo(repo: Path) -> None:
    """Create ``repo`` if needed and check that models can be written into it.

    Raises:
        RepositoryError: the path is a file, or it (or its parent) is not writable.
    """
    if repo.exists() and not repo.is_dir():
        raise RepositoryError(f"{repo} is a file, not a model repository", "pass a directory to --repo")
    try:
        repo.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise RepositoryError(
            f"cannot create repository {repo}: {e.strerror}", "choose a writable --repo"
        ) from e
    if not os.access(repo, os.W_OK | os.X_OK):
        raise RepositoryError(
            f"repository {repo} is not writable", "fix its permissions or choose another --repo"
        )


def check_free(repo: Path, names: list[str], force: bool) -> None:
    """Refuse to replace existing model directories unless ``force``.

    Raises:
        RepositoryError: a model directory exists and ``force`` is false.
    """
    existing = [name for name in names if (repo / name).exists()]
    if existing and not force:
        raise RepositoryError(
            f"{repo / existing[0]} already exists", "pass --force to replace it, or choose another --name"
        )


@contextlib.contextmanager
def staging_dir(repo: Path) -> Iterator[Path]:
    """Yield a fresh directory inside ``repo`` (same filesystem, so renames are atomic).

    It is removed afterwards, whatever happens; models not published from it vanish.
    """
    try:
        path = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=repo))
    except OSError as e:
        raise RepositoryError(f"cannot write into {repo}: {e.strerror}", "choose a writable --repo") from e
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def publish(staged: Path, repo: Path, names: list[str], force: bool) -> list[Path]:
    """Move the model directories ``names`` from ``staged`` into ``repo``.

    Every rename is atomic. An existing directory (with ``force``) is first renamed
    aside and deleted only once its replacement is in place; if a move fails, the
    models already replaced are restored.

    Raises:
        RepositoryError: a target exists without ``force``, or a rename fails.
    """
    check_free(repo, names, force)
    moved: list[tuple[Path, Path | None]] = []
    try:
        for name in names:
            target = repo / name
            backup: Path | None = None
            if target.exists():
                backup = staged / f"{name}.old"
                os.rename(target, backup)
            try:
                os.rename(staged / name, target)
            except OSError:
                if backup is not None:
                    os.rename(backup, target)
                raise
            moved.append((target, backup))
    except OSError as e:
        for target, backup in reversed(moved):
            shutil.rmtree(target, ignore_errors=True)
            if backup is not None:
                os.rename(backup, target)
        raise RepositoryError(
            f"cannot move models into {repo}: {e.strerror}", "check the repository's permissions"
        ) from e
    return [target for target, _ in moved]
