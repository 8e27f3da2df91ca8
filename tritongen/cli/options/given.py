"""The options a command was given: told from their defaults, and refused where they do not apply."""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Sequence

import typer
import typer.models

from tritongen.errors import ConfigError


def changed_flags(group: object, names: tuple[str, ...] | None = None) -> list[str]:
    """The flags of an option group whose value is not its default (among ``names``, when given).

    How a command that takes no Typer context tells the options given: a flag given its own
    default value is taken as not given.
    """
    hints = typing.get_type_hints(type(group), include_extras=True)
    changed = []
    for item in dataclasses.fields(group):  # type: ignore[arg-type]
        if names is not None and item.name not in names:
            continue
        if getattr(group, item.name) != item.default:
            infos = [
                i for i in typing.get_args(hints[item.name])[1:] if isinstance(i, typer.models.OptionInfo)
            ]
            decls = [d for i in infos[:1] for d in (i.default, *(i.param_decls or ())) if isinstance(d, str)]
            flags = [d.split("/")[0] for d in decls if d.startswith("-")]
            changed.append(flags[0] if flags else "--" + item.name.replace("_", "-"))
    return changed


def refuse_given(given: Sequence[str], why: str, hint: str) -> None:
    """Refuse the first of the options ``given`` that do not apply, in one line: ``FLAG why``.

    Raises:
        ConfigError: one was given.
    """
    if given:
        raise ConfigError(f"{given[0]} {why}", hint)
