"""Distributed load: a Locust master per run that waits for workers elsewhere, and the worker loop.

``tritongen loadtest --master`` runs each level (and round) as a Locust master that waits for
``workers`` Locust workers, which may run on other machines; their windows reach the master
and are merged as those of local processes are. The master notes each worker Locust loses
(no heartbeat for ~4 s, or it quit) in the results stream, and each one whose heartbeats come
back; Locust hands a lost worker's users to the others (``--enable-rebalancing``), and the run
reports the loss and the users its windows ran.

``tritongen loadtest --worker --master-host H`` runs ``locust --worker`` with the package's
locustfile again after each run, since every run has a master of its own.
"""

from __future__ import annotations

import base64
import functools
import math
import os
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tritongen.client.address import ServerAddress
from tritongen.errors import ConfigError, ServerError
from tritongen.io.loadgen_shared import MASTER_SILENT_ENV, WORKER_FAILURE, WORKER_JOINED, WORKER_TOTAL
from tritongen.loadtest.locust_process import LocustProcess, locust_binary, locustfile_path
from tritongen.loadtest.result import RunResult
from tritongen.loadtest.windows import Window, WindowLog
from tritongen.server.process import tail_lines

DEFAULT_PORT = 5557
"""Locust's own master port."""
DEFAULT_WAIT_S = 60.0
WORKER_MASTER_SILENT_S = 8.0
"""A worker of ``loadtest --worker`` quits when its master is silent this long: the next run has a new one."""
BETWEEN_RUNS_S = 1.0
"""A worker waits this long after a run before looking for the next master (the last one is exiting)."""
PROBE_EVERY_S = 0.5
POLL_S = 0.2
QUICK_EXIT_S = 5.0
"""A Locust worker that exits with an error within this long of its start has crashed..."""
CRASHES_TO_STOP = 3
"""... and the worker loop stops after this many crashes in a row."""


def check_wait(wait_s: float) -> None:
    """Reject a ``--worker-wait`` that is not positive.

    Raises:
        ConfigError: zero or negative.
    """
    if wait_s <= 0:
        raise ConfigError("--worker-wait must be positive", "e.g. --worker-wait 60s")


@dataclass(frozen=True)
class Distributed:
    """A load test whose Locust workers connect from elsewhere to a master on this machine."""

    workers: int
    """Workers each run waits for (and splits its users among)."""
    port: int = DEFAULT_PORT
    """The master's port (every run's master binds it in turn)."""
    wait_s: float = DEFAULT_WAIT_S
    """How long each run's master waits for its workers before the run fails."""
    bind_host: str = "*"

    def check(self, mode: str, levels: tuple[float, ...], sequences: bool, shared_memory: str) -> None:
        """Reject what a distributed load cannot do.

        Raises:
            ConfigError: no workers, a bad port or wait, a concurrency below the worker count, a
                sequence load (correlation IDs are unique per machine only), or shared memory.
        """
        if self.workers < 1:
            raise ConfigError(
                f"--workers {self.workers}: a master needs at least 1", "e.g. --master --workers 3"
            )
        if not 0 < self.port < 65536:
            raise ConfigError(f"--master-port {self.port} is not a port", "e.g. --master-port 5557")
        check_wait(self.wait_s)
        if shared_memory != "none":
            raise ConfigError(
                "--master and --shared-memory exclude each other: workers on other machines cannot "
                "share this host's memory with the server",
                "drop --shared-memory",
            )
        if sequences:
            raise ConfigError(
                "--master does not load sequence models (their correlation IDs are unique per machine only)",
                "run --sequences without --master",
            )
        low = [level for level in levels if mode == "concurrency" and level < self.workers]
        if low:
            raise ConfigError(
                f"--concurrency {int(low[0])} is below --workers {self.workers}: a worker would have no user",
                f"use levels of at least {self.workers}, or fewer workers",
            )

    def master_args(self) -> list[str]:
        """Locust's master options of a run (instead of ``--processes``).

        With rebalancing, Locust hands a missing worker's users to the others at once (without
        it, only once it drops the worker a minute later), so the level keeps its load.
        """
        return [
            "--master",
            "--expect-workers", str(self.workers),
            "--expect-workers-max-wait", str(math.ceil(self.wait_s)),
            "--master-bind-host", self.bind_host,
            "--master-bind-port", str(self.port),
            "--enable-rebalancing",
        ]  # fmt: skip

    def no_workers_reason(self) -> str:
        """Why a run whose master gave up waiting for its workers failed."""
        return (
            f"fewer than {self.workers} load worker(s) connected to port {self.port} within "
            f"{self.wait_s:.0f} s (start them with `tritongen loadtest --worker --master-host THIS_HOST "
            f"--master-port {self.port}`)"
        )

    def exit_reason(self, tail: list[str]) -> str:
        """Why a run's master exited before any window arrived, from the end of its log."""
        text = "\n".join(tail)
        if "Gave up waiting for workers" in text:
            return self.no_workers_reason()
        if "Address already in use" in text or ("master port" in text and "was busy" in text):
            return (
                f"port {self.port} is in use (another master, or another program, listens on it): "
                "stop it, or give this master another --master-port"
            )
        last = [line for line in tail if line.strip()]
        return "the Locust master exited early: " + (last[-1] if last else "no output")


