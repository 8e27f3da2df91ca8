"""Locust processes that stay up across the runs of a load test, a compare or a tune.

Starting Locust costs about two seconds per run (its imports, numpy's and the HDR histogram's,
its workers' start-up) before a request is sent. Here each Locust process is started once,
in Locust's web mode on 127.0.0.1, and every run is a new test in it, driven through Locust's
REST API: ``POST /swarm`` starts it with the run's users, host, time cap and every
``--triton-*`` option (Locust hands them to its forked workers with each spawn message), and
``POST /stop`` ends it, returning once the test's last windows and its report are written.
The locustfile starts each test afresh (its own results file, t0 and windows; users
numbered from 0), so a run in a process that stays up records what a new process would.

One process is kept per kind of run (its forked workers and load cores: what a process keeps
for its life). A process that has died is replaced by a fresh one at the next run; the run
it was in fails as it would have before. Runs that need a process of their own (a master for
workers elsewhere, the web UI shown to the user) start one as before (:class:`LocustProcess`).

Use::

    with load_processes():      # the runs inside share the processes; they stop at the end
        run_load_test(...)
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tritongen.errors import ServerError
from tritongen.io.loadgen_shared import WEB_TOKEN_ENV, WEB_TOKEN_HEADER
from tritongen.loadtest.locust_process import (
    WEB_HOST,
    LocustArgs,
    LocustProcess,
    forked_workers,
    locust_binary,
    locustfile_path,
)
from tritongen.server.ports import pick_free_ports

READY_TIMEOUT_S = 60.0
"""How long a new process (and its forked workers) may take to be ready for a test."""
STOP_TIMEOUT_S = 30.0
"""How long ending a test may take (its report waits for the workers' last windows)."""
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))
"""Requests to this machine's Locust go straight there, whatever proxy the environment names."""


@dataclass(frozen=True)
class ProcessKind:
    """What a Locust process keeps for its life: its forked workers and the cores it runs on."""

    processes: int
    cpus: frozenset[int] | None


def kind_of(args: LocustArgs) -> ProcessKind | None:
    """The kind of process a run can share, or None for a run that needs a process of its own.

    A master whose workers connect from elsewhere, and Locust's web UI shown to the user, keep
    the process's life to the run.
    """
    if args.master_args or args.web_port is not None:
        return None
    return ProcessKind(args.processes, args.cpus)


@dataclass(frozen=True)
class ServiceCommand:
    """The command line of a Locust that takes runs through its REST API (no test started)."""

    kind: ProcessKind
    web_port: int

    @property
    def cpus(self) -> frozenset[int] | None:
        """The cores it runs on (``LocustProcess`` starts it there)."""
        return self.kind.cpus

    def argv(self) -> list[str]:
        """The command line: web mode on ``WEB_HOST``, no stop timeout (a run's users stop at once)."""
        argv = [str(locust_binary()), "-f", str(locustfile_path())]
        argv += ["--web-host", WEB_HOST, "--web-port", str(self.web_port)]
        argv += ["--stop-timeout", "0", "--loglevel", "WARNING", "--triton-metrics-url", "none"]
        return argv + (forked_workers(self.kind.processes) if self.kind.processes > 1 else [])


