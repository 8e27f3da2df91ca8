"""Shared-memory regions left by dead processes are reclaimed, and only theirs."""

from __future__ import annotations

import os
from pathlib import Path

from tritongen.server.leftovers import reclaim_leftovers


def test_stale_regions_of_dead_processes_are_reclaimed(tmp_path: Path) -> None:
    dead = 2**22 + 12345  # above the default pid_max: no such process
    stale = tmp_path / f"tritongen_{dead}_abcd_region"
    mine = tmp_path / f"tritongen_{os.getpid()}_abcd_region"
    other = tmp_path / "someone_else_region"
    for path in (stale, mine, other):
        path.write_bytes(b"x")
    assert reclaim_leftovers(tmp_path) == [stale.name]
    assert not stale.exists() and mine.exists() and other.exists()
