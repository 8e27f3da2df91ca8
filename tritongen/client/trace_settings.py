"""A server's trace settings (``v2/trace/setting``): read them, turn timestamps tracing on, put them back.

Since Triton 24.05 the trace file can only be chosen when the server starts
(``--trace-config triton,file=PATH``; the embedded server always names one, with tracing
off); the API sets the level, the sampling rate, the count and how often the file is written.
A log frequency of 0 writes only at shutdown, so tracing here always sets one: the server then
writes ``PATH.0``, ``PATH.1``, … (see :mod:`tritongen.triton.trace`).
"""

from __future__ import annotations

import contextlib
import http.client
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tritongen.client.address import normalise_url
from tritongen.client.repository import ADMIN_HEADER
from tritongen.errors import ServerError

LOG_FREQUENCY = 1000
"""Traces per file written while tracing (the server writes the rest when tracing is turned off)."""
TIMEOUT_S = 10.0
NO_TRACE_HINT = "run without --server-trace, or use a Triton with the trace API (23.05 or later)"


@dataclass(frozen=True)
class TraceSetting:
    """The server's global trace settings, as its API reports them."""

    level: tuple[str, ...]
    rate: int
    count: int
    log_frequency: int
    file: str | None
    mode: str | None

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> TraceSetting:
        """From the API's answer (its values are strings)."""
        return cls(
            level=tuple(str(level) for level in doc.get("trace_level", ["OFF"])),
            rate=int(doc.get("trace_rate", 1000)),
            count=int(doc.get("trace_count", -1)),
            log_frequency=int(doc.get("log_frequency", 0)),
            file=str(doc["trace_file"]) if doc.get("trace_file") else None,
            mode=str(doc["trace_mode"]) if doc.get("trace_mode") else None,
        )

    def update(self) -> dict[str, Any]:
        """What the API takes to set these settings again (the file is fixed at launch)."""
        return {
            "trace_level": list(self.level),
            "trace_rate": str(self.rate),
            "trace_count": str(self.count),
            "log_frequency": str(self.log_frequency),
        }


def _flat(answer: Any) -> Any:
    """The gRPC API's answer (``{"settings": {key: {"value": [...]}}}``) as the HTTP API's."""
    if not isinstance(answer, dict) or not isinstance(answer.get("settings"), dict):
        return answer
    flat = {}
    for key, entry in answer["settings"].items():
        values = entry.get("value", []) if isinstance(entry, dict) else []
        flat[key] = values if key == "trace_level" else (values[0] if values else None)
    return flat


class TraceControl:
    """The trace API of one server, over HTTP or gRPC."""

    def __init__(self, url: str, admin_key: str | None = None, protocol: str = "http") -> None:
        """Talk to the server at ``host:port`` (``admin_key`` for a server that restricts the trace API)."""
        self.url = normalise_url(url)
        self.headers = {ADMIN_HEADER: admin_key} if admin_key else None
        self.grpc = protocol == "grpc"
        if self.grpc:
            import tritonclient.grpc as grpcclient

            self.client: Any = grpcclient.InferenceServerClient(self.url)
        else:
            import tritonclient.http as httpclient

            self.client = httpclient.InferenceServerClient(
                self.url, connection_timeout=TIMEOUT_S, network_timeout=TIMEOUT_S
            )

    def _call(self, body: dict[str, Any] | None = None) -> TraceSetting:
        from tritonclient.utils import InferenceServerException

        extra: dict[str, Any] = {"as_json": True, "client_timeout": TIMEOUT_S} if self.grpc else {}
        try:
            if body is None:
                answer = _flat(self.client.get_trace_settings(headers=self.headers, **extra))
            else:
                answer = _flat(
                    self.client.update_trace_settings(settings=body, headers=self.headers, **extra)
                )
        except InferenceServerException as e:
            message = (e.message() or str(e)).split("\n")[0]
            raise ServerError(
                f"the server at {self.url} refused its trace settings: {message}", NO_TRACE_HINT
            ) from e
        except (http.client.HTTPException, ConnectionError, OSError) as e:
            raise ServerError(f"cannot reach Triton at {self.url}: {e}", "is the server running?") from e
        if not isinstance(answer, dict):
            raise ServerError(
                f"the server at {self.url} answered its trace settings with {answer!r}", NO_TRACE_HINT
            )
        return TraceSetting.from_json(answer)

    def close(self) -> None:
        """Close the connection."""
        self.client.close()

    def server_version(self) -> str | None:
        """The server's version (its metadata), None when it does not say."""
        try:
            extra: dict[str, Any] = {"as_json": True} if self.grpc else {}
            metadata = self.client.get_server_metadata(headers=self.headers, **extra)
        except Exception:  # the trace settings' own calls say what is wrong with the server
            return None
        version = metadata.get("version") if isinstance(metadata, dict) else None
        return str(version) if version else None

    def read(self) -> TraceSetting:
        """The server's trace settings now.

        Raises:
            ServerError: the server cannot be reached or has no trace API.
        """
        return self._call()

    def set(self, setting: dict[str, Any]) -> TraceSetting:
        """Change the settings named in ``setting`` (the API's keys); the settings after the change."""
        return self._call(setting)

    @contextlib.contextmanager
    def timestamps(self, rate: int) -> Iterator[Path]:
        """Trace the timestamps of one request in ``rate`` while the block runs; the trace file's path.

        The settings found are put back afterwards (tracing off again writes the traces left in
        memory). Refused, in one line, when the server names no trace file.

        Raises:
            ServerError: no trace API, no trace file, or the server cannot be reached.
        """
        before = self.read()
        if not before.file:
            raise ServerError(
                f"the server at {self.url} writes no trace file",
                "start it with --trace-config triton,file=PATH (the embedded server names one)",
            )
        self.set(
            {"trace_level": ["TIMESTAMPS"], "trace_rate": str(rate), "log_frequency": str(LOG_FREQUENCY)}
        )
        try:
            yield Path(before.file)
        finally:
            with contextlib.suppress(ServerError):  # a server gone: nothing to put back
                self.set({**before.update(), "trace_level": ["OFF"]})
                if before.level != ("OFF",):
                    self.set(before.update())