class LoadService:
    """One Locust process that stays up, and the runs it takes, one at a time.

    Its web API answers only requests that carry its own secret (``WEB_TOKEN_HEADER``), given to
    it in its environment: another user of this machine cannot start or stop its tests.
    """

    def __init__(self, kind: ProcessKind, log_path: Path) -> None:
        self.kind = kind
        self.command = ServiceCommand(kind, pick_free_ports(WEB_HOST, 1)[0])
        self.url = f"http://{WEB_HOST}:{self.command.web_port}"
        self.token = secrets.token_urlsafe(32)
        self.locust = LocustProcess(self.command, log_path, env={**os.environ, WEB_TOKEN_ENV: self.token})
        self.running = False

    def exited(self) -> bool:
        """Whether the process has ended."""
        return self.locust.exited()

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        """Wait until it can start a test: its REST API answers and every forked worker is in.

        Raises:
            ServerError: it exited, or was not ready in time.
        """
        deadline = time.monotonic() + timeout_s
        while True:
            if self.exited():
                raise ServerError(
                    f"Locust exited before its first run: {self.locust.last_line()}", self._hint()
                )
            state = self._state()
            if state is not None and self._idle(state):
                return
            if time.monotonic() > deadline:
                raise ServerError(f"Locust was not ready within {timeout_s:g} s", self._hint())
            time.sleep(0.05)

    def begin(self, args: LocustArgs) -> None:
        """Start ``args``'s run as a new test (the last one must have ended).

        Raises:
            ServerError: the process did not take it.
        """
        form = {"user_count": str(args.users), "spawn_rate": str(args.users), "host": args.host}
        form["run_time"] = f"{args.run_time_s}s"
        form.update({"triton_" + name.replace("-", "_"): value for name, value in args.run_options().items()})
        answer = self._post("/swarm", form, timeout_s=10.0)
        if not answer.get("success", False):
            raise ServerError(f"Locust did not start the run: {answer.get('message', answer)}", self._hint())
        self.running = True

    def end(self) -> None:
        """End the running test; returns once its last windows are written (the process stays up).

        Raises:
            ServerError: the process did not end it, or is not ready for another.
        """
        if not self.running:
            return
        self.running = False
        self._post("/stop", {}, timeout_s=STOP_TIMEOUT_S)
        self.wait_ready(timeout_s=STOP_TIMEOUT_S)

    def close(self) -> None:
        """Stop the process and its workers."""
        self.locust.stop(timeout_s=5.0)

    def _idle(self, state: dict[str, Any]) -> bool:
        if state.get("state") not in ("ready", "stopped"):
            return False
        return self.kind.processes <= 1 or int(state.get("worker_count", 0)) >= self.kind.processes

    def _state(self) -> dict[str, Any] | None:
        """Locust's ``/stats/requests`` (state, worker count), or None while it does not answer."""
        try:
            with _OPENER.open(self._request("/stats/requests"), timeout=5.0) as response:
                answer: dict[str, Any] = json.load(response)
                return answer
        except (OSError, ValueError):
            return None

    def _post(self, path: str, form: dict[str, str], timeout_s: float) -> dict[str, Any]:
        data = urllib.parse.urlencode(form).encode()
        try:
            with _OPENER.open(self._request(path, data), timeout=timeout_s) as response:
                answer: dict[str, Any] = json.load(response)
                return answer
        except (OSError, ValueError) as e:
            raise ServerError(f"Locust's REST API did not answer {path}: {e}", self._hint()) from e

    def _request(self, path: str, data: bytes | None = None) -> urllib.request.Request:
        """A request to its web API at ``path``, carrying its secret (``data``: a POST of that form)."""
        return urllib.request.Request(self.url + path, data=data, headers={WEB_TOKEN_HEADER: self.token})

    def _hint(self) -> str:
        return f"see its log {self.locust.log_path}; reinstall with `make install` if Locust is broken"


class ServiceRun:
    """One run in a :class:`LoadService`, followed as a ``LocustProcess`` is."""

    def __init__(self, service: LoadService) -> None:
        self.service = service
        self.process = service.locust.process

    def exited(self) -> bool:
        """Whether the process the run is in has ended."""
        return self.service.exited()

    def stop(self, timeout_s: float = 10.0) -> None:
        """End the run; the process stays up for the next one (or is stopped if it cannot end it)."""
        del timeout_s  # ending a test waits for its report, whatever the caller would wait for a process
        if self.exited():
            return
        try:
            self.service.end()
        except (ServerError, KeyboardInterrupt):  # a second Ctrl-C only skips the wait
            self.service.close()

    def log_tail(self, lines: int = 20) -> list[str]:
        """Last lines the process printed."""
        return self.service.locust.log_tail(lines)

    def last_line(self) -> str:
        """The last line the process printed (its exit code where it printed none)."""
        return self.service.locust.last_line()


