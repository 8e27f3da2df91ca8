"""Supervise the bundled ``tritonserver``: start, wait until ready, report failures, stop cleanly."""

from __future__ import annotations

import contextlib
import dataclasses
import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from tritongen.client.repository import ADMIN_HEADER
from tritongen.errors import LoadTimeoutError, ModelLoadError, RepositoryError, ServerError
from tritongen.server.affinity import machine_cores, pinned_start
from tritongen.server.distribution import STUB_NAME, TritonDistribution, find_distribution
from tritongen.server.leftovers import SHM_DIR, SHM_PREFIX, reclaim_leftovers
from tritongen.server.loading import default_load_timeout_s, still_loading
from tritongen.server.ports import check_port_free, pick_free_ports
from tritongen.server.process import kill_group, reap_process_group, stop_with_parent, tail_lines
from tritongen.server.settings import RESTRICTED_APIS, ServerOptions, ServerSettings, is_loopback
from tritongen.triton.repository import model_count

if TYPE_CHECKING:
    from typing import Unpack

EXIT_TIMEOUT_S = 10

__all__ = [
    "RESTRICTED_APIS", "SHM_DIR", "SHM_PREFIX", "LocalTritonServer", "ModelState", "ServerOptions",
    "ServerSettings", "is_loopback", "reclaim_leftovers",
]  # fmt: skip
"""The server's names, and those of its settings and leftovers that callers take from here."""


@dataclass(frozen=True)
class ModelState:
    """One entry of the repository index."""

    name: str
    version: str
    state: str
    reason: str

    @property
    def short_reason(self) -> str:
        """The server's reason without the Python traceback it appends."""
        return self.reason.split("\n\nAt:")[0].strip().replace("\n", " ")


