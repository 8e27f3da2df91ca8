"""Shared CLI plumbing: consoles, the error boundary, list parsing."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType

import typer
from rich.markup import escape

from tritongen.cli.console import console as console  # built in cli/console.py, imported from here
from tritongen.cli.console import err_console as err_console
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
