"""The JSON forms of the reports a conversion writes into a model's metadata."""

from __future__ import annotations

import dataclasses
from typing import Any


def json_value(value: Any) -> Any:
    """``value`` ready for :func:`json.dumps`.

    An object with a ``to_json()`` method gives what it returns, a list or tuple a list of such values.
    """
    if hasattr(value, "to_json"):
        return value.to_json()
    if isinstance(value, (list, tuple)):
        return [json_value(item) for item in value]
    return value


def json_fields(obj: Any, *names: str) -> dict[str, Any]:
    """The attributes ``names`` of ``obj`` (by default its public dataclass fields) as JSON, in order.

    Each value goes through :func:`json_value`.
    """
    shown = names or tuple(f.name for f in dataclasses.fields(obj) if not f.name.startswith("_"))
    return {name: json_value(getattr(obj, name)) for name in shown}