class LocalTritonServer:
    """The embedded Triton server on this machine, as a context manager.

    ``with LocalTritonServer(repo, http_port=0) as server:`` starts ``tritonserver`` from
    the nvidia-pytriton wheel in explicit model-control mode (so models can be reloaded
    live), waits until every requested model is loaded (all by default, none with
    ``models=[]``), and stops it on exit: SIGINT,
    then SIGKILL of its process group after ``stop_timeout_s``. Port 0 picks a free port.
    The server dies with its parent process and leaves no ``/dev/shm`` region behind.
    """

    def __init__(
        self, repo: Path, settings: ServerSettings | None = None, **options: Unpack[ServerOptions]
    ) -> None:
        """Serve ``repo`` with ``settings`` (the defaults if none), each keyword option replacing one."""
        self.settings = dataclasses.replace(settings or ServerSettings(), **options)
        settings = self.settings
        self.repo = repo
        self.host = settings.host
        self.requested_ports = {
            "http": settings.http_port,
            "grpc": settings.grpc_port,
            "metrics": settings.metrics_port,
        }
        self.models = list(settings.models) if settings.models is not None else None
        self.load_timeout_s = (
            settings.load_timeout_s
            if settings.load_timeout_s is not None
            else default_load_timeout_s(model_count(repo, self.models))
        )
        self.stop_timeout_s = settings.stop_timeout_s
        self.extra_args = list(settings.extra_args or [])
        self.require_all_models = settings.require_all_models
        self.load_failures: dict[str, str] = {}
        """Models that did not load, with the server's reason (when not every model is required)."""
        self.admin_key = settings.admin_key
        self.shm_prefix = f"{SHM_PREFIX}{os.getpid()}_{uuid.uuid4().hex[:8]}_"
        self._log_path = settings.log_path
        self._workdir: Path | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._keep_log = False
        self.http_port = self.grpc_port = self.metrics_port = 0

    # -- public surface -------------------------------------------------------------

    @property
    def http_url(self) -> str:
        """``host:port`` of the HTTP/REST endpoint (what tritonclient takes)."""
        return f"{self.host}:{self.http_port}"

    @property
    def grpc_url(self) -> str:
        """``host:port`` of the gRPC endpoint."""
        return f"{self.host}:{self.grpc_port}"

    @property
    def metrics_url(self) -> str:
        """Full URL of the Prometheus metrics endpoint."""
        return f"http://{self.host}:{self.metrics_port}/metrics"

    @property
    def pid(self) -> int | None:
        """Process id of ``tritonserver`` while it runs."""
        return self._process.pid if self._process is not None else None

    @property
    def log_path(self) -> Path:
        """Where the server's log is written."""
        if self._log_path is None:
            raise ServerError("the server has not been started", "call start() first")
        return self._log_path

    @property
    def trace_file(self) -> Path:
        """Where the server writes its request traces (``PATH.0``, ``PATH.1``, … once tracing is on)."""
        if self._workdir is None:
            raise ServerError("the server is not running", "start it first")
        return self._workdir / "trace" / "trace.json"

    def log_tail(self, lines: int = 40) -> list[str]:
        """The last ``lines`` lines of the server log."""
        return tail_lines(self.log_path, lines)

    def __enter__(self) -> LocalTritonServer:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def start(self) -> None:
        """Start the server and wait until it is ready.

        Raises:
            MissingDependencyError: the bundled server or the stub for this Python is missing.
            RepositoryError: the repository does not exist.
            ServerError: a port is in use, the server exited, or it was not ready in time.
            ModelLoadError: a requested model failed to load (``reasons`` holds why).
        """
        if self._process is not None:
            raise ServerError("the server is already running", "stop it before starting it again")
        if not self.repo.is_dir():
            raise RepositoryError(
                f"model repository {self.repo} does not exist", "run `tritongen convert` first"
            )
        dist = find_distribution()
        reclaim_leftovers()
        self._resolve_ports()
        self._workdir = Path(tempfile.mkdtemp(prefix="tritongen-server-"))
        # a log of its own for each start: a restart keeps the log of the run before it
        self._log_path = self.settings.log_path or self._workdir / "tritonserver.log"
        try:
            (self._workdir / "trace").mkdir()
            backends = self._backend_dir(dist, self._workdir)
        except OSError as e:
            self._cleanup_files()
            raise ServerError(f"cannot prepare the backend directory: {e}", "check /tmp is writable") from e
        argv = self._argv(dist, backends)
        env = self._environment(dist)
        try:
            with self._log_path.open("wb") as log:
                self._process = subprocess.Popen(
                    argv,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    env=env,
                    start_new_session=True,
                    # every core this process may use, not the mask of the calling thread, which a
                    # library's thread pool (a model verified here before serving) may have pinned
                    preexec_fn=pinned_start(machine_cores(), stop_with_parent),
                )
        except OSError as e:
            self._cleanup_files()
            raise ServerError(f"cannot start {dist.binary}: {e.strerror}", "reinstall nvidia-pytriton") from e
        threading.Thread(target=reap_process_group, args=(self._process,), daemon=True).start()
        try:
            self._wait_ready()
        except BaseException:
            self._keep_log = True  # the log explains the failure; leave it for the user
            self.stop()
            raise

    def stop(self) -> None:
        """Stop the server: SIGINT, wait, then SIGKILL its whole process group; clean up."""
        process = self._process
        if process is not None:
            if process.poll() is not None:
                self._keep_log = True  # it exited on its own: its log says why
            else:
                with contextlib.suppress(ProcessLookupError):
                    process.send_signal(signal.SIGINT)
                # A second Ctrl-C only skips the wait: the group is killed below either way.
                with contextlib.suppress(subprocess.TimeoutExpired, KeyboardInterrupt):
                    process.wait(timeout=self.stop_timeout_s)
            # Python-backend stubs share the server's process group; leave none behind.
            kill_group(process)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=5)
            self._process = None
        self._cleanup_files()

    def is_running(self) -> bool:
        """Whether the server process is alive."""
        return self._process is not None and self._process.poll() is None

    @property
    def exit_code(self) -> int | None:
        """How the server process ended (negative: the killing signal); None while it runs or once stopped."""
        return self._process.poll() if self._process is not None else None

    def repository_index(self) -> list[ModelState]:
        """Every model in the repository with its state and, for failures, the reason."""
        entries = self._request("POST", "/v2/repository/index", {})
        return [
            ModelState(
                name=str(e.get("name", "")),
                version=str(e.get("version", "")),
                state=str(e.get("state", "")),
                reason=str(e.get("reason", "")),
            )
            for e in entries
        ]

    def ready_models(self) -> list[str]:
        """Names of the models that are READY."""
        return sorted({m.name for m in self.repository_index() if m.state == "READY"})

    def load_model(self, name: str, config: dict[str, Any] | None = None) -> None:
        """Load (or reload) ``name``; with ``config`` the server uses it instead of config.pbtxt.

        Raises:
            ModelLoadError: the server refused; the previous version (if any) stays loaded.
            LoadTimeoutError: the load did not finish within ``load_timeout_s`` (the server goes on with it).
        """
        body: dict[str, Any] = {}
        if config is not None:
            body = {"parameters": {"config": json.dumps(config)}}
        try:
            self._request("POST", f"/v2/repository/models/{name}/load", body, self.load_timeout_s)
        except ServerError as e:
            if _timed_out(e):
                raise LoadTimeoutError(
                    [name],
                    f"model {name} not ready within {self.load_timeout_s:.0f} s, still loading",
                    f"raise --load-timeout if it only needs longer; the server's log is {self._log_path}",
                ) from e
            raise ModelLoadError({name: e.message}, "fix the model or its config") from e

    def unload_model(self, name: str) -> None:
        """Unload ``name``."""
        self._request("POST", f"/v2/repository/models/{name}/unload", {})

    # -- internals ------------------------------------------------------------------

    def _resolve_ports(self) -> None:
        wanted = dict(self.requested_ports)
        zeros = [role for role, port in wanted.items() if port == 0]
        fixed = {role: port for role, port in wanted.items() if port != 0}
        if len(set(fixed.values())) != len(fixed):
            raise ServerError(f"the ports {fixed} must differ", "give HTTP, gRPC and metrics distinct ports")
        for role, port in fixed.items():
            check_port_free(self.host, port, role, f"--{role}-port")
        free = [p for p in pick_free_ports(self.host, len(zeros) + 3) if p not in fixed.values()]
        for role in zeros:
            wanted[role] = free.pop(0)
        self.http_port, self.grpc_port, self.metrics_port = wanted["http"], wanted["grpc"], wanted["metrics"]

    def _backend_dir(self, dist: TritonDistribution, workdir: Path) -> Path:
        backends = workdir / "backends"
        python = backends / "python"
        python.mkdir(parents=True)
        for item in dist.python_backend.iterdir():
            if item.is_file():
                (python / item.name).symlink_to(item)
        (python / STUB_NAME).symlink_to(dist.stub)
        return backends

    def _argv(self, dist: TritonDistribution, backends: Path) -> list[str]:
        argv = [
            str(dist.binary),
            f"--model-repository={self.repo.resolve()}",
            f"--backend-directory={backends}",
            f"--http-address={self.host}",
            f"--http-port={self.http_port}",
            f"--grpc-address={self.host}",
            f"--grpc-port={self.grpc_port}",
            f"--metrics-address={self.host}",
            f"--metrics-port={self.metrics_port}",
            "--allow-metrics=true",
            "--metrics-config=summary_latencies=true",
            "--model-control-mode=explicit",
            # Keep serving the models that load; failures are reported per model.
            "--exit-on-error=false",
            "--strict-readiness=false",
            # Bounds the graceful stop on SIGTERM, which is what the server gets when its parent dies.
            f"--exit-timeout-secs={EXIT_TIMEOUT_S}",
            f"--backend-config=python,shm-region-prefix-name={self.shm_prefix}",
        ]
        for model in self.models if self.models is not None else ["*"]:
            argv.append(f"--load-model={model}")
        if not any(arg.startswith(("--trace-config", "--trace-file")) for arg in self.extra_args):
            # The trace file can be named only at launch: one in the server's directory, tracing
            # off until a run turns it on through the trace API (loadtest --server-trace).
            argv += [f"--trace-config=triton,file={self.trace_file}", "--trace-config=level=OFF"]
        if self.admin_key is not None:
            restriction = f"{RESTRICTED_APIS}:{ADMIN_HEADER}={self.admin_key}"
            argv += [f"--http-restricted-api={restriction}", f"--grpc-restricted-protocol={restriction}"]
        return argv + self.extra_args

    def _environment(self, dist: TritonDistribution) -> dict[str, str]:
        env = dict(os.environ)
        # The stub runs in isolated mode and finds packages through the python3 on PATH.
        env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
        env["LD_LIBRARY_PATH"] = os.pathsep.join(
            [p for p in (dist.library_path(), env.get("LD_LIBRARY_PATH", "")) if p]
        )
        env.pop("PYTHONPATH", None)
        return env

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.load_timeout_s
        while True:
            process = self._process
            if process is None or process.poll() is not None:
                raise ServerError(
                    self._exit_message(), "see the server log for details: " + str(self.log_path)
                )
            if self._live():
                break
            if time.monotonic() > deadline:
                raise self._load_timeout()
            time.sleep(0.1)
        # In explicit mode the start-up loads finish before the endpoints open.
        self._check_models()

    def _check_models(self) -> None:
        if self.models == []:
            return  # started empty on purpose: models are loaded later through the API
        index = self.repository_index()
        by_name = {m.name: m for m in index}
        if self.models:
            missing = [name for name in self.models if name not in by_name]
            if missing:
                raise ModelLoadError(
                    {name: "not in the model repository" for name in missing},
                    f"choose from: {', '.join(sorted(by_name)) or 'no models found'}",
                )
        wanted = self.models or list(by_name)
        failed = {
            name: by_name[name].short_reason or by_name[name].state or self._poll_failure(name)
            for name in wanted
            if by_name[name].state != "READY"
        }
        if failed and self.require_all_models:
            raise ModelLoadError(failed, "fix those models, or serve the others with --models")
        self.load_failures = failed
        if not wanted:
            raise RepositoryError(f"{self.repo} holds no models", "run `tritongen convert` first")

    def _load_timeout(self) -> LoadTimeoutError:
        """The start outlasted ``load_timeout_s``: the models its log shows still loading, and the log."""
        pending = still_loading(self.log_tail(1_000_000))
        within = f"within {self.load_timeout_s:.0f} s"
        what = (
            f"model(s) not ready {within}, still loading: {', '.join(pending)}"
            if pending
            else f"the Triton server was not live {within}"
        )
        hint = f"raise --load-timeout if they only need longer; the server's log is kept at {self.log_path}"
        return LoadTimeoutError(pending, what, hint)

    def _poll_failure(self, name: str) -> str:
        """Why the server could not read the directory of ``name`` (listed without a state): its log says."""
        prefix = f"Poll failed for model directory '{name}': "
        for line in reversed(self.log_tail(400)):
            if prefix in line:
                return line.split(prefix, 1)[1].strip().rstrip('"').replace("\\n", " ")
        return "the server could not read its directory (see the server log)"

    def _live(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://{self.http_url}/v2/health/live", timeout=1) as response:
                return bool(response.status == 200)
        except (urllib.error.URLError, OSError, http.client.HTTPException):
            return False

    def _request(self, method: str, path: str, body: dict[str, Any], timeout_s: float = 300) -> Any:
        data = json.dumps(body).encode()
        headers = {"Content-Type": "application/json"}
        if self.admin_key is not None:
            headers[ADMIN_HEADER] = self.admin_key
        url = f"http://{self.http_url}{path}"
        request = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as response:
                payload = response.read()
        except urllib.error.HTTPError as e:
            try:
                message = json.loads(e.read()).get("error", str(e))
            except ValueError:
                message = str(e)
            raise ServerError(message.split("\n\nAt:")[0], "see the server log") from e
        except (urllib.error.URLError, OSError, http.client.HTTPException) as e:  # down, or cut mid-answer
            raise ServerError(
                f"cannot reach the Triton server at {self.http_url}: {e}", "is it running?"
            ) from e
        return json.loads(payload) if payload else None

    def _exit_message(self) -> str:
        code = self._process.returncode if self._process is not None else None
        errors = [line.strip() for line in self.log_tail(200) if line.startswith("E")]
        interesting = [line for line in errors if "NVML" not in line and "CudaDriverHelper" not in line]
        last = interesting[-1] if interesting else (self.log_tail(1) or ["no log output"])[-1].strip()
        return f"the Triton server exited with code {code}: {last[:300]}"

    def _cleanup_files(self) -> None:
        for region in SHM_DIR.glob(f"{self.shm_prefix}*"):
            with contextlib.suppress(OSError):
                region.unlink()
        if self._workdir is not None:
            if self._keep_log:
                shutil.rmtree(self._workdir / "backends", ignore_errors=True)
            else:
                shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None


def _timed_out(error: ServerError) -> bool:
    """Whether a request failed because its answer took longer than its timeout."""
    cause = error.__cause__
    reason = cause.reason if isinstance(cause, urllib.error.URLError) else cause
    return isinstance(reason, TimeoutError)
