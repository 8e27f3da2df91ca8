"""One interface over tritonclient's HTTP and gRPC clients, with tritongen's errors."""

from __future__ import annotations

import http.client
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from tritongen.client.address import DEFAULT_PORTS as DEFAULT_PORTS  # where the CLI finds them
from tritongen.client.address import Protocol, ServerAddress, normalise_url
from tritongen.client.inputs import ModelInterface, interface_from_metadata
from tritongen.errors import ServerError

CLOSED_SIGNS = ("socket closed", "stream removed", "connection reset", "connection closed")
"""What gRPC says when the server drops a call it was answering."""


@dataclass(frozen=True)
class InferResult:
    """Outputs of one request and its client-side latency."""

    outputs: dict[str, npt.NDArray[Any]]
    latency_us: float


class TimedOut(ServerError):
    """A call without its answer within the endpoint's timeout (the server may be up: see ``infer``)."""


def closed_connection(what: str, url: str, detail: str) -> ServerError:
    """The server at ``url`` dropped the connection in the middle of ``what``: it exited or crashed."""
    return ServerError(
        f"{what}: Triton at {url} closed the connection ({detail.rstrip('.') or 'closed'}): "
        "the server may have exited or crashed",
        "see the server log",
    )


class TritonEndpoint:
    """A Triton server reached over HTTP or gRPC."""

    def __init__(self, url: str, protocol: Protocol = "http", timeout_s: float = 60.0) -> None:
        if protocol not in ("http", "grpc"):
            raise ServerError(f"unknown protocol {protocol!r}", "use --protocol http or --protocol grpc")
        self.url = normalise_url(url)
        self.protocol = protocol
        self.timeout_s = timeout_s
        self._client: Any = None

    @classmethod
    def at(cls, address: ServerAddress, timeout_s: float = 60.0) -> TritonEndpoint:
        """The server at ``address``, over its protocol."""
        return cls(address.url, address.protocol, timeout_s)

    def _connect(self) -> Any:
        if self._client is None:
            if self.protocol == "http":
                import tritonclient.http as httpclient

                self._client = httpclient.InferenceServerClient(
                    self.url, connection_timeout=self.timeout_s, network_timeout=self.timeout_s
                )
            else:
                import tritonclient.grpc as grpcclient

                self._client = grpcclient.InferenceServerClient(self.url)
        return self._client

    def _call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        from tritonclient.utils import InferenceServerException

        try:
            return fn(*args, **kwargs)
        except InferenceServerException as e:
            message = (e.message() or str(e)).split("\n\nAt:")[0]
            if "deadline" in f"{e.status()} {message}".lower():  # gRPC's deadline: the timeout
                raise TimedOut(f"{what}: no answer within {self.timeout_s:g} s", "see the server log") from e
            if any(sign in message.lower() for sign in CLOSED_SIGNS):
                raise closed_connection(what, self.url, message) from e
            raise ServerError(f"{what}: {message}", self._hint(message)) from e
        except http.client.HTTPException as e:  # geventhttpclient's HTTPConnectionClosed among them
            raise closed_connection(what, self.url, str(e) or type(e).__name__) from e
        except TimeoutError as e:  # the socket's: connected, and no answer in time
            raise TimedOut(f"{what}: no answer within {self.timeout_s:g} s", "see the server log") from e
        except (ConnectionError, OSError) as e:
            raise ServerError(
                f"cannot reach Triton at {self.url} ({self.protocol}): {e}",
                "start it with `tritongen serve REPO` or pass --url",
            ) from e

    def _hint(self, message: str) -> str:
        lowered = message.lower()
        if "unavailable" in lowered or "failed to connect" in lowered or "connection refused" in lowered:
            return "start it with `tritongen serve REPO` or pass --url"
        if "unknown model" in lowered or "not found" in lowered or "is not ready" in lowered:
            return "check the model name; `tritongen serve` lists the ready models"
        return "see the server log"

    def _timeout_kwargs(self) -> dict[str, float]:
        """GRPC calls take their deadline per call; HTTP has it on the client."""
        return {"client_timeout": self.timeout_s} if self.protocol == "grpc" else {}

    def is_live(self) -> bool:
        """Whether the server answers its liveness probe (within the endpoint's timeout)."""
        try:
            return bool(self._call("liveness", self._connect().is_server_live, **self._timeout_kwargs()))
        except ServerError:
            return False

    def is_model_ready(self, model: str) -> bool:
        """Whether ``model`` is loaded and ready (False when it is not, or the server does not answer)."""
        try:
            return bool(
                self._call(
                    f"model '{model}'", self._connect().is_model_ready, model, **self._timeout_kwargs()
                )
            )
        except ServerError:
            return False

    def interface(self, model: str) -> ModelInterface:
        """Inputs, outputs and batching of ``model`` as the server reports them."""
        client = self._connect()
        if self.protocol == "http":
            metadata = self._call(f"model '{model}'", client.get_model_metadata, model)
            config = self._call(f"model '{model}'", client.get_model_config, model)
        else:
            metadata = self._call(f"model '{model}'", client.get_model_metadata, model, as_json=True)
            config = self._call(f"model '{model}'", client.get_model_config, model, as_json=True)["config"]
            for tensor in metadata["inputs"]:
                tensor["shape"] = [int(d) for d in tensor["shape"]]
        return interface_from_metadata(metadata, config)

    def statistics(self, model: str) -> dict[str, Any]:
        """The statistics API entry of ``model`` (cumulative counters, as JSON)."""
        client = self._connect()
        if self.protocol == "http":
            stats = self._call(f"statistics of '{model}'", client.get_inference_statistics, model)
        else:
            stats = self._call(
                f"statistics of '{model}'", client.get_inference_statistics, model, as_json=True
            )
        entries = stats.get("model_stats", [])
        if not entries:
            raise ServerError(f"the server has no statistics for '{model}'", "is the model loaded?")
        return dict(entries[0])

    def all_statistics(self) -> list[dict[str, Any]]:
        """Every ``model_stats`` entry the server has (one per loaded model version), in one call."""
        client = self._connect()
        if self.protocol == "http":
            stats = self._call("statistics", client.get_inference_statistics)
        else:
            stats = self._call("statistics", client.get_inference_statistics, as_json=True)
        return [dict(entry) for entry in stats.get("model_stats", [])]

    def model_config(self, model: str) -> dict[str, Any]:
        """The config the server runs for ``model`` (model-config API, protobuf field names)."""
        client = self._connect()
        if self.protocol == "http":
            config: dict[str, Any] = self._call(f"model '{model}'", client.get_model_config, model)
            return config
        found: dict[str, Any] = self._call(f"model '{model}'", client.get_model_config, model, as_json=True)
        return dict(found.get("config", {}))

    def require_ready(self, models: tuple[str, ...], what: str) -> None:
        """Refuse a model the server does not have ready, naming the ones it has (``what``: whose models).

        Raises:
            ServerError: a model is not ready, or the server does not answer.
        """
        for model in models:
            if self.is_model_ready(model):
                continue
            if not self.is_live():
                raise ServerError(
                    f"cannot reach Triton at {self.url} ({self.protocol})",
                    "start it with `tritongen serve REPO` or pass --url",
                )
            try:
                ready = self.ready_models()
            except ServerError:  # its repository index is closed
                ready = []
            raise ServerError(
                f"model '{model}' of {what} is not ready on {self.url} (ready: {', '.join(ready) or 'none'})",
                "load it, or name only models the server has ready",
            )

    def ready_models(self) -> list[str]:
        """Names of the models the server has READY (repository index), sorted.

        Raises:
            ServerError: the server does not answer or refuses its repository index.
        """
        client = self._connect()
        if self.protocol == "http":
            entries = self._call("repository index", client.get_model_repository_index)
        else:
            entries = self._call("repository index", client.get_model_repository_index, as_json=True)
            entries = entries.get("models", [])
        return sorted({str(e.get("name", "")) for e in entries if e.get("state") == "READY"})

    def ready_versions(self, model: str) -> list[str]:
        """The versions of ``model`` the server has READY (repository index), as strings.

        Raises:
            ServerError: the server does not answer or refuses its repository index.
        """
        client = self._connect()
        if self.protocol == "http":
            entries = self._call("repository index", client.get_model_repository_index)
        else:
            entries = self._call("repository index", client.get_model_repository_index, as_json=True)
            entries = entries.get("models", [])
        return sorted(
            str(e.get("version", ""))
            for e in entries
            if e.get("name") == model and e.get("state") == "READY" and e.get("version")
        )

    def output_tensors(self, model: str) -> list[dict[str, Any]]:
        """The outputs of ``model``'s metadata: ``name``, ``datatype`` and ``shape`` (-1: a dynamic dim)."""
        client = self._connect()
        if self.protocol == "http":
            metadata = self._call(f"model '{model}'", client.get_model_metadata, model)
        else:
            metadata = self._call(f"model '{model}'", client.get_model_metadata, model, as_json=True)
        return [
            {"name": t["name"], "datatype": t["datatype"], "shape": [int(d) for d in t.get("shape", [])]}
            for t in metadata.get("outputs", [])
        ]

    def shared_memory_regions(self) -> list[str]:
        """Names of the system shared-memory regions registered with the server.

        Raises:
            ServerError: the server does not answer or refuses its shared-memory API.
        """
        client = self._connect()
        if self.protocol == "http":
            regions = self._call("system shared memory", client.get_system_shared_memory_status)
            return sorted(str(r.get("name", "")) for r in regions)
        found = self._call("system shared memory", client.get_system_shared_memory_status, as_json=True)
        return sorted(found.get("regions", {}))

    def register_shared_memory(self, name: str, key: str, byte_size: int) -> None:
        """Register the system shared-memory region ``key`` (e.g. ``/NAME``) with the server as ``name``.

        The server opens and maps the region itself: it must see this host's ``/dev/shm``.

        Raises:
            ServerError: the server does not answer, refuses the API, or cannot map the region.
        """
        client = self._connect()
        self._call("system shared memory", client.register_system_shared_memory, name, key, byte_size)

    def unregister_shared_memory(self, name: str) -> None:
        """Unregister the system shared-memory region ``name`` from the server.

        Raises:
            ServerError: the server does not answer or refuses.
        """
        self._call("system shared memory", self._connect().unregister_system_shared_memory, name)

    def infer(self, model: str, inputs: dict[str, npt.NDArray[Any]], outputs: tuple[str, ...]) -> InferResult:
        """Send one request; return the outputs and the client-side latency."""
        from tritonclient.utils import np_to_triton_dtype

        if self.protocol == "http":
            import tritonclient.http as module
        else:
            import tritonclient.grpc as module

        request_inputs = []
        for name, array in inputs.items():
            datatype = "BYTES" if array.dtype == np.object_ else np_to_triton_dtype(array.dtype)
            tensor = module.InferInput(name, list(array.shape), datatype)
            if self.protocol == "http":
                tensor.set_data_from_numpy(array, binary_data=True)
            else:
                tensor.set_data_from_numpy(array)
            request_inputs.append(tensor)
        requested = [module.InferRequestedOutput(name) for name in outputs]
        client = self._connect()
        what = f"inference on '{model}'"
        start = time.perf_counter_ns()
        try:
            result = self._call(
                what, client.infer, model, request_inputs, outputs=requested, **self._timeout_kwargs()
            )
        except TimedOut as e:
            raise self._unanswered(what, model) from e
        latency_us = (time.perf_counter_ns() - start) / 1000
        return InferResult(outputs={name: result.as_numpy(name) for name in outputs}, latency_us=latency_us)

    def _unanswered(self, what: str, model: str) -> ServerError:
        """A request without an answer in time, said as what it is: the server down, or the model hung."""
        probe = TritonEndpoint(self.url, self.protocol, timeout_s=min(5.0, self.timeout_s))
        try:
            live, ready = probe.is_live(), probe.is_model_ready(model)
        finally:
            probe.close()
        if not live:
            return ServerError(
                f"{what}: no answer within {self.timeout_s:g} s, and Triton at {self.url} does not answer "
                "its health check either",
                "see the server log; is the server running?",
            )
        state = "ready" if ready else "not ready"
        return ServerError(
            f"{what}: model '{model}' did not answer within {self.timeout_s:g} s, while the server is live "
            f"and the model {state} (the model is hung or slower than the timeout)",
            "see the server log, or give it longer with --timeout",
        )

    def close(self) -> None:
        """Close the connection."""
        if self._client is not None:
            self._client.close()
            self._client = None
