"""The load kinds by name: the load generator's list (``tritonload/kinds.py``), each kind's module here.

One line there registers a kind: its name finds ``tritongen/loadtest/kinds/<name>.py`` (dashes
as underscores), whose ``KIND`` is the kind. ``--load-kind auto`` asks the kinds in that
order whether a load is theirs (:func:`resolve_kind`); a kind asked by name goes with its own
options only.
"""

from __future__ import annotations

import functools
import importlib
from typing import TYPE_CHECKING

from tritongen.errors import ConfigError
from tritongen.io.loadgen_shared import AUTO_KIND, KINDS
from tritongen.loadtest.kinds.base import LoadKind, ModelConfig

if TYPE_CHECKING:
    from tritongen.loadtest.result import RunResult
    from tritongen.loadtest.spec import LoadSpec


@functools.cache
def load_kinds() -> dict[str, LoadKind]:
    """Every kind by name, in the order ``auto`` asks them."""
    kinds = {}
    for name in KINDS:
        module = importlib.import_module(f"tritongen.loadtest.kinds.{name.replace('-', '_')}")
        kind = module.KIND
        if not isinstance(kind, LoadKind) or kind.name != name:
            raise TypeError(f"tritongen/loadtest/kinds/{module.__name__}: KIND is not the kind '{name}'")
        kinds[name] = kind
    return kinds


def kind_names() -> tuple[str, ...]:
    """``auto`` and every kind's name: what ``--load-kind`` takes."""
    return (AUTO_KIND, *KINDS)


def resolve_kind(spec: LoadSpec, config: ModelConfig) -> LoadKind:
    """The kind of ``spec``'s load: the one asked by name, else the first whose claim it is.

    Raises:
        ConfigError: a kind asked by name with options of another kind, or without its own.
    """
    kinds = load_kinds()
    if spec.kind == AUTO_KIND:
        return next(kind for kind in kinds.values() if kind.claims(spec, config))
    named = kinds[spec.kind]
    others = [option for kind in kinds.values() if kind is not named and (option := kind.given(spec))]
    if others:
        raise ConfigError(
            f"--load-kind {spec.kind} does not go with {', '.join(others)}",
            f"drop {', '.join(others)}, or use --load-kind {AUTO_KIND}",
        )
    if named.option is not None and named.given(spec) is None:
        raise ConfigError(
            f"--load-kind {spec.kind} takes its load from {named.option}", f"add {named.option}"
        )
    return named


def run_notes(run: RunResult) -> list[str]:
    """What the kinds say of a run, below the result tables (a line two kinds give shows once)."""
    lines = [line for kind in load_kinds().values() for line in kind.notes(run)]
    return list(dict.fromkeys(lines))
