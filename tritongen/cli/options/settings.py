"""One helper turns option groups into the typed settings a workflow takes.

A settings dataclass takes each of its fields from the option group's field of the same
name (a choice as its value: ``http``, not ``ProtocolChoice.http``); what needs parsing, or
is named otherwise, is given by keyword. A field that neither gives keeps the settings'
default::

    settings(TensorRtOptions, flags, dims=parse_dim_ranges(flags.trt_dims))
"""

from __future__ import annotations

import dataclasses
from enum import Enum
from typing import Any, TypeVar

T = TypeVar("T")


def settings(kind: type[T], *groups: Any, prefix: str = "", **given: Any) -> T:
    """``kind`` built from ``groups``: by name (``prefix`` + the field's name in a group), then ``given``.

    An earlier group wins over a later one where both have a field; ``given`` wins over both.

    Raises:
        TypeError: ``kind`` is not a dataclass, or ``given`` names a field it does not have.
    """
    if not dataclasses.is_dataclass(kind):
        raise TypeError(f"{kind!r} is not a dataclass")
    wanted = {item.name for item in dataclasses.fields(kind) if item.init}
    unknown = set(given) - wanted
    if unknown:
        raise TypeError(f"{kind.__name__} has no field {sorted(unknown)}")
    values: dict[str, Any] = {}
    for group in reversed(groups):
        for item in dataclasses.fields(group):
            name = item.name.removeprefix(prefix) if item.name.startswith(prefix) else None
            if name in wanted:
                value = getattr(group, item.name)
                values[name] = value.value if isinstance(value, Enum) else value
    return kind(**{**values, **given})
