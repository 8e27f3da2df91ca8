"""The list values options take: ``4,8,16`` and ``a,b``, parsed for the option groups."""

from __future__ import annotations

import typer


def parse_int_list(value: str | None, option: str) -> tuple[int, ...] | None:
    """Parse ``"4,8,16"`` into ``(4, 8, 16)``; ``None``/empty stays ``None``.

    Raises:
        typer.BadParameter: an entry is not an integer.
    """
    if value is None or not value.strip():
        return None
    items = [item.strip() for item in value.split(",") if item.strip()]
    try:
        return tuple(int(item) for item in items)
    except ValueError as e:
        raise typer.BadParameter(
            f"expected integers separated by commas, e.g. 4,8,16; got {value!r}", param_hint=option
        ) from e


def parse_name_list(value: str | None) -> tuple[str, ...]:
    """Parse ``"a,b"`` into ``("a", "b")``."""
    if value is None:
        return ()
    return tuple(item.strip() for item in value.split(",") if item.strip())
