"""How long the embedded server's model loads may take, and which loads its log shows unfinished.

In explicit model-control mode the server opens its endpoints only once every start-up load
has finished, so a model whose ``initialize`` hangs keeps it from ever answering: the wait is
bounded (a base plus a share per model), and what is still loading is read from its log.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

LOAD_TIMEOUT_BASE_S = 120.0
"""The server's own start, before any model (a busy 2-core machine takes tens of seconds)."""
LOAD_TIMEOUT_PER_MODEL_S = 15.0
"""Each model's load on top (a Python-backend stub starting, its framework imported, its weights read)."""

_LOADING = re.compile(r'"loading: (.+):\d+"')
_ENDED = re.compile(r"\"(?:successfully loaded|failed to load) '([^']+)'")


def default_load_timeout_s(models: int) -> float:
    """The bound on loading ``models`` models at start-up: the base plus a share per model."""
    return LOAD_TIMEOUT_BASE_S + LOAD_TIMEOUT_PER_MODEL_S * max(models, 1)


def still_loading(log_lines: Iterable[str]) -> list[str]:
    """The models whose load the server log shows begun and not yet ended (loaded or failed), sorted."""
    pending: set[str] = set()
    for line in log_lines:
        if (begun := _LOADING.search(line)) is not None:
            pending.add(begun.group(1))
        elif (ended := _ENDED.search(line)) is not None:
            pending.discard(ended.group(1))
    return sorted(pending)
