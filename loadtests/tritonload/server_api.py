"""The Triton server's own APIs as the load generator calls them, over HTTP or gRPC.

Where the server is (``--host``), a model's metadata and max batch size, its statistics,
a gRPC stub; every call a short timeout. :func:`failure_text` says in a few words why a
call failed.
"""

from __future__ import annotations

import json
import urllib.request
from typing import Any, cast

from .payloads import ModelMeta

SERVER_TIMEOUT_S = 2.0
"""Timeout of each call to the statistics API or the metrics endpoint."""


def host_port(host: str, default_port: int) -> tuple[str, int]:
    """Host name and port of a ``--host`` value, with or without a scheme."""
    for scheme in ("http://", "https://", "grpc://"):
        if host.startswith(scheme):
            host = host[len(scheme) :]
    host = host.rstrip("/")
    name, _, port = host.rpartition(":")
    return (name, int(port)) if name else (host, default_port)


def interface_http(host: str, port: int, model: str) -> tuple[ModelMeta, int]:
    """The model's metadata and max batch size, over HTTP."""

    def get(path: str) -> Any:
        with urllib.request.urlopen(f"http://{host}:{port}{path}", timeout=30) as response:
            return json.loads(response.read())

    return get(f"/v2/models/{model}"), int(get(f"/v2/models/{model}/config").get("max_batch_size", 0))


def interface_grpc(stub: Any, model: str) -> tuple[ModelMeta, int]:
    """The model's metadata and max batch size, over gRPC."""
    from google.protobuf import json_format
    from tritonclient.grpc import service_pb2

    meta = json_format.MessageToDict(
        stub.ModelMetadata(service_pb2.ModelMetadataRequest(name=model)), preserving_proto_field_name=True
    )
    config = stub.ModelConfig(service_pb2.ModelConfigRequest(name=model)).config
    for tensor in meta["inputs"]:
        tensor["shape"] = [int(d) for d in tensor.get("shape", [])]
    return cast(ModelMeta, meta), int(config.max_batch_size)


def grpc_stub(host: str) -> tuple[Any, Any]:
    """A gRPC channel to the server (gevent-friendly) and its stub."""
    import grpc
    from grpc.experimental import gevent as grpc_gevent
    from tritonclient.grpc import service_pb2_grpc

    grpc_gevent.init_gevent()
    channel = grpc.insecure_channel("{}:{}".format(*host_port(host, 8001)))
    return channel, service_pb2_grpc.GRPCInferenceServiceStub(channel)


def server_get(host: str, path: str) -> Any:
    """GET a JSON document from the server's HTTP API."""
    name, port = host_port(host, 8000)
    with urllib.request.urlopen(f"http://{name}:{port}{path}", timeout=SERVER_TIMEOUT_S) as response:
        return json.loads(response.read())


def model_statistics(host: str, protocol: str, model: str) -> list[dict[str, Any]]:
    """The model's ``model_stats`` entries (one per version), over the load's own protocol."""
    if protocol != "grpc":
        return list(server_get(host, f"/v2/models/{model}/stats").get("model_stats", []))
    from google.protobuf import json_format
    from tritonclient.grpc import service_pb2

    channel, stub = grpc_stub(host)
    with channel:
        reply = stub.ModelStatistics(service_pb2.ModelStatisticsRequest(name=model), timeout=SERVER_TIMEOUT_S)
    return list(json_format.MessageToDict(reply, preserving_proto_field_name=True).get("model_stats", []))


def model_max_batch(host: str, protocol: str, model: str) -> int:
    """The model's ``max_batch_size``."""
    if protocol != "grpc":
        return int(server_get(host, f"/v2/models/{model}/config").get("max_batch_size", 0))
    from tritonclient.grpc import service_pb2

    channel, stub = grpc_stub(host)
    with channel:
        reply = stub.ModelConfig(service_pb2.ModelConfigRequest(name=model), timeout=SERVER_TIMEOUT_S)
    return int(reply.config.max_batch_size)


def failure_text(error: BaseException) -> str:
    """A failed call to the server in a few words."""
    from urllib.error import HTTPError

    if isinstance(error, HTTPError):
        return f"HTTP {error.code}"
    return str(getattr(error, "reason", None) or error) or type(error).__name__
