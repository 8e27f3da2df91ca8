"""CPU and memory requests of the Triton container, from what ``compare`` and ``tune`` measured.

What each figure means decides whether it is used:

- ``compare``'s per-engine ``peak_rss_bytes`` is the peak resident memory of that model's
  Python-backend stub processes (not of ``tritonserver`` itself). Every replica loads every
  model, so the memory request adds up the peaks of every served model ``compare`` measured
  (with headroom) and a documented baseline for ``tritonserver`` and its in-process backends;
- ``tune``'s and ``loadtest``'s ``cpu.util_mean`` / ``mem_max_bytes`` come from Triton's
  ``nv_cpu_*`` metrics, which describe the whole machine, not the server: they are not used;
- no result records the server's own CPU use, so the CPU request is the documented default.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tritongen.errors import ConfigError

DEFAULT_CPU = "1"
DEFAULT_MEMORY_MI = 2048
MEMORY_HEADROOM = 1.5
"""The models' stub processes' peak RSS measured by ``compare`` is counted times this."""
SERVER_BASELINE_MI = 1024
"""What ``tritonserver`` itself (core, backends loaded in-process, CUDA context) is given on top."""
MEMORY_FLOOR_MI = 512
TUNE_SCHEMA = "tritongen.tune/"
COMPARE_SCHEMA = "tritongen.compare/"


@dataclass(frozen=True)
class Sources:
    """The ``--from`` documents, by kind."""

    tune: dict[str, Any] | None = None
    tune_path: Path | None = None
    compare: dict[str, Any] | None = None
    compare_path: Path | None = None


@dataclass(frozen=True)
class ResourcePlan:
    """Requests of the Triton container and where each came from."""

    cpu: str
    memory: str
    provenance: str


def read_sources(paths: tuple[Path, ...]) -> Sources:
    """Read ``--from`` files: at most one tune result and one compare result.

    Raises:
        ConfigError: a file is missing, not JSON, of another schema, or given twice.
    """
    found: dict[str, tuple[dict[str, Any], Path]] = {}
    for path in paths:
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except OSError as e:
            raise ConfigError(f"--from {path}: {e.strerror}", "pass a tune or compare JSON") from e
        except json.JSONDecodeError as e:
            raise ConfigError(f"--from {path} is not JSON ({e.msg})", "pass a tune or compare JSON") from e
        schema = str(doc.get("schema", "")) if isinstance(doc, dict) else ""
        kind = (
            "tune"
            if schema.startswith(TUNE_SCHEMA)
            else "compare"
            if schema.startswith(COMPARE_SCHEMA)
            else ""
        )
        if not kind:
            raise ConfigError(
                f"--from {path} is neither a tune nor a compare result (schema {schema or 'missing'})",
                "pass the --json of `tritongen tune` or `tritongen compare`",
            )
        if kind in found:
            raise ConfigError(f"--from: two {kind} results ({found[kind][1]}, {path})", "pass one of each")
        found[kind] = (doc, path)
    tune, compare = found.get("tune"), found.get("compare")
    return Sources(
        tune=tune[0] if tune else None,
        tune_path=tune[1] if tune else None,
        compare=compare[0] if compare else None,
        compare_path=compare[1] if compare else None,
    )


def _model_peaks(compare: dict[str, Any], models: list[str]) -> dict[str, int]:
    """Each served model's largest stub-process peak RSS in ``compare`` (models it measured only)."""
    peaks: dict[str, int] = {}
    for engine in compare.get("engines") or []:
        model, rss = engine.get("model"), engine.get("peak_rss_bytes")
        if model in models and isinstance(rss, int) and rss > 0:
            peaks[str(model)] = max(rss, peaks.get(str(model), 0))
    return peaks


def plan_resources(sources: Sources, models: list[str]) -> ResourcePlan:
    """The requests: memory from ``compare``'s stub RSS of the served models plus a server baseline.

    Without a compare result that measured a served model, the documented default.
    """
    cpu_note = f"cpu {DEFAULT_CPU}: default (no result records the server's own CPU use)"
    peaks = _model_peaks(sources.compare, models) if sources.compare is not None else {}
    if not peaks:
        why = (
            "default"
            if sources.compare is None
            else "default (the compare result has no stub RSS of a served model)"
        )
        memory = f"{DEFAULT_MEMORY_MI}Mi"
        return ResourcePlan(DEFAULT_CPU, memory, f"memory {memory}: {why}; {cpu_note}")
    total = sum(peaks.values())
    mebi = max(MEMORY_FLOOR_MI, math.ceil(total * MEMORY_HEADROOM / 2**20) + SERVER_BASELINE_MI)
    measured = ", ".join(f"{model} {rss / 2**20:.0f}Mi" for model, rss in sorted(peaks.items()))
    unmeasured = [m for m in models if m not in peaks]
    note = (
        f"memory {mebi}Mi: {sources.compare_path}: the models' stub processes' peak RSS ({measured}) "
        f"x {MEMORY_HEADROOM:g} headroom + {SERVER_BASELINE_MI}Mi baseline for tritonserver"
        + (f" (no figure for {', '.join(unmeasured)})" if unmeasured else "")
        + f", at least {MEMORY_FLOOR_MI}Mi; {cpu_note}"
    )
    return ResourcePlan(DEFAULT_CPU, f"{mebi}Mi", note)


def repository_size_gi(repo: Path, headroom: float = 2.0) -> int:
    """Size of a new model claim: the repository's bytes on disk times ``headroom``, in whole GiB."""
    total = sum(p.stat().st_size for p in repo.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    return max(1, math.ceil(total * headroom / 2**30))
