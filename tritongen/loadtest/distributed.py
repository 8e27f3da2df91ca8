"""Distributed load: a Locust master per run that waits for workers elsewhere, and the worker loop.

``tritongen loadtest --master`` runs each level (and round) as a Locust master that waits for
``workers`` Locust workers, which may run on other machines; their windows reach the master
and are merged as those of local processes are. The master notes each worker Locust loses
(no heartbeat for ~4 s, or it quit) in the results stream; the run stops expecting its
windows, reports it, and goes on with the others.

``tritongen loadtest --worker --master-host H`` runs ``locust --worker`` with the package's
locustfile again after each run, since every run has a master of its own.
"""

from __future__ import annotations

import base64
import contextlib
import math
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hdrh.histogram import HdrHistogram

from tritongen.errors import ConfigError, ServerError
from tritongen.loadtest.locust_process import locust_binary, locustfile_path
from tritongen.loadtest.windows import Window, new_histogram
from tritongen.server.process import die_with_parent, tail_lines

DEFAULT_PORT = 5557
"""Locust's own master port."""
DEFAULT_WAIT_S = 60.0
WORKER_FAILURE = "tritongen worker: "
"""Prefix of the one line the locustfile prints when a worker cannot load (a copy of its constant)."""
BETWEEN_RUNS_S = 1.0
"""A worker waits this long after a run before looking for the next master (the last one is exiting)."""
PROBE_EVERY_S = 0.5


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
            raise ConfigError("--workers must be at least 1", "e.g. --master --workers 3")
        if not 0 < self.port < 65536:
            raise ConfigError(f"--master-port {self.port} is not a port", "e.g. --master-port 5557")
        if self.wait_s <= 0:
            raise ConfigError("--worker-wait must be positive", "e.g. --worker-wait 60s")
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
        """Locust's master options of a run (instead of ``--processes``)."""
        return [
            "--master",
            "--expect-workers", str(self.workers),
            "--expect-workers-max-wait", str(math.ceil(self.wait_s)),
            "--master-bind-host", self.bind_host,
            "--master-bind-port", str(self.port),
        ]  # fmt: skip

    def no_workers_reason(self) -> str:
        """Why a run whose master exited before any window arrived failed."""
        return (
            f"fewer than {self.workers} load worker(s) connected to port {self.port} within "
            f"{self.wait_s:.0f} s (start them with `tritongen loadtest --worker --master-host THIS_HOST "
            f"--master-port {self.port}`)"
        )


def worker_argv(master_host: str, port: int = DEFAULT_PORT) -> list[str]:
    """The Locust worker command line: a plain ``locust --worker`` with the package's locustfile.

    Every ``--triton-*`` option comes from the master; the worker needs only where it is.
    """
    return [
        str(locust_binary()),
        "-f", str(locustfile_path()),
        "--worker",
        "--master-host", master_host,
        "--master-port", str(port),
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
    merged HDR latency histogram (µs), so anyone can merge the workers' figures again.
    """
    figures: dict[str, dict[str, Any]] = {}
    histograms: dict[str, HdrHistogram] = {}
    for window in measured:
        for report in window.reports:
            worker = str(report.get("worker", ""))
            entry = figures.setdefault(worker, {"requests": 0, "errors": 0, "ok": 0})
            errors = sum(int(n) for n in report.get("errors", {}).values())
            entry["ok"] += int(report.get("ok", 0))
            entry["errors"] += errors
            entry["requests"] += int(report.get("ok", 0)) + errors
            if report.get("hist"):
                hist = histograms.setdefault(worker, new_histogram())
                hist.add(HdrHistogram.decode(base64.b64decode(report["hist"])))
    for worker in lost:
        figures.setdefault(worker, {"requests": 0, "errors": 0, "ok": 0})
    for worker, entry in figures.items():
        entry["lost"] = worker in lost
        entry["lost_at_s"] = round(lost[worker] - t0, 3) if worker in lost else None
        hist = histograms.get(worker)
        entry["histogram"] = base64.b64encode(hist.encode()).decode() if hist is not None else ""
    return dict(sorted(figures.items()))


def lost_warnings(figures: dict[str, dict[str, Any]]) -> list[str]:
    """One warning per lost worker."""
    left = sum(1 for entry in figures.values() if not entry["lost"])
    return [
        f"load worker {worker} was lost {entry['lost_at_s']:.1f} s into the run (no heartbeat, or it "
        f"quit); its {entry['requests']} measured requests count, the run went on with {left} worker(s)"
        for worker, entry in figures.items()
        if entry["lost"]
    ]


def master_reachable(host: str, port: int, timeout_s: float = 1.0) -> bool:
    """Whether something listens on the master's port."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def wait_for_master(host: str, port: int, wait_s: float) -> bool:
    """Whether a master appears within ``wait_s``."""
    deadline = time.monotonic() + wait_s
    while True:
        if master_reachable(host, port):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(PROBE_EVERY_S)


def run_worker(master_host: str, port: int, wait_s: float, say: Callable[[str], None]) -> int:
    """Join each run's master in turn until none appears for ``wait_s``; the number of runs joined.

    Raises:
        ConfigError: a worker could not load (e.g. the master could not send its request data).
        ServerError: Locust could not be started.
        KeyboardInterrupt: Ctrl-C (the Locust worker is stopped first).
    """
    workdir = Path(tempfile.mkdtemp(prefix="tritongen-worker-"))
    runs = 0
    try:
        while True:
            if not wait_for_master(master_host, port, wait_s):
                say(f"no master at {master_host}:{port} for {wait_s:.0f} s: stopping after {runs} run(s)")
                return runs
            runs += 1
            say(f"run {runs}: joined the master at {master_host}:{port}")
            failure = _one_run(worker_argv(master_host, port), workdir / f"worker-{runs}.log")
            if failure is not None:
                raise ConfigError(failure, "check the master's options and data, then start the worker again")
            time.sleep(BETWEEN_RUNS_S)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _one_run(argv: list[str], log_path: Path) -> str | None:
    """Run one Locust worker to its end; the locustfile's one-line failure, if it printed one."""
    with log_path.open("wb") as log:
        try:
            process = subprocess.Popen(
                argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                preexec_fn=die_with_parent,
            )
        except OSError as e:
            raise ServerError(f"cannot start Locust: {e.strerror}", "reinstall with `make install`") from e
        try:
            process.wait()
        finally:
            _stop(process)
    failures = [line for line in tail_lines(log_path, 50) if line.startswith(WORKER_FAILURE)]
    return failures[-1][len(WORKER_FAILURE) :] if failures else None


def _stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM (the worker tells its master it quits), then SIGKILL the group."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired, KeyboardInterrupt):
            process.wait(timeout=5)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=5)
