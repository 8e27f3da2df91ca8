"""The server's figures per model a request touched: ensemble steps and models called through BLS.

One statistics call without a model name returns every loaded model's counters. Between
two such snapshots, each model whose counters moved was touched by the measured requests
(or by other traffic on the same server). Those models are arranged as a tree under the
model that received the load: an ensemble's steps sit under the ensemble (recursively,
from the configs the server reports), and any other touched model sits under the top
model, as a model it called (a BLS model's calls cannot be known from its config).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from tritongen.errors import TritongenError
from tritongen.metrics.statistics import PHASES, StatsSnapshot, breakdown
from tritongen.triton.ensembles import ConfigLookup, ensemble_steps, ensemble_tree

SERVER_MODEL_KEYS = (
    "queue_us",
    "compute_input_us",
    "compute_infer_us",
    "compute_output_us",
    "executions",
    "inferences",
    "requests",
    "avg_batch",
    "request_us",
    "parent",
)
"""The keys of each entry of ``server_models``: figures per request over the span, and the tree."""

ServerModels = dict[str, dict[str, float | int | str | None]]
"""Model name → its figures over one measured span and ``parent`` (``None`` for the top model)."""
AllStats = dict[str, StatsSnapshot]

_ZERO = StatsSnapshot(
    inferences=0,
    executions=0,
    success=0,
    phase_ns=dict.fromkeys(PHASES, 0),
    phase_count=dict.fromkeys(PHASES, 0),
)


def cached_lookup(fetch: Callable[[str], dict[str, Any]]) -> ConfigLookup:
    """``fetch`` asked once per model; a model whose config cannot be read counts as a plain model."""
    cache: dict[str, dict[str, Any] | None] = {}

    def lookup(name: str) -> dict[str, Any] | None:
        if name not in cache:
            try:
                cache[name] = fetch(name)
            except TritongenError:
                cache[name] = None
        return cache[name]

    return lookup


def all_snapshots(entries: Iterable[dict[str, Any]]) -> AllStats:
    """Counters per model name from every ``model_stats`` entry (versions of one model are added up)."""
    found: AllStats = {}
    for entry in entries:
        name = str(entry.get("name", ""))
        if not name:
            continue
        snapshot = StatsSnapshot.from_json(entry)
        found[name] = _add(found[name], snapshot) if name in found else snapshot
    return found


def _add(a: StatsSnapshot, b: StatsSnapshot) -> StatsSnapshot:
    return replace(
        a,
        inferences=a.inferences + b.inferences,
        executions=a.executions + b.executions,
        success=a.success + b.success,
        phase_ns={p: a.phase_ns[p] + b.phase_ns[p] for p in PHASES},
        phase_count={p: a.phase_count[p] + b.phase_count[p] for p in PHASES},
    )


def moved(before: StatsSnapshot, after: StatsSnapshot) -> bool:
    """Whether any counter of the model went up between the snapshots."""
    return (
        after.success > before.success
        or after.executions > before.executions
        or after.inferences > before.inferences
        or any(after.phase_count[p] > before.phase_count[p] for p in PHASES)
    )


def touched_models(before: AllStats, after: AllStats) -> list[str]:
    """The models whose counters moved between the snapshots, by name (a model loaded since counts from 0)."""
    return sorted(name for name, now in after.items() if moved(before.get(name, _ZERO), now))


def tree_parents(top: str, touched: Iterable[str], config_of: ConfigLookup) -> dict[str, str | None]:
    """Parent of ``top`` (``None``) and of each touched model, in tree order (depth first).

    Steps of ``top``'s ensembles sit under their ensemble, in step order; a touched model
    outside them sits under a touched ensemble that lists it as a step, else under ``top`` (a
    called model), in the order given. A model whose parent was not touched moves up to the
    nearest touched ancestor.
    """
    static = ensemble_tree(top, config_of)
    given = [name for name in touched if name != top]
    rest = [name for name in given if name not in static]
    touched = [name for name in static if name in given] + rest
    called_by: dict[str, str] = {}
    for name in rest:
        for step in ensemble_steps(config_of(name)):
            if step in rest and step != name:
                called_by.setdefault(step, name)
    parents: dict[str, str | None] = {top: None}
    kept = {top, *touched}
    for name in touched:
        parent = static[name] if name in static else called_by.get(name, top)
        seen = {name}
        while parent is not None and parent not in kept and parent not in seen:
            seen.add(parent)
            parent = static.get(parent) if parent in static else called_by.get(parent, top)
        parents[name] = parent if parent is not None and parent != name else top
    return _depth_first(top, parents)


def _depth_first(top: str, parents: dict[str, str | None]) -> dict[str, str | None]:
    """``parents`` ordered as the tree is read: each model followed by its children, in the order given."""
    children: dict[str, list[str]] = {}
    for name, parent in parents.items():
        if parent is not None:
            children.setdefault(parent, []).append(name)
    ordered: dict[str, str | None] = {}
    stack = [top]
    while stack:
        name = stack.pop()
        if name in ordered:
            continue
        ordered[name] = parents.get(name)
        stack.extend(reversed(children.get(name, [])))
    for name, parent in parents.items():  # anything cut off by a loop: under the top model
        if name not in ordered:
            ordered[name] = top if parent is not None else None
    return ordered


def model_figures(before: StatsSnapshot, after: StatsSnapshot) -> dict[str, float | int | str | None]:
    """One model's ``server_models`` entry without ``parent``: µs per request by phase, counts, batch."""
    found = breakdown(before, after)
    return {
        "queue_us": found.queue_us,
        "compute_input_us": found.compute_input_us,
        "compute_infer_us": found.compute_infer_us,
        "compute_output_us": found.compute_output_us,
        "executions": after.executions - before.executions,
        "inferences": after.inferences - before.inferences,
        "requests": found.requests,
        "avg_batch": found.avg_batch,
        "request_us": found.request_us,
    }


def server_models(before: AllStats, after: AllStats, top: str, config_of: ConfigLookup) -> ServerModels:
    """Every touched model's figures between two snapshots, in tree order under ``top`` (see module doc).

    ``top`` is always there when the server has statistics for it, moved or not; a model
    unloaded before the second snapshot is left out.
    """
    touched = touched_models(before, after)
    if top not in after:
        return {}
    parents = tree_parents(top, touched, config_of)
    models: ServerModels = {}
    for name, parent in parents.items():
        if name not in after:
            continue
        models[name] = {**model_figures(before.get(name, _ZERO), after[name]), "parent": parent}
    return models


def children_of(models: ServerModels) -> dict[str | None, list[str]]:
    """Each model's children in ``models`` (``None`` → the roots), in the order ``models`` lists them."""
    children: dict[str | None, list[str]] = {}
    for name, entry in models.items():
        parent = entry.get("parent")
        key = parent if isinstance(parent, str) and parent in models and parent != name else None
        children.setdefault(key, []).append(name)
    return children
