"""Resident memory of one model's backend processes, read from /proc while the model runs.

Triton runs every Python-backend model instance in its own stub process, a child of
``tritonserver`` whose command line names the model file (``<repo>/<model>/<version>/model.py``)
and the instance (``<model>_<group>_<index>``). The memory a model costs on a CPU host is
the resident set of those processes; a background thread samples it and keeps the peak.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from tritongen.server.distribution import STUB_NAME


def backend_processes(server_pid: int, model: str) -> list[psutil.Process]:
    """The stub processes running ``model`` under the server ``server_pid`` (empty when none)."""
    try:
        children = psutil.Process(server_pid).children(recursive=True)
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return []
    found = []
    for child in children:
        try:
            argv = child.cmdline()
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
        if argv and Path(argv[0]).name == STUB_NAME and _stub_model(argv) == model:
            found.append(child)
    return found


def _stub_model(argv: list[str]) -> str | None:
    """The model a stub serves: the directory above the version directory of its model file."""
    if len(argv) < 2:
        return None
    model_file = Path(argv[1])
    return model_file.parent.parent.name if model_file.parent.name.isdigit() else None


def resident_bytes(processes: list[psutil.Process]) -> int | None:
    """Sum of the processes' resident sets; ``None`` when none of them could be read."""
    total, read = 0, False
    for process in processes:
        try:
            total += int(process.memory_info().rss)
            read = True
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return total if read else None


@dataclass
class ProcessMemorySampler:
    """Sample the resident memory of ``model``'s backend processes every ``interval_s``.

    The set of processes is looked up again on every sample, so instances that start
    later (a reload, more instances) are counted too.
    """

    server_pid: int
    model: str
    interval_s: float = 0.2
    peak_bytes: int | None = None
    samples: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def sample(self) -> int | None:
        """Read the memory now and update the peak."""
        value = resident_bytes(backend_processes(self.server_pid, self.model))
        if value is not None:
            self.samples += 1
            self.peak_bytes = value if self.peak_bytes is None else max(self.peak_bytes, value)
        return value

    def start(self) -> ProcessMemorySampler:
        """Start sampling in a background thread."""
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="tritongen-rss", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> int | None:
        """Stop sampling; the peak seen."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        return self.peak_bytes

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval_s)
