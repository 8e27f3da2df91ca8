"""Atomic file writes and result files (JSON, CSV, Markdown, HTML)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from tritongen.errors import RepositoryError

STAGING_PREFIX = ".tritongen-tmp-"
"""Prefix of files and directories being written; never a finished result."""


def atomic_write_text(path: Path, text: str, backup_suffix: str | None = None) -> None:
    """Replace ``path`` with ``text`` atomically, keeping the old file as ``path + backup_suffix``."""
    tmp = path.with_name(f"{STAGING_PREFIX}{path.name}")
    try:
        tmp.write_bytes(text.encode("utf-8"))  # no newline translation
        if backup_suffix is not None and path.exists():
            shutil.copy2(path, path.with_name(path.name + backup_suffix))
        os.replace(tmp, path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise RepositoryError(
            f"cannot write {path}: {e.strerror}", "check the directory's permissions"
        ) from e


def write_output(path: Path, text: str) -> Path:
    """Write a result file (JSON, CSV, Markdown, HTML) atomically, creating its directory.

    Raises:
        RepositoryError: the directory cannot be created or the file written (one line).
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise RepositoryError(
            f"cannot write {path}: cannot create {path.parent}: {e.strerror or e}", "choose a writable path"
        ) from e
    atomic_write_text(path, text)
    return path
