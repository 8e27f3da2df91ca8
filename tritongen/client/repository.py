"""A server's model repository API: which models it has, load and unload them, its version."""

from __future__ import annotations

import http.client
import time
from typing import Any

from tritongen.client.address import normalise_url
from tritongen.client.endpoint import closed_connection
from tritongen.errors import ModelLoadError, ServerError

UNLOAD_TIMEOUT_S = 60.0
ADMIN_HEADER = "tritongen-admin-key"
"""The header carrying the key of a server whose repository API is restricted (``serve --host``)."""
RESTRICTED_HINT = (
    "this server restricts its repository API: pass --admin-key with the key `tritongen serve` printed"
)


class RepositoryControl:
    """Load and unload models on a server in explicit model-control mode (HTTP)."""

    def __init__(self, url: str, timeout_s: float = 600.0, admin_key: str | None = None) -> None:
        """Connect to ``host:port`` (HTTP); loads may take ``timeout_s``.

        ``admin_key`` is sent to a server whose repository API is restricted.
        """
        import tritonclient.http as httpclient

        self.url = normalise_url(url)
        self.timeout_s = timeout_s
        self.headers = {ADMIN_HEADER: admin_key} if admin_key else None
        self.client = httpclient.InferenceServerClient(
            self.url, connection_timeout=10, network_timeout=timeout_s
        )

    def _call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        from tritonclient.utils import InferenceServerException

        try:
            return fn(*args, **kwargs)
        except InferenceServerException as e:
            message = (e.message() or str(e)).split(chr(10))[0]
            raise ServerError(f"{what}: {message}", _hint(message, "see the server log")) from e
        except http.client.HTTPException as e:  # geventhttpclient's HTTPConnectionClosed among them
            raise closed_connection(what, self.url, str(e)) from e
        except (ConnectionError, OSError) as e:
            raise ServerError(f"cannot reach Triton at {self.url}: {e}", "is the server running?") from e

    def index(self) -> dict[str, str]:
        """Every model in the repository and its state (``READY``, ``UNAVAILABLE``, …)."""
        entries = self._call("repository index", self.client.get_model_repository_index, headers=self.headers)
        states: dict[str, str] = {}
        for entry in entries:
            name = str(entry.get("name", ""))
            state = str(entry.get("state", "") or "UNAVAILABLE")
            # Several versions: the model is ready if any is.
            if states.get(name) != "READY":
                states[name] = state
        return states

    def load(
        self, model: str, config_json: str | None = None, refused_hint: str = "see the server log"
    ) -> None:
        """Load ``model`` (with ``config_json`` instead of its config.pbtxt) once the server has it loaded.

        Raises:
            ModelLoadError: the server refused to load it (the reason is the server's).
            ServerError: the server cannot be reached.
        """
        from tritonclient.utils import InferenceServerException

        try:
            if config_json is None:
                self.client.load_model(model, headers=self.headers)
            else:
                self.client.load_model(model, headers=self.headers, config=config_json)
        except InferenceServerException as e:
            reason = (e.message() or str(e)).split("\n\nAt:")[0].replace("\n", " ").strip()
            if _restricted(reason):
                raise ServerError(f"loading '{model}': {reason}", RESTRICTED_HINT) from e
            raise ModelLoadError({model: reason}, refused_hint) from e
        except http.client.HTTPException as e:
            raise closed_connection(f"loading '{model}'", self.url, str(e)) from e
        except TimeoutError as e:  # the server took the request but its load never ended
            raise ServerError(
                f"no answer to loading '{model}' within {self.timeout_s:.0f} s", "see the server log"
            ) from e
        except (ConnectionError, OSError) as e:
            raise ServerError(f"cannot reach Triton at {self.url}: {e}", "is the server running?") from e

    def unload(self, model: str, timeout_s: float = UNLOAD_TIMEOUT_S) -> None:
        """Unload ``model`` and wait until it is gone (its requests drained, its processes ended).

        A model still ``READY`` (not ``UNLOADING``) half-way through the wait is asked once more:
        an unload that met a load of the same model in flight is ended by that load.
        """
        self._call(f"unloading '{model}'", self.client.unload_model, model, headers=self.headers)
        start = time.monotonic()
        asked_again = False
        state = "READY"
        while time.monotonic() - start < timeout_s:
            state = self.index().get(model, "UNAVAILABLE")
            if state != "UNLOADING" and not self._ready(model):
                return
            if state == "READY" and not asked_again and time.monotonic() - start > timeout_s / 2:
                self._call(f"unloading '{model}'", self.client.unload_model, model, headers=self.headers)
                asked_again = True
            time.sleep(0.1)
        why = "a request to it has not finished" if state == "UNLOADING" else "it is still READY"
        raise ServerError(f"'{model}' did not unload within {timeout_s:.0f} s ({why})", "see the server log")

    def _ready(self, model: str) -> bool:
        try:
            return bool(self.client.is_model_ready(model))
        except Exception:  # an unknown or unloaded model is simply not ready
            return False

    def server_version(self) -> str | None:
        """The server's version string, e.g. ``2.51.0``."""
        try:
            metadata = self._call("server metadata", self.client.get_server_metadata)
        except ServerError:
            return None
        version = metadata.get("version") if isinstance(metadata, dict) else None
        return str(version) if version else None

    def close(self) -> None:
        """Close the connection."""
        self.client.close()


def _restricted(message: str) -> bool:
    return "restricted" in message.lower()


def _hint(message: str, default: str) -> str:
    return RESTRICTED_HINT if _restricted(message) else default
