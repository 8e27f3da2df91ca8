"""The error boundary: a user error becomes one line and an exit code; a signal, an orderly stop."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType

import typer
from rich.markup import escape

from tritongen.cli.console import err_console
from tritongen.errors import TritongenError

EXIT_INTERRUPTED = 130


@contextlib.contextmanager
def user_errors() -> Iterator[None]:
    """Turn a :class:`TritongenError` into one line on stderr and its exit code.

    Ctrl-C becomes exit code 130 with one line, not a traceback.
    """
    try:
        yield
    except TritongenError as e:
        err_console.print(f"[bold red]error:[/] {escape(e.one_line())}", soft_wrap=True, highlight=False)
        raise typer.Exit(e.exit_code) from e
    except KeyboardInterrupt as e:
        err_console.print("[bold red]interrupted[/]", soft_wrap=True)
        raise typer.Exit(EXIT_INTERRUPTED) from e


@contextlib.contextmanager
def stop_on_signals() -> Iterator[threading.Event]:
    """An event set by SIGINT or SIGTERM, so long work can stop in order instead of being interrupted."""
    stopping = threading.Event()

    def handler(signum: int, frame: FrameType | None) -> None:
        stopping.set()

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stopping
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
