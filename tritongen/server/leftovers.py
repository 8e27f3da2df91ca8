"""Shared memory and backend stubs that tritongen servers left behind, found and reclaimed.

Python-backend regions in ``/dev/shm`` are named after the tritongen process that owns the
server (``tritongen_<pid>_<random>_...``), and each stub's arguments name its region: what
belongs to a tritongen process that is gone can be removed, and nothing else is touched.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import psutil

from tritongen.server.distribution import STUB_NAME

SHM_DIR = Path("/dev/shm")
SHM_PREFIX = "tritongen_"
"""Python-backend regions are named ``tritongen_<pid of the owning tritongen>_<random>_...``."""


def reclaim_leftovers(shm_dir: Path = SHM_DIR) -> list[str]:
    """Stop backend stubs and remove shared-memory regions left by tritongen processes that are gone.

    A server whose parent was killed stops its stubs itself (it gets SIGTERM), but a server
    killed outright cannot: its stubs keep running and their regions hold memory until reboot.
    Whatever belongs to a live tritongen process is kept. Returns what was removed.
    """
    removed = []
    for process in _orphaned_stubs():
        with contextlib.suppress(psutil.Error):
            process.kill()
            removed.append(f"stub pid {process.pid}")
    for region in shm_dir.glob(f"{SHM_PREFIX}*_*"):
        owner = _owner(region.name)
        if owner is None or psutil.pid_exists(owner):
            continue
        with contextlib.suppress(OSError):
            region.unlink()
            removed.append(region.name)
    return removed


def _owner(name: str) -> int | None:
    """The tritongen pid in a region name ``tritongen_<pid>_...``."""
    if not name.startswith(SHM_PREFIX):
        return None
    owner = name[len(SHM_PREFIX) :].split("_", 1)[0]
    return int(owner) if owner.isdigit() else None


def _orphaned_stubs() -> list[psutil.Process]:
    """Python-backend stubs of tritongen servers whose tritongen process is gone."""
    found = []
    for process in psutil.process_iter(["cmdline"]):
        argv = process.info["cmdline"] or []
        if len(argv) < 3 or Path(argv[0]).name != STUB_NAME:
            continue
        owner = _owner(argv[2])  # the stub's second argument: its region
        if owner is not None and not psutil.pid_exists(owner):
            found.append(process)
    return found
