"""``tritongen serve`` of a repository holding the local vLLM model, as a user starts it.

The command runs in its own session on free ports; the fixture waits until the model is
ready (its engine takes 1–5 minutes to start here), and stops it by its process id: SIGINT
(the command stops the server and its stubs), then SIGKILL of its group.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from support.network import free_port

START_TIMEOUT_S = 900.0


@dataclass(frozen=True)
class ServedLlm:
    """A running ``tritongen serve``: its ports, the model it serves, how long it took to be ready."""

    process: subprocess.Popen[bytes]
    repo: Path
    model: str
    http_port: int
    grpc_port: int
    metrics_port: int
    log: Path
    ready_s: float

    @property
    def http(self) -> str:
        """HOST:PORT of the HTTP endpoint."""
        return f"127.0.0.1:{self.http_port}"

    def get(self, path: str, port: int | None = None) -> tuple[int, str]:
        """Status and body of a GET on the server."""
        url = f"http://127.0.0.1:{port or self.http_port}{path}"
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def post(self, path: str, body: dict[str, Any], timeout_s: float = 120) -> tuple[int, dict[str, Any]]:
        """Status and JSON answer of a POST on the server."""
        request = urllib.request.Request(
            f"http://{self.http}{path}", data=json.dumps(body).encode(), method="POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as response:
                return response.status, json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"{}")

    def log_tail(self, lines: int = 30) -> str:
        """The end of what the command printed."""
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


@contextlib.contextmanager
def served_llm(repo: Path, model: str, work: Path) -> Iterator[ServedLlm]:
    """``tritongen serve REPO`` until the block ends, once ``model`` is ready."""
    ports = free_port(), free_port(), free_port()
    log = work / "serve.log"
    argv = [
        sys.executable, "-m", "tritongen", "serve", str(repo), "--http-port", str(ports[0]),
        "--grpc-port", str(ports[1]), "--metrics-port", str(ports[2]),
    ]  # fmt: skip
    started = time.monotonic()
    with log.open("wb") as out:
        environment = {**os.environ, "COLUMNS": "200"}
        process = subprocess.Popen(
            argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env=environment
        )
    served = ServedLlm(process, repo, model, *ports, log, 0.0)
    try:
        _wait_ready(served)
        yield ServedLlm(process, repo, model, *ports, log, time.monotonic() - started)
    finally:
        _stop(process)


def _wait_ready(served: ServedLlm) -> None:
    """Until the model is ready; a command that exits, or a start too long, fails with its output."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if served.process.poll() is not None:
            code = served.process.returncode
            raise RuntimeError(f"tritongen serve exited with {code}:\n{served.log_tail()}")
        with contextlib.suppress(OSError):
            if served.get(f"/v2/models/{served.model}/ready")[0] == 200:
                return
        time.sleep(2)
    raise RuntimeError(f"the model was not ready within {START_TIMEOUT_S:.0f} s:\n{served.log_tail()}")


def _stop(process: subprocess.Popen[bytes]) -> None:
    """SIGINT to the command (by its id): it stops the server; SIGKILL to its group after 60 s."""
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(process.pid, signal.SIGINT)
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)
