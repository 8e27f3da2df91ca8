"""Where a benchmark figure came from: commit, date, machine, package versions, command line.

Every ``bench/results/*.json`` carries this under ``provenance`` so a figure in README can
be traced to the run that measured it (``make bench-tables`` writes README's tables from
those files). A committed result names a commit that holds the code it measured: a script
refuses to measure one on a tree with uncommitted changes (:func:`require_committed_tree`, at
its start), and refuses to write one if the tree changed while it measured (the figures then go
to a file beside the temporary folder, named in the one-line refusal). Results written
elsewhere (``--json /tmp/x.json``) may come from any tree; their provenance says which.
Changes under ``bench/results/`` are not changes of the code measured: benchmarks run one after
another on one commit, each writing its result, and each names that commit.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"

PACKAGES = (
    "tritongen",
    "nvidia-pytriton",  # the embedded tritonserver (2.51 in 0.7.0)
    "tritonclient",
    "onnxruntime-gpu",
    "onnxruntime",
    "apache-tvm",
    "torch",
    "locust",
    "numpy",
)


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(
            ["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return out or None


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


_STARTED_AT: dict[str, str] = {}
"""The commit a committed result's measurement started from, by result path."""


def _is_committed_result(path: Path) -> bool:
    """Whether ``path`` is one of the committed results (under ``bench/results``)."""
    return path.resolve().parent == RESULTS.resolve()


CODE_CHANGES = ("status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)bench/results")
"""``git status`` of what a measurement depends on: every tracked file but the results themselves, so
that benchmarks run one after another on one commit (each writing its result) each name that commit."""


def _dirty() -> bool:
    """Whether tracked files other than ``bench/results/`` have uncommitted changes."""
    return bool(_git(*CODE_CHANGES))


def _tree_state() -> tuple[str | None, bool]:
    """The checkout's commit and whether its code has uncommitted changes (results aside)."""
    return _git("rev-parse", "HEAD"), _dirty()


def require_committed_tree(target: Path) -> None:
    """Refuse to measure a committed result (under ``bench/results``) on a tree with uncommitted changes.

    Raises:
        SystemExit: one line saying why and what to do, exit status 1.
    """
    if not _is_committed_result(target):
        return
    commit, dirty = _tree_state()
    if commit is None or dirty:
        why = "this is not a git checkout" if commit is None else "the tree has uncommitted changes"
        raise SystemExit(
            f"bench: not measuring {target.name}: {why}, and a committed result must name the commit "
            "that holds the code it measured; commit first (or write elsewhere with --json PATH)"
        )
    _STARTED_AT[str(target.resolve())] = commit


def provenance(argv: list[str] | None = None) -> dict[str, Any]:
    """The facts of this run: commit (and whether the tree had changes), date, CPU, versions, command."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {
        "commit": _git("rev-parse", "HEAD"),
        "dirty": _dirty(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "cpu": _cpu_model(),
        "cores": cores,
        "machine": platform.machine(),
        "python": platform.python_version(),
        "packages": {p: v for p in PACKAGES if (v := _version(p)) is not None},
        "command": " ".join(["python", *(argv if argv is not None else sys.argv)]),
    }


def write_result(path: Path, data: dict[str, Any], argv: list[str] | None = None) -> Path:
    """Write ``data`` with its provenance to ``path`` (JSON, written whole or not at all).

    Raises:
        SystemExit: a committed result whose tree changed while it was measured (its commit
            moved, or files changed): the figures are written to a temporary file that the
            one-line message names, not to ``path``.
    """
    document = {**data, "provenance": provenance(argv)}
    if _is_committed_result(path):
        started = _STARTED_AT.get(str(path.resolve()))
        facts = document["provenance"]
        if started is None or facts["dirty"] or facts["commit"] != started:
            kept = Path(tempfile.mkdtemp(prefix="tritongen-bench-")) / path.name
            kept.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
            raise SystemExit(
                f"bench: not writing {path.name}: the tree is not the committed one the measurement "
                f"started from (see require_committed_tree); the figures are in {kept}"
            )
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path
