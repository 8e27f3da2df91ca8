"""Where a benchmark figure came from: commit, date, machine, package versions, command line.

Every ``bench/results/*.json`` carries this under ``provenance`` so a figure in README can
be traced to the run that measured it (``make bench-tables`` writes README's tables from
those files).
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import subprocess
import sys
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


def provenance(argv: list[str] | None = None) -> dict[str, Any]:
    """The facts of this run: commit (and whether the tree had changes), date, CPU, versions, command."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {
        "commit": _git("rev-parse", "HEAD"),
        "dirty": bool(_git("status", "--porcelain", "--untracked-files=no")),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "cpu": _cpu_model(),
        "cores": cores,
        "machine": platform.machine(),
        "python": platform.python_version(),
        "packages": {p: v for p in PACKAGES if (v := _version(p)) is not None},
        "command": " ".join(["python", *(argv if argv is not None else sys.argv)]),
    }


def write_result(path: Path, data: dict[str, Any], argv: list[str] | None = None) -> Path:
    """Write ``data`` with its provenance to ``path`` (JSON, written whole or not at all)."""
    document = {**data, "provenance": provenance(argv)}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path
