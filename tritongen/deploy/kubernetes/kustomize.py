"""The kustomize layout (base, ``gpu`` and ``cpu`` overlays, load test) and its atomic write."""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tritongen.errors import RepositoryError

HEADER = "# Written by `tritongen kubernetes`; regenerate rather than edit.\n"


@dataclass
class ManifestFile:
    """One file of the layout: its objects (or one document) and what it is for."""

    path: str
    purpose: str
    objects: list[dict[str, Any]] = field(default_factory=list)
    header: str = HEADER
    validate: bool = True
    """Whether its objects are complete Kubernetes objects (patches and tool configs are not)."""

    def text(self) -> str:
        """The YAML of the file: its header, then one document per object."""
        body = "---\n".join(yaml.safe_dump(obj, sort_keys=False, allow_unicode=True) for obj in self.objects)
        return self.header + body


def kustomization(resources: list[str], patches: list[str] | None = None) -> dict[str, Any]:
    """A ``kustomization.yaml`` listing ``resources`` and strategic-merge ``patches``."""
    doc: dict[str, Any] = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": resources,
    }
    if patches:
        doc["patches"] = [{"path": p} for p in patches]
    return doc


def kustomization_file(
    directory: str, files: list[ManifestFile], patches: list[str] | None = None
) -> ManifestFile:
    """The ``kustomization.yaml`` of ``directory`` over the given files (or ``../base`` for an overlay)."""
    names = [f.path.removeprefix(f"{directory}/") for f in files if f.path.startswith(f"{directory}/")]
    resources = ["../base"] if patches else names
    return ManifestFile(
        f"{directory}/kustomization.yaml",
        f"kustomization of {directory}",
        [kustomization(resources, patches)],
        validate=False,
    )


def stage(files: list[ManifestFile], output: Path) -> Path:
    """Write every file into a fresh directory beside ``output`` and return it.

    On any failure, Ctrl-C included, the fresh directory is removed again.

    Raises:
        RepositoryError: the parent directory cannot be created or written.
    """
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        staged = Path(tempfile.mkdtemp(prefix=f".{output.name}-", dir=output.parent))
    except OSError as e:
        raise _unwritable(output, e) from e
    try:
        for item in files:
            path = staged / item.path
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(item.text(), encoding="utf-8")
    except BaseException as e:
        shutil.rmtree(staged, ignore_errors=True)
        if isinstance(e, OSError):
            raise _unwritable(output, e) from e
        raise
    return staged


def _unwritable(output: Path, e: OSError) -> RepositoryError:
    return RepositoryError(f"cannot write under {output.parent}: {e.strerror}", "choose a writable -o")


def publish(staged: Path, output: Path) -> None:
    """Replace ``output`` by ``staged`` (renames: the old directory stays until the new one is in place).

    On any failure between the renames, Ctrl-C included, the old directory is put back.

    Raises:
        RepositoryError: a rename fails (the old directory is restored).
    """
    old = output.with_name(f".{output.name}-old")
    moved = False
    try:
        if output.exists():
            shutil.rmtree(old, ignore_errors=True)
            output.rename(old)
            moved = True
        staged.rename(output)
    except BaseException as e:
        if moved and old.exists() and not output.exists():
            old.rename(output)
        if isinstance(e, OSError):
            raise RepositoryError(
                f"cannot write {output}: {e.strerror}", "check the directory's permissions"
            ) from e
        raise
    shutil.rmtree(old, ignore_errors=True)
