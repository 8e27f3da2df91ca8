"""Shared memory and backend stubs that tritongen servers left behind, found and reclaimed.

Python-backend regions in ``/dev/shm`` are named after the tritongen process that started the
server (``tritongen_<pid>_<random>_...``), and each stub's arguments name its region and its
server's pid. What is reclaimed must be gone on every count, because a pid in a name can
mislead: the process that started a live server may have exited or handed it on, or live in
another PID namespace that shares ``/dev/shm``. So a stub is stopped only when the process
its region names is gone *and* its server no longer runs it, and a region is removed only
when the process its name holds is gone *and* no live process maps it (a server, its stubs,
or a server it was registered with for a load test's inputs).
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import psutil

from tritongen.server.distribution import STUB_NAME

SHM_DIR = Path("/dev/shm")
SHM_PREFIX = "tritongen_"
"""Python-backend regions are named ``tritongen_<pid of the owning tritongen>_<random>_...``."""
PROC = Path("/proc")


def reclaim_leftovers(shm_dir: Path = SHM_DIR) -> list[str]:
    """Stop backend stubs and remove shared-memory regions left by tritongen servers that are gone.

    A server whose parent was killed stops its stubs itself (it gets SIGTERM), but a server
    killed outright cannot: its stubs keep running and their regions hold memory until reboot.
    Whatever a live server or stub still uses is kept. Returns what was removed.
    """
    removed = []
    for process in _orphaned_stubs():
        with contextlib.suppress(psutil.Error):
            process.kill()
            removed.append(f"stub pid {process.pid}")
    mapped = mapped_regions(shm_dir)
    for region in shm_dir.glob(f"{SHM_PREFIX}*_*"):
        owner = _owner(region.name)
        if owner is None or psutil.pid_exists(owner) or region.name in mapped:
            continue
        with contextlib.suppress(OSError):
            region.unlink()
            removed.append(region.name)
    return removed


def mapped_regions(shm_dir: Path = SHM_DIR) -> set[str]:
    """Names of the tritongen regions in ``shm_dir`` that some live process has mapped (``/proc/*/maps``)."""
    marker = f"{shm_dir}/{SHM_PREFIX}"
    names = set()
    for maps in PROC.glob("[0-9]*/maps"):
        try:
            text = maps.read_text(encoding="utf-8", errors="replace")
        except OSError:  # gone meanwhile, or not ours to read
            continue
        for line in text.splitlines():
            at = line.find(marker)
            if at >= 0:
                names.add(line[at + len(str(shm_dir)) + 1 :].removesuffix(" (deleted)"))
    return names


def _owner(name: str) -> int | None:
    """The tritongen pid in a region name ``tritongen_<pid>_...``."""
    if not name.startswith(SHM_PREFIX):
        return None
    owner = name[len(SHM_PREFIX) :].split("_", 1)[0]
    return int(owner) if owner.isdigit() else None


def _orphaned_stubs() -> list[psutil.Process]:
    """Python-backend stubs of tritongen servers that are gone: neither their tritongen nor their server runs.

    A stub's arguments are its model, its region, two sizes and its server's pid; while that
    server lives, it is the stub's parent.
    """
    found = []
    for process in psutil.process_iter(["cmdline", "ppid"]):
        argv = process.info["cmdline"] or []
        if len(argv) < 6 or Path(argv[0]).name != STUB_NAME:
            continue
        owner = _owner(argv[2])
        if owner is None or psutil.pid_exists(owner):
            continue
        if argv[5].isdigit() and process.info["ppid"] == int(argv[5]):
            continue  # its server still runs it
        found.append(process)
    return found
