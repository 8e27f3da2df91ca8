"""The server and the load generator on cores of their own (``--cpus server=LIST,load=LIST``).

Linux's ``sched_setaffinity`` sets the cores of one thread; a thread or process started later
inherits the cores of the thread that starts it. So a process tree is pinned thread by
thread (``/proc/PID/task``), every process of it, and what it starts afterwards (Triton's
Python-backend stubs, Locust's forked workers) stays on those cores. A Locust process is
pinned before it runs (in its ``preexec_fn``); the server, already running, is pinned for
the time of a load test and given its cores back after.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil

from tritongen.errors import ConfigError

_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")


@dataclass(frozen=True)
class CpuPlan:
    """The cores the server's tree and the load generator's processes run on."""

    server: frozenset[int]
    load: frozenset[int]

    def text(self) -> str:
        """``server on cores 0, load on cores 1``."""
        return f"server on cores {cores_text(self.server)}, load on cores {cores_text(self.load)}"

    def to_json(self) -> dict[str, list[int]]:
        """``{"server": [...], "load": [...]}``."""
        return {"server": sorted(self.server), "load": sorted(self.load)}


def machine_cores() -> frozenset[int]:
    """The cores this process may run on (a container's or a cgroup's share, not the host's count).

    The union over its threads: a library's thread pool may have pinned the calling thread to one
    core (a parallel runtime binding its workers), which says nothing of what the process may use.
    """
    cores = set(os.sched_getaffinity(0))
    with contextlib.suppress(OSError):
        for tid in os.listdir("/proc/self/task"):
            with contextlib.suppress(OSError):
                cores |= os.sched_getaffinity(int(tid))
    return frozenset(cores)


def cores_text(cores: frozenset[int] | set[int]) -> str:
    """``0-3,6``."""
    ordered = sorted(cores)
    parts: list[str] = []
    start = previous = ordered[0] if ordered else 0
    for core in [*ordered[1:], -2]:
        if core != previous + 1:
            parts.append(str(start) if start == previous else f"{start}-{previous}")
            start = core
        previous = core
    return ",".join(parts)


def parse_core_list(text: str, option: str = "--cpus") -> frozenset[int]:
    """``0-3,6`` -> {0, 1, 2, 3, 6}.

    Raises:
        ConfigError: not a list of cores and ranges.
    """
    cores: set[int] = set()
    for part in text.split(","):
        match = _RANGE.match(part.strip())
        if not match or (match.group(2) and int(match.group(2)) < int(match.group(1))):
            raise ConfigError(f"{option}: {text!r} is not a list of cores", "e.g. server=0-5,load=6-7")
        cores.update(range(int(match.group(1)), int(match.group(2) or match.group(1)) + 1))
    return frozenset(cores)


def parse_cpus(text: str, available: frozenset[int] | None = None) -> CpuPlan:
    """``server=0-5;load=6,7`` or ``server=0-5,load=6-7`` -> the plan, checked against the machine.

    Raises:
        ConfigError: a missing or unknown part, a core the machine does not have, or a core in both.
    """
    parts = re.split(r"[;,\s]*\b(server|load)=", text.strip())
    keys, values = parts[1::2], parts[2::2]
    if parts[0].strip() or sorted(keys) != ["load", "server"]:
        raise ConfigError(
            f"--cpus {text!r} must give server=LIST and load=LIST", "e.g. --cpus server=0-5,load=6-7"
        )
    found = dict(zip(keys, values, strict=True))
    plan = CpuPlan(parse_core_list(found["server"]), parse_core_list(found["load"]))
    have = machine_cores() if available is None else available
    missing = sorted((plan.server | plan.load) - have)
    if missing:
        raise ConfigError(
            f"--cpus names core {cores_text(set(missing))}, which this machine does not have "
            f"(cores {cores_text(have)})",
            "name cores from that list",
        )
    both = plan.server & plan.load
    if both:
        raise ConfigError(
            f"--cpus puts core {cores_text(both)} in both server and load",
            "give the server and the load cores of their own",
        )
    return plan


def pin_process(pid: int, cores: frozenset[int]) -> int:
    """Every thread of ``pid`` on ``cores``; how many threads were pinned (0: the process is gone)."""
    pinned = 0
    try:
        tids = [int(t) for t in os.listdir(Path("/proc") / str(pid) / "task")]
    except OSError:
        return 0
    for tid in tids:
        with contextlib.suppress(OSError):  # a thread that ended meanwhile
            os.sched_setaffinity(tid, cores)
            pinned += 1
    return pinned


def pin_tree(pid: int, cores: frozenset[int]) -> int:
    """``pid`` and every process under it, thread by thread; how many threads were pinned."""
    try:
        children = [p.pid for p in psutil.Process(pid).children(recursive=True)]
    except psutil.Error:
        children = []
    return sum(pin_process(p, cores) for p in [pid, *children])


def pinned_start(cores: frozenset[int] | None, then: Callable[[], None]) -> Callable[[], None]:
    """A ``preexec_fn``: the child on ``cores`` (None: left as it is), then ``then``."""

    def start() -> None:  # pragma: no cover - runs in the child before exec
        if cores:
            os.sched_setaffinity(0, cores)
        then()

    return start


@contextlib.contextmanager
def pinned_server(server_pid: int | None, plan: CpuPlan | None) -> Iterator[None]:
    """The server's tree on the plan's server cores, and this process on its load cores, meanwhile.

    Both get the cores they had before back afterwards.

    Raises:
        ConfigError: a plan without a server process on this machine to pin.
    """
    if plan is None:
        yield
        return
    if server_pid is None:
        raise ConfigError(
            "--cpus pins the server's processes, and no server process was found on this machine",
            "serve the model here (--serve, or a server on 127.0.0.1), or drop --cpus",
        )
    before_server = frozenset(os.sched_getaffinity(server_pid))
    before_self = frozenset(os.sched_getaffinity(0))
    pin_tree(server_pid, plan.server)
    pin_process(os.getpid(), plan.load)
    try:
        yield
    finally:
        pin_tree(server_pid, before_server)
        pin_process(os.getpid(), before_self)
