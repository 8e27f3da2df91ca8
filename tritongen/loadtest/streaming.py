"""Streaming (decoupled) models: how to tell one, where it can be loaded, and its derived figures.

A model whose config has ``model_transaction_policy { decoupled: true }`` answers one
request with any number of responses and then a final flag. Only gRPC streams carry that,
so the load generator drives such a model over ``ModelStreamInfer`` and records, besides
each request's total time (send to final response), ``first_response``,
``between_responses`` and the counters ``responses`` (responses with outputs, counted as
they arrive) and ``request_responses`` (those of the requests that finished).
"""

from __future__ import annotations

from typing import Any

from tritongen.errors import ConfigError
from tritongen.loadtest.result import RunResult

FIRST_RESPONSE = "first_response"
BETWEEN_RESPONSES = "between_responses"
RESPONSES = "responses"
REQUEST_RESPONSES = "request_responses"


def is_decoupled(config: dict[str, Any]) -> bool:
    """Whether a model config (the server's JSON form) makes the model decoupled."""
    policy = config.get("model_transaction_policy") or {}
    return bool(policy.get("decoupled", False))


def check_streaming(model: str, protocol: str, config: dict[str, Any]) -> bool:
    """Whether ``model`` (its server config ``config``) streams; a streaming model over HTTP is refused.

    Raises:
        ConfigError: the model is decoupled and ``protocol`` is not gRPC.
    """
    if not is_decoupled(config):
        return False
    if protocol != "grpc":
        raise ConfigError(
            f"'{model}' is a decoupled (streaming) model: its responses need a gRPC stream, "
            f"which {protocol.upper()} cannot carry",
            "load it with --protocol grpc",
        )
    return True


def refuse_decoupled(model: str, config: dict[str, Any]) -> None:
    """Refuse a decoupled model for a load of one response per request.

    Raises:
        ConfigError: the model is decoupled.
    """
    if is_decoupled(config):
        raise ConfigError(
            f"'{model}' is a decoupled (streaming) model: its responses come over a gRPC stream",
            "load it with --load-kind stream (or auto) and --protocol grpc",
        )


def add_streaming_figures(result: RunResult) -> None:
    """Mark ``result`` as a streaming run and derive responses/s and responses per request."""
    result.streaming = True
    responses = result.counts.get(RESPONSES, 0)
    result.responses_per_s = responses / result.duration_s if result.duration_s else 0.0
    finished = result.requests - result.errors
    if finished > 0:
        result.responses_per_request = result.counts.get(REQUEST_RESPONSES, 0) / finished
