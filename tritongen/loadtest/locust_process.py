"""Run ``locust`` headless as a subprocess (it is never imported here: gevent patches everything)."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Protocol

from tritongen.errors import MissingDependencyError, ServerError
from tritongen.io.loadgen_shared import OPTIONS
from tritongen.server.affinity import machine_cores, pinned_start
from tritongen.server.ports import pick_free_ports
from tritongen.server.process import die_with_parent, kill_group, tail_lines

WEB_HOST = "127.0.0.1"
"""Where Locust's web UI listens (``--web``): this machine only."""


LOAD_GENERATOR_PACKAGE = "tritonload"
"""The locustfile's package, in the folder beside it (``loadtests/tritonload/``)."""


def locustfile_path() -> Path:
    """The locustfile shipped with tritongen (its package ``tritonload`` lies beside it)."""
    return Path(str(resources.files("tritongen.loadtests").joinpath("locustfile.py")))


def load_generator_files() -> dict[str, str]:
    """The load generator as it runs from its folder: each file's path in the folder, and its text.

    The locustfile and every module of its package (``tritonload/<module>.py``): what a copy of
    the folder elsewhere (a ConfigMap, a container) must hold for ``locust -f locustfile.py``.
    """
    folder = locustfile_path().parent
    modules = sorted((folder / LOAD_GENERATOR_PACKAGE).glob("*.py"))
    return {
        path.relative_to(folder).as_posix(): path.read_text(encoding="utf-8")
        for path in [folder / "locustfile.py", *modules]
    }


def locust_binary() -> Path:
    """The ``locust`` script of this environment.

    Raises:
        MissingDependencyError: Locust is not installed beside this Python.
    """
    path = Path(sys.executable).with_name("locust")
    if not path.exists():
        raise MissingDependencyError(
            "the locust command is not installed in this environment", "run `make install`"
        )
    return path


ALWAYS_GIVEN = frozenset(
    [
        *("model", "protocol", "inputs", "window", "t0", "results"),
        *("max-inflight", "seed", "timeout", "metrics-url"),
    ]
)
"""``--triton-*`` options the command line names even at their default (the rest only when set)."""
DEFAULTS = {option.name: str(option.default) for option in OPTIONS}
"""Every ``--triton-*`` option's default, as the command line writes it."""


@dataclass(frozen=True)
class LocustArgs:
    """Options of one Locust run."""

    host: str
    model: str
    protocol: str
    users: int
    processes: int
    run_time_s: int
    window_s: float
    t0: float
    results: Path
    inputs: Path | None
    """The requests the load processes read (None: the load's kind sends no data of its own)."""
    user_rate: float = 0.0
    arrival: str = "constant"
    arrival_cv: float | None = None
    """``gamma``: the CV of the gaps between sends."""
    max_inflight: int = 1024
    seed: int = 0
    timeout_s: float = 30.0
    """A request without its (final) response after this long is a ``timeout`` error."""
    kind: str = "auto"
    """The load's kind (``tensor``, ``sequence`` …; ``auto``: the older options decide)."""
    kind_options: dict[str, str] = field(default_factory=dict)
    """The kind's own ``--triton-*`` options by name (``streaming``, ``shm-prefix`` …)."""
    master_args: tuple[str, ...] = ()
    """A master whose workers connect from elsewhere (``--master --expect-workers N ...``), instead
    of ``processes`` forked here."""
    web_port: int | None = None
    """Locust's web UI on ``WEB_HOST`` at this port, the test started at once (None: headless)."""
    cpus: frozenset[int] | None = None
    """The cores Locust and its forked workers run on (``--cpus load=…``; None: any)."""
    llm: tuple[str, ...] = ()
    model_version: str = ""
    """The model version requests go to (empty: the server's choice)."""
    """An LLM load's ``--triton-llm-*`` options (empty for other loads)."""
    report: bool = True
    """Whether the master writes its report as the test ends (tritongen's own runs need none)."""
    trace_tag: str = ""
    schedule: Path | None = None
    """An open loop's schedule to replay (a load shape's sends), instead of its arrival process."""
    """``--server-trace``: each request carries an id with this tag, its times written beside ``results``."""

    def argv(self) -> list[str]:
        """The command line."""
        return [str(locust_binary()), "-f", str(locustfile_path()), *self.options()]

    def options(self) -> list[str]:
        """The command line's options after the locustfile (no Locust install needed to build them)."""
        argv = [*self.ui_options(), *self.process_options(), "--host", self.host]
        argv += ["-u", str(self.users), "-r", str(self.users), "--run-time", f"{self.run_time_s}s"]
        for name, value in self.run_options().items():
            if name in ALWAYS_GIVEN or value != DEFAULTS[name]:
                argv += [f"--triton-{name}", value]
        return argv

    def process_options(self) -> list[str]:
        """The options a Locust process keeps for its life: logging, stop timeout, its workers."""
        argv = ["--stop-timeout", "2", "--loglevel", "WARNING", "--only-summary"]
        if self.master_args:
            argv += list(self.master_args)
        elif self.processes > 1:
            argv += forked_workers(self.processes)
        return argv

    def run_options(self) -> dict[str, str]:
        """Every ``--triton-*`` option of this run by name (``model``, ``user-rate`` ...), defaults included.

        A Locust that stays up across runs (:mod:`.load_processes`) gets all of them with each
        run, so that none is left over from the run before.
        """
        values = dict(DEFAULTS)
        values.update(
            {
                "model": self.model,
                "model-version": self.model_version,
                "protocol": self.protocol,
                "inputs": "" if self.inputs is None else str(self.inputs),
                "window": repr(self.window_s),
                "t0": repr(self.t0),
                "results": str(self.results),
                "max-inflight": str(self.max_inflight),
                "seed": str(self.seed),
                "timeout": repr(self.timeout_s),
                # tritongen samples the metrics endpoint itself; the master's own report goes without
                "metrics-url": "none",
                "report": "1" if self.report else "0",
                "kind": self.kind,
                "trace-tag": self.trace_tag,
            }
        )
        if self.user_rate > 0:
            values.update({"user-rate": repr(self.user_rate), "arrival": self.arrival})
            if self.schedule is not None:
                values["schedule"] = str(self.schedule)
            if self.arrival_cv is not None:
                values["arrival-cv"] = repr(self.arrival_cv)
        unknown = sorted(set(self.kind_options) - set(DEFAULTS))
        if unknown:
            raise ValueError(f"not --triton-* options: {unknown}")
        values.update(self.kind_options)
        return values

    def ui_options(self) -> list[str]:
        """Headless, or the web UI on ``WEB_HOST`` with the test started at once and quit when done."""
        if self.web_port is None:
            return ["--headless"]
        return ["--autostart", "--autoquit", "0", "--web-host", WEB_HOST, "--web-port", str(self.web_port)]

    def web_url(self) -> str | None:
        """The address of the web UI (None when headless)."""
        return None if self.web_port is None else f"http://{WEB_HOST}:{self.web_port}"


