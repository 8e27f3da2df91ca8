"""CPU and memory requests of the Triton container, from what ``compare`` and ``tune`` measured.

What each figure means decides whether it is used:

- ``compare``'s per-engine ``peak_rss_bytes`` is the resident memory of the server process
  with that engine loaded: a memory request (with headroom) can be based on it;
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
"""A replica's memory request is its peak RSS measured by ``compare`` times this."""
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


def _peak_rss(compare: dict[str, Any], models: list[str]) -> tuple[int, str] | None:
    """The largest server RSS ``compare`` measured for an engine that is in the repository."""
    best: tuple[int, str] | None = None
    for engine in compare.get("engines") or []:
        rss = engine.get("peak_rss_bytes")
        if (
            engine.get("model") in models
            and isinstance(rss, int)
            and rss > 0
            and (best is None or rss > best[0])
        ):
            best = (rss, str(engine["model"]))
    return best


def plan_resources(sources: Sources, models: list[str]) -> ResourcePlan:
    """The requests: memory from ``compare``'s server RSS when it covers a served model, else defaults."""
    cpu_note = f"cpu {DEFAULT_CPU}: default (no result records the server's own CPU use)"
    peak = _peak_rss(sources.compare, models) if sources.compare is not None else None
    if peak is None:
        why = (
            "default"
            if sources.compare is None
            else "default (the compare result has no RSS of a served model)"
        )
        memory = f"{DEFAULT_MEMORY_MI}Mi"
        return ResourcePlan(DEFAULT_CPU, memory, f"memory {memory}: {why}; {cpu_note}")
    rss, model = peak
    mebi = max(MEMORY_FLOOR_MI, math.ceil(rss * MEMORY_HEADROOM / 2**20))
    note = (
        f"memory {mebi}Mi: {sources.compare_path}: peak server RSS {rss / 2**20:.0f}Mi ({model}) "
        f"x {MEMORY_HEADROOM:g} headroom, at least {MEMORY_FLOOR_MI}Mi; {cpu_note}"
    )
    return ResourcePlan(DEFAULT_CPU, f"{mebi}Mi", note)


def repository_size_gi(repo: Path, headroom: float = 2.0) -> int:
    """Size of a new model claim: the repository's bytes on disk times ``headroom``, in whole GiB."""
    total = sum(p.stat().st_size for p in repo.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    return max(1, math.ceil(total * headroom / 2**30))