class LoadProcesses:
    """The Locust processes shared by the runs inside :func:`load_processes`, one per kind."""

    def __init__(self, share: bool = True) -> None:
        self.share = share
        """False: every run starts a process of its own (how runs went before processes stayed up)."""
        self.workdir = Path(tempfile.mkdtemp(prefix="tritongen-locust-"))
        self._services: dict[ProcessKind, LoadService] = {}
        self.started = 0
        """Processes started so far for shared runs (a dead one's replacement counts too)."""
        self.runs = 0
        """Runs started in shared processes."""

    def start_run(self, args: LocustArgs, log_path: Path) -> LocustProcess | ServiceRun:
        """Start ``args``'s run in a process of its kind (a fresh one if it has none, or it died).

        A run that needs a process of its own gets a new one, logging to ``log_path``.

        Raises:
            ServerError: Locust could not be started, or did not take the run.
        """
        kind = kind_of(args) if self.share else None
        if kind is None:
            return LocustProcess(args, log_path)
        service = self._services.get(kind)
        if service is not None and not service.exited():
            try:
                service.begin(args)
                self.runs += 1
                return ServiceRun(service)
            except ServerError:  # it no longer takes runs: a fresh one does
                pass
        if service is not None:
            del self._services[kind]
            service.close()
        service = self._start(kind)
        service.begin(args)
        self.runs += 1
        return ServiceRun(service)

    def _start(self, kind: ProcessKind) -> LoadService:
        """A new process of ``kind``, ready for its first run.

        Raises:
            ServerError: it exited or was not ready in time.
        """
        self.started += 1
        service = LoadService(kind, self.workdir / f"locust-{kind.processes}p-{self.started}.log")
        try:
            service.wait_ready()
        except (ServerError, KeyboardInterrupt):
            service.close()
            raise
        self._services[kind] = service
        return service

    def service_pids(self) -> list[int]:
        """The process IDs of the processes up now."""
        return [s.locust.process.pid for s in self._services.values() if not s.exited()]

    def close(self) -> None:
        """Stop every process (their runs end with them)."""
        for service in self._services.values():
            service.close()
        self._services.clear()
        shutil.rmtree(self.workdir, ignore_errors=True)


StartedRun = LocustProcess | ServiceRun
"""A run's Locust: a process of its own, or a run in one that stays up."""


def start_locust(args: LocustArgs, log_path: Path) -> StartedRun:
    """Start ``args``'s run: in the processes of the innermost ``load_processes()``, else in its own.

    Raises:
        ServerError: Locust could not be started, or did not take the run.
    """
    pool = _ACTIVE.get()
    return LocustProcess(args, log_path) if pool is None else pool.start_run(args, log_path)


def shares_process(args: LocustArgs) -> bool:
    """Whether ``args``'s run would go to a process that stays up (``start_locust``)."""
    pool = _ACTIVE.get()
    return pool is not None and pool.share and kind_of(args) is not None


_ACTIVE: ContextVar[LoadProcesses | None] = ContextVar("tritongen_load_processes", default=None)


@contextlib.contextmanager
def load_processes(share: bool = True) -> Iterator[LoadProcesses]:
    """The Locust processes the runs inside share, stopped at the end (or on Ctrl-C).

    Inside another ``load_processes()``, the outer one's processes (so a compare's rounds and
    each load test in them share one set). ``share=False``: each run inside starts a Locust of
    its own, as runs did before (``bench/run_overhead.py`` measures both).
    """
    active = _ACTIVE.get()
    if active is not None:
        yield active
        return
    pool = LoadProcesses(share)
    token = _ACTIVE.set(pool)
    try:
        yield pool
    finally:
        _ACTIVE.reset(token)
        pool.close()


def active_processes() -> LoadProcesses | None:
    """The processes of the innermost ``load_processes()`` (None outside one)."""
    return _ACTIVE.get()