def loopback_warning(address: ServerAddress) -> str | None:
    """A warning when the workers of a master would load their own machine, not the server."""
    if not address.is_loopback:
        return None
    return (
        f"--url {address.url} is this machine's loopback: workers on other machines would load their own "
        "(give --url the server's address as the workers reach it)"
    )


@dataclass(frozen=True)
class WorkerArgs:
    """The Locust worker command line: a plain ``locust --worker`` with the package's locustfile.

    Every ``--triton-*`` option comes from the master; the worker needs only where it is.
    """

    master_host: str
    port: int = DEFAULT_PORT

    def argv(self) -> list[str]:
        """The command line."""
        return [
            str(locust_binary()),
            "-f", str(locustfile_path()),
            "--worker",
            "--master-host", self.master_host,
            "--master-port", str(self.port),
            "--loglevel", "WARNING",
        ]  # fmt: skip


def lost_reason(lost: dict[str, float], expected: int, t0: float) -> str | None:
    """Why a run stops once every worker it expected is lost; None while some remain."""
    if expected < 1 or len(lost) < expected:
        return None
    last = max(lost.values())
    return f"all {expected} load worker(s) were lost (the last {last - t0:.1f} s into the run)"


def worker_figures(measured: list[Window], lost: dict[str, float], t0: float) -> dict[str, dict[str, Any]]:
    """Each worker's part of the measured windows by id: requests, errors, ok, lost and when.

    ``requests`` of all workers add up to the run's; ``histogram`` is the base64 of the worker's
    merged HDR latency histogram (µs), so anyone can merge the workers' figures again. The windows
    must come from a ``WindowLog`` that keeps its reports.
    """
    totals: dict[str, Window] = {worker: Window(0) for worker in lost}
    for window in measured:
        for report in window.reports:
            totals.setdefault(str(report.get("worker", "")), Window(0)).add(report)
    figures: dict[str, dict[str, Any]] = {}
    for worker, total in sorted(totals.items()):
        figures[worker] = {
            "requests": total.ok + total.error_count,
            "errors": total.error_count,
            "ok": total.ok,
            "lost": worker in lost,
            "lost_at_s": round(lost[worker] - t0, 3) if worker in lost else None,
            "histogram": base64.b64encode(total.histogram.encode()).decode() if total.ok else "",
        }
    return figures


def add_worker_figures(
    result: RunResult, measured: list[Window], log: WindowLog, users: int, t0: float
) -> None:
    """A distributed run's figures by worker, the users of each window, and their warnings.

    ``users`` is the level's: a measured window whose workers ran fewer had less load than its
    label; ``t0`` is the epoch of window 0.
    """
    result.workers = worker_figures(measured, log.lost, t0)
    left = sum(1 for entry in result.workers.values() if not entry["lost"])
    for worker, entry in result.workers.items():
        if entry["lost"]:
            result.warnings.append(
                f"load worker {worker} was lost {entry['lost_at_s']:.1f} s into the run (no heartbeat, or "
                f"it quit); its {entry['requests']} measured requests count, the run went on with {left} "
                "worker(s)"
            )
    for worker, at in sorted(log.back.items()):
        if worker not in log.lost:
            result.warnings.append(
                f"load worker {worker} missed heartbeats for a few seconds and came back {at - t0:.1f} s "
                "into the run (its machine stalled?)"
            )
    for entry, window in zip(result.windows, measured, strict=True):
        entry["users"] = sum(window.users.values())
    short = [window for window in measured if sum(window.users.values()) < users]
    if short:
        fewest = min(sum(window.users.values()) for window in short)
        result.warnings.append(
            f"the load dropped: {len(short)} of {len(measured)} measured window(s) ran fewer than the "
            f"{users} users asked (as few as {fewest}), while the workers took over a lost worker's users"
        )


