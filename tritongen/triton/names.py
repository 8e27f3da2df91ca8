"""Model names that are safe as Triton model names and as directory names."""

from __future__ import annotations

import re

from tritongen.errors import ConfigError

_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]{0,127}")


def check_model_name(name: str) -> str:
    """Return ``name`` if it is a legal model name, else raise.

    Legal: 1-128 characters of letters, digits, ``_``, ``-`` and ``.``, not starting
    with ``.`` or ``-``; so no path separators, no ``..``, no shell metacharacters.

    Raises:
        ConfigError: the name is illegal; the message says which rule it breaks.
    """
    if _NAME.fullmatch(name) and ".." not in name:
        return name
    if not name:
        problem = "is empty"
    elif "/" in name or "\\" in name:
        problem = "contains a path separator"
    elif ".." in name:
        problem = "contains '..'"
    elif len(name) > 128:
        problem = "is longer than 128 characters"
    elif name[0] in ".-":
        problem = f"starts with '{name[0]}'"
    else:
        bad = sorted({c for c in name if not re.fullmatch(r"[A-Za-z0-9_.\-]", c)})
        problem = "contains " + " ".join(repr(c) for c in bad)
    raise ConfigError(
        f"model name {name!r} {problem}",
        "use letters, digits, '_', '-' and '.', e.g. --name my_model",
    )
