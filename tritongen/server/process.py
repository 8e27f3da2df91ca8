"""Helpers for the child processes tritongen supervises (Triton, Locust)."""

from __future__ import annotations

import contextlib
import ctypes
import signal
from collections import deque
from pathlib import Path

_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    """Ask Linux to SIGKILL the child when the process that started it dies (a ``preexec_fn``)."""
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def tail_lines(path: Path, lines: int) -> list[str]:
    """The last ``lines`` lines of a log file, without line ends (empty if unreadable)."""
    try:
        with path.open("r", encoding="utf-8", errors="replace") as log:
            return [line.rstrip("\n") for line in deque(log, maxlen=lines)]
    except OSError:
        return []