def master_reachable(host: str, port: int, timeout_s: float = 1.0) -> bool:
    """Whether something listens on the master's port."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def wait_for_master(host: str, port: int, wait_s: float, stop: threading.Event | None = None) -> bool:
    """Whether a master appears within ``wait_s``.

    Raises:
        KeyboardInterrupt: ``stop`` was set.
    """
    deadline = time.monotonic() + wait_s
    while True:
        if stop is not None and stop.is_set():
            raise KeyboardInterrupt
        if master_reachable(host, port):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(PROBE_EVERY_S)


@dataclass(frozen=True)
class WorkerRun:
    """How one Locust worker run ended."""

    joined: bool
    """The master answered it (not only a port that accepted a connection)."""
    code: int
    seconds: float
    log: list[str]
    """The last lines of its log."""

    def failure(self) -> str | None:
        """The locustfile's one line on why the worker could not load, if it printed one."""
        failures = [line for line in self.log if line.startswith(WORKER_FAILURE)]
        return failures[-1][len(WORKER_FAILURE) :] if failures else None

    def crashed(self) -> bool:
        """Exited with an error soon after its start (Locust itself is broken, or the master refused it)."""
        return self.code != 0 and self.seconds < QUICK_EXIT_S

    def total(self) -> str | None:
        """``ID REQUESTS``: the worker's own count of the requests it reported, if it said it."""
        totals = [line for line in self.log if line.startswith(WORKER_TOTAL)]
        return totals[-1][len(WORKER_TOTAL) :] if totals else None


def run_worker(
    master: WorkerArgs, wait_s: float, say: Callable[[str], None], stop: threading.Event | None = None
) -> int:
    """Join each run's master in turn until none appears for ``wait_s``; the number of runs joined.

    Raises:
        ConfigError: a worker could not load (e.g. the master could not send its request data).
        ServerError: Locust could not be started, or its worker crashed several times in a row.
        KeyboardInterrupt: ``stop`` was set (SIGINT, SIGTERM): the Locust worker has quit first.
    """
    workdir = Path(tempfile.mkdtemp(prefix="tritongen-worker-"))
    where = f"{master.master_host}:{master.port}"
    runs = crashes = 0
    try:
        while True:
            if not wait_for_master(master.master_host, master.port, wait_s, stop):
                say(f"no master at {where} for {wait_s:.0f} s: stopping after {runs} run(s)")
                return runs
            number = runs + 1
            joined = f"run {number}: joined the master at {where}"
            run = _one_run(master, workdir / f"worker-{number}.log", functools.partial(say, joined), stop)
            failure = run.failure()
            if failure is not None:
                raise ConfigError(failure, "check the master's options and data, then start the worker again")
            if run.joined:
                runs = number
                total = run.total()
                if total is not None:
                    worker, _, count = total.partition(" ")
                    say(f"run {number}: worker {worker} sent {count} requests (warm-up included)")
            crashes = crashes + 1 if run.crashed() else 0
            if crashes >= CRASHES_TO_STOP:
                last = run.log[-1] if run.log else f"exit code {run.code}"
                raise ServerError(
                    f"the Locust worker failed {crashes} times in a row within {QUICK_EXIT_S:.0f} s of its "
                    f"start: {last}",
                    "check the worker's install (`make install`) and that the master runs the same tritongen",
                )
            time.sleep(BETWEEN_RUNS_S)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _one_run(
    master: WorkerArgs, log_path: Path, on_join: Callable[[], None], stop: threading.Event | None
) -> WorkerRun:
    """Run one Locust worker to its end, saying when its master has answered it.

    Raises:
        KeyboardInterrupt: ``stop`` was set; the worker was asked to quit (it tells its master).
    """
    started = time.monotonic()
    locust = LocustProcess(
        master, log_path, env={**os.environ, MASTER_SILENT_ENV: str(WORKER_MASTER_SILENT_S)}
    )
    joined = False
    try:
        while True:
            exited = locust.exited()
            if not joined and any(line.startswith(WORKER_JOINED) for line in tail_lines(log_path, 50)):
                joined = True
                on_join()
            if exited:
                break
            if stop is not None and stop.is_set():
                raise KeyboardInterrupt
            time.sleep(POLL_S)
    finally:
        locust.stop()  # SIGTERM first: the worker tells its master it quits
    code = locust.process.returncode
    lines = [line.rstrip() for line in tail_lines(log_path, 50) if line.strip()]
    return WorkerRun(
        joined=joined, code=code if code is not None else -1, seconds=time.monotonic() - started, log=lines
    )
