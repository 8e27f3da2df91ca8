"""Option groups: a dataclass of Typer options, declared once and taken by several commands.

A command names a group as one typed parameter::

    @option_groups(load=Pick(defaults={"duration": "10s"}))
    def compare_command(source: Source, load: LoadFlags, output: OutputFlags) -> None: ...

Typer sees each of the group's fields as an option of the command; the command receives
one instance of the group. :class:`Pick` lets a command take only some of a group's
options, or give them its own defaults and help, without declaring them again.
:func:`reworded` does the same for one option alias taken outside a group::

    url: Annotated[str | None, reworded(Url, "The deployment to measure.")] = None
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import inspect
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import typer.models

F = TypeVar("F", bound=Callable[..., Any])

_SEPARATOR = "__"


@dataclass(frozen=True)
class Pick:
    """How one command takes a group: which of its options, with which defaults and help."""

    only: tuple[str, ...] | None = None
    """The options offered (the others keep their defaults); None: all of them."""
    defaults: Mapping[str, Any] = field(default_factory=dict)
    helps: Mapping[str, str] = field(default_factory=dict)


def option_groups(**picks: Pick) -> Callable[[F], F]:
    """Expand every parameter of the decorated command whose type is an option-group dataclass.

    Args:
        **picks: per group parameter name, how the command takes that group.
    """

    def decorate(func: F) -> F:
        return typing.cast(F, _expand(func, picks))

    return decorate


def _is_group(hint: Any) -> bool:
    return inspect.isclass(hint) and dataclasses.is_dataclass(hint)


def reworded(alias: Any, help: str, show_default: bool | None = None) -> typer.models.ParameterInfo:
    """The option an ``Annotated`` alias declares, with one command's own help (and ``show_default``).

    The flag, its parsing and its limits stay declared once, in the alias; only the words change.
    """
    infos = [info for info in typing.get_args(alias)[1:] if isinstance(info, typer.models.ParameterInfo)]
    if len(infos) != 1:
        raise TypeError(f"{alias!r} is not an Annotated alias of one Typer option")
    info = copy.copy(infos[0])
    info.help = help
    if show_default is not None:
        info.show_default = show_default
    return info


def _field_parameter(group: str, hint: Any, default: Any, pick: Pick, name: str) -> inspect.Parameter:
    """One option of a group as a keyword parameter Typer reads: ``group__field``."""
    if name in pick.helps:
        base = typing.get_args(hint)[0]
        hint = typing.Annotated[base, reworded(hint, pick.helps[name])]
    return inspect.Parameter(
        f"{group}{_SEPARATOR}{name}",
        inspect.Parameter.KEYWORD_ONLY,
        annotation=hint,
        default=pick.defaults.get(name, default),
    )


def _expand(func: Callable[..., Any], picks: Mapping[str, Pick]) -> Callable[..., Any]:
    hints = typing.get_type_hints(func, include_extras=True)
    parameters: list[inspect.Parameter] = []
    groups: dict[str, tuple[type[Any], dict[str, Any]]] = {}
    for param in inspect.signature(func).parameters.values():
        hint = hints[param.name]
        if not _is_group(hint):
            parameters.append(param.replace(annotation=hint, kind=inspect.Parameter.KEYWORD_ONLY))
            continue
        pick = picks.get(param.name, Pick())
        field_hints = typing.get_type_hints(hint, include_extras=True)
        fixed: dict[str, Any] = {}
        for item in dataclasses.fields(hint):
            if pick.only is not None and item.name not in pick.only:
                fixed[item.name] = pick.defaults.get(item.name, item.default)
                continue
            parameters.append(
                _field_parameter(param.name, field_hints[item.name], item.default, pick, item.name)
            )
        groups[param.name] = (hint, fixed)
    unknown = set(picks) - set(groups)
    if unknown:
        raise TypeError(f"{func.__name__} has no option group {sorted(unknown)}")

    @functools.wraps(func)
    def command(**values: Any) -> Any:
        for name, (group, fixed) in groups.items():
            taken = {
                key.split(_SEPARATOR, 1)[1]: values.pop(key)
                for key in list(values)
                if key.startswith(name + _SEPARATOR)
            }
            values[name] = group(**fixed, **taken)
        return func(**values)

    del command.__wrapped__
    command.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    command.__annotations__ = {p.name: p.annotation for p in parameters}
    return command
