"""The engines' own output (TVM's C++ logger, ONNX Runtime's warnings, PyTorch's prints) into a log file.

Engines write to the process's file descriptors 1 and 2 from C++, past Python. While a
conversion runs, both descriptors point at the log file; Python's own ``sys.stdout`` and
``sys.stderr`` (tritongen's console) keep writing to the terminal through copies of the
original descriptors, and Python warnings go to the log too. A stream some caller has put
in place of ``sys.stdout``/``sys.stderr`` (a test's capture) is left as it is.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO


@contextlib.contextmanager
def engine_output_to(path: Path) -> Iterator[Path]:
    """Send what engines print to ``path`` (truncated first) until the block ends."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8", buffering=1) as log, contextlib.ExitStack() as stack:
        for fd, name in ((1, "stdout"), (2, "stderr")):
            stack.enter_context(_redirected(fd, name, log))
        stack.enter_context(warnings.catch_warnings())
        warnings.showwarning = _to_log(log)
        yield path


def _to_log(log: TextIO) -> Any:
    def show(
        message: Any, category: Any, filename: str, lineno: int, file: Any = None, line: Any = None
    ) -> None:
        log.write(warnings.formatwarning(message, category, filename, lineno, line))

    return show


@contextlib.contextmanager
def _redirected(fd: int, name: str, log: TextIO) -> Iterator[None]:
    """Point descriptor ``fd`` at ``log``; ``sys.<name>`` stays on the original one if it writes to ``fd``."""
    stream = getattr(sys, name)
    try:
        uses_fd = stream.fileno() == fd
    except (AttributeError, OSError, io.UnsupportedOperation):
        uses_fd = False
    if uses_fd:
        stream.flush()
    saved = os.dup(fd)
    replacement: TextIO | None = None
    try:
        os.dup2(log.fileno(), fd)
        if uses_fd:
            replacement = open(  # noqa: SIM115 - closed below, after the original is back
                os.dup(saved), "w", encoding=stream.encoding, errors=stream.errors, buffering=1, closefd=True
            )
            setattr(sys, name, replacement)
        yield
    finally:
        if replacement is not None:
            replacement.flush()
            setattr(sys, name, stream)
            replacement.close()
        os.dup2(saved, fd)
        os.close(saved)


def written(path: Path | None) -> Path | None:
    """``path`` when the log has something in it; ``None`` when it is empty or missing."""
    if path is None or not path.is_file() or path.stat().st_size == 0:
        return None
    return path


def default_log_path(name: str) -> Path:
    """Where a build's engine log goes unless told: the temporary folder, one file per model name."""
    import tempfile

    return Path(tempfile.gettempdir()) / f"tritongen-convert-{name}.log"
