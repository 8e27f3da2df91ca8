"""Ensembles in a config: the models its steps name, and the tree of steps under a top model.

Configs are read as JSON with Triton's field names, as a server reports them or as
:meth:`~tritongen.triton.proto.ConfigFile.as_dict` gives a file.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tritongen.triton.proto import read_config_file

ConfigLookup = Callable[[str], dict[str, Any] | None]
"""A model's config as JSON (a server's report or a file), or ``None`` when it cannot be read."""


def ensemble_steps(config: dict[str, Any] | None) -> list[str]:
    """The model names of an ensemble's steps, in order, once each (none for any other model)."""
    if not config or config.get("platform") != "ensemble":
        return []
    steps = (config.get("ensemble_scheduling") or {}).get("step") or []
    names: list[str] = []
    for step in steps:
        name = str(step.get("model_name", "")) if isinstance(step, dict) else ""
        if name and name not in names:
            names.append(name)
    return names


def ensemble_tree(top: str, config_of: ConfigLookup) -> dict[str, str | None]:
    """Parent of every model under ``top`` through ensemble steps (recursively), ``top`` → ``None``.

    A model that is a step of two ensembles sits under the first one met (breadth first);
    a loop of ensembles (which Triton refuses to load) ends where it comes back.
    """
    parents: dict[str, str | None] = {top: None}
    queue = [top]
    while queue:
        name = queue.pop(0)
        for step in ensemble_steps(config_of(name)):
            if step not in parents:
                parents[step] = name
                queue.append(step)
    return parents


def composing_models(repo: Path, model: str) -> list[str]:
    """The models under ``model``'s ensemble steps in ``repo``, nested ensembles' steps included."""
    tree = ensemble_tree(model, lambda name: read_config_file(repo / name).as_dict())
    return [name for name in tree if name != model]
