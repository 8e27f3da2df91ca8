"""Helpers for the child processes tritongen supervises (Triton, Locust)."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
from collections import deque
from pathlib import Path

_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    """Ask Linux to SIGKILL the child when the process that started it dies (a ``preexec_fn``)."""
    _parent_death_signal(signal.SIGKILL)


def stop_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    """Ask Linux to SIGTERM the child when the process that started it dies (a ``preexec_fn``).

    For a child that must clean up after itself: Triton stops its Python-backend stubs and
    frees their shared memory on SIGTERM, while SIGKILL would leave both behind.
    """
    _parent_death_signal(signal.SIGTERM)


def _parent_death_signal(signum: int) -> None:  # pragma: no cover - runs in the child before exec
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signum)


def tail_lines(path: Path, lines: int) -> list[str]:
    """The last ``lines`` lines of a log file, without line ends (empty if unreadable)."""
    try:
        with path.open("r", encoding="utf-8", errors="replace") as log:
            return [line.rstrip("\n") for line in deque(log, maxlen=lines)]
    except OSError:
        return []


def reap_process_group(process: subprocess.Popen[bytes]) -> None:
    """When the server exits, whatever the cause, kill what is left of its process group at once.

    Python-backend stubs inherit the server's open connections: a client talking to a server
    that crashed would otherwise wait on a connection a stub still holds until its own
    timeout (minutes), instead of being told the server closed it.
    """
    process.wait()
    kill_group(process)


def kill_group(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL the process group ``process`` leads (a session of its own), or what is left of it.

    Once the leader has exited and been reaped, its number stays taken while any member of its
    group lives; with none left, Linux may give the number to a new process (quickly where
    ``pid_max`` is 32768), which may lead a group of its own: another suite's server, say. So a
    reaped leader's group is killed only while no process holds the leader's pid.
    """
    if process.returncode is not None:  # reaped: the number may have been reused
        try:
            os.kill(process.pid, 0)
        except ProcessLookupError:
            pass  # no process has it: only members of the old group can hold it as their group
        except PermissionError:
            return  # another user's process has it now
        else:
            return  # a new process has it now
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