class LocustCommand(Protocol):
    """What a ``LocustProcess`` runs: a Locust command line (``LocustArgs``, a worker's, ...)."""

    def argv(self) -> list[str]:
        """The command line."""
        ...


class LocustProcess:
    """A running Locust (headless master plus forked workers, or a worker), in a process group of its own."""

    def __init__(self, args: LocustCommand, log_path: Path, env: dict[str, str] | None = None) -> None:
        self.args = args
        self.log_path = log_path
        argv = args.argv()
        self._log = log_path.open("wb")
        try:
            self.process = subprocess.Popen(
                argv,
                stdout=self._log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                # the load cores, else every core of this process: not the mask of the calling
                # thread, which a library's thread pool may have pinned to one core
                preexec_fn=pinned_start(getattr(args, "cpus", None) or machine_cores(), die_with_parent),
                env=env,
            )
        except OSError as e:
            self._log.close()
            raise ServerError(f"cannot start Locust: {e.strerror}", "reinstall with `make install`") from e

    def exited(self) -> bool:
        """Whether Locust has ended."""
        return self.process.poll() is not None

    def stop(self, timeout_s: float = 10.0) -> None:
        """Ask Locust to quit (SIGTERM to the master), then SIGKILL the whole group.

        A second Ctrl-C while waiting only skips the wait: the group is killed either way.
        """
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired, KeyboardInterrupt):
                self.process.wait(timeout=timeout_s)
        kill_group(self.process)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=5)
        self._log.close()

    def log_tail(self, lines: int = 20) -> list[str]:
        """Last lines Locust printed."""
        return [line.rstrip() for line in tail_lines(self.log_path, lines)]

    def last_line(self) -> str:
        """The last line Locust printed (its exit code where it printed none)."""
        lines = [line for line in self.log_tail() if line.strip()]
        return lines[-1] if lines else f"code {self.process.returncode}"


def forked_workers(processes: int) -> list[str]:
    """Options of a master with ``processes`` workers forked on this machine.

    The workers reach their master on a free port, not Locust's fixed 5557, which another run
    with ``--processes`` on this machine may hold, on loopback only (no other machine joins).
    """
    port = str(pick_free_ports("127.0.0.1", 1)[0])
    bind = ["--master-bind-host", "127.0.0.1", "--master-bind-port", port]  # not every interface
    return ["--processes", str(processes), *bind, "--master-port", port]


def locust_options(args: LocustArgs) -> list[str]:
    """The options of ``args.argv()`` without the program and its ``-f`` locustfile.

    For a Locust that runs elsewhere (a container) with its own copy of the locustfile.
    """
    return args.options()
