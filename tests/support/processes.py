"""Helpers for fault tests: run the CLI as a real process, then check what it left behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil

from tritongen.server.leftovers import SHM_DIR, SHM_PREFIX


@dataclass
class Cli:
    """``python -m tritongen ARGS`` with its output in files (no pipe can fill and block it)."""

    process: subprocess.Popen[bytes]
    stdout_path: Path
    stderr_path: Path
    tmp: Path
    """The CLI's temporary folder (``TMPDIR``): its load tests' windows files are in there."""

    @property
    def pid(self) -> int:
        return self.process.pid

    def stdout(self) -> str:
        return self.stdout_path.read_text(errors="replace")

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def error_lines(self) -> list[str]:
        return [line for line in self.stderr().splitlines() if line.startswith(("error:", "interrupted"))]

    def wait(self, timeout_s: float) -> int:
        return self.process.wait(timeout=timeout_s)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def start_cli(workdir: Path, *args: str | Path) -> Cli:
    workdir.mkdir(parents=True, exist_ok=True)
    stdout, stderr = workdir / "stdout.txt", workdir / "stderr.txt"
    tmp = cli_tmp()
    with stdout.open("wb") as out, stderr.open("wb") as err:
        process = subprocess.Popen(
            [sys.executable, "-m", "tritongen", *[str(a) for a in args]],
            stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=cli_env(tmp),
        )  # fmt: skip
    return Cli(process, stdout, stderr, tmp)


def cli_tmp() -> Path:
    """A short temporary folder of its own for a CLI process (socket paths in it stay short)."""
    return Path(tempfile.mkdtemp(prefix="tgcli-"))


def cli_env(tmp: Path) -> dict[str, str]:
    """The environment of a CLI process with ``tmp`` as its temporary folder."""
    return {**os.environ, "COLUMNS": "200", "TMPDIR": str(tmp)}


def descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def named(processes: list[psutil.Process], word: str) -> list[psutil.Process]:
    found = []
    for process in processes:
        try:
            if word in " ".join(process.cmdline()):
                found.append(process)
        except psutil.NoSuchProcess:
            continue
    return found


def servers_started_by(pid: int) -> list[psutil.Process]:
    """Embedded servers started by process ``pid``, wherever they were reparented to."""
    marker = f"shm-region-prefix-name={SHM_PREFIX}{pid}_"
    return [p for p in named(list(psutil.process_iter()), marker) if p.pid != pid]


def windows_with_requests(tmp: Path) -> int:
    """How many load windows with finished requests the CLI with temporary folder ``tmp`` has seen.

    Each run's Locust appends one JSON line per worker and window to the run's windows file in
    the load test's folder under ``tmp``; a run is past warm-up and into its measured windows
    once enough have requests. The newest run's file counts.
    """
    files = sorted(tmp.glob("tritongen-load-*/windows-*.jsonl"), key=_modified)
    if not files:
        return 0
    try:
        lines = files[-1].read_text(encoding="utf-8").splitlines()
    except OSError:
        return 0
    indices = set()
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a line being written
        if record.get("ok"):
            indices.add(record["index"])
    return len(indices)


def _modified(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def shm_regions(pid: int) -> list[str]:
    """Shared-memory regions of the embedded servers started by process ``pid``."""
    return [p.name for p in SHM_DIR.glob(f"{SHM_PREFIX}{pid}_*")]


def wait_until(condition: Callable[[], bool], cli: Cli, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if cli.process.poll() is not None:
            raise AssertionError(f"the CLI exited ({cli.process.returncode}) before {what}: {cli.stderr()}")
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout_s:.0f} s: {cli.stderr()[-2000:]}")
        time.sleep(0.2)


def gone(processes: list[psutil.Process], timeout_s: float = 15) -> list[psutil.Process]:
    """The processes still alive after ``timeout_s``."""
    _, alive = psutil.wait_procs(processes, timeout=timeout_s)
    return alive
