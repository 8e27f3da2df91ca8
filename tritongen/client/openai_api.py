"""What an OpenAI-compatible server (vLLM, TGI, NIM, Triton's frontend) serves, checked before a load test.

``GET /v1/models`` lists the served models; vLLM adds each one's ``max_model_len``, the
longest prompt plus output it takes. The API key, where one is needed, is read from the
environment variable the user names (``--api-key-env``) and sent as a bearer token; it is
never printed, logged or written anywhere.
"""

from __future__ import annotations

import http.client
import json
import os
from dataclasses import dataclass
from typing import Any

from tritongen.client.address import ServerAddress
from tritongen.errors import ConfigError, ServerError


@dataclass(frozen=True)
class ServedModel:
    """One model an OpenAI-compatible server lists."""

    id: str
    max_model_len: int | None = None
    """Prompt plus output tokens the server takes (None: it does not say)."""


def api_key_from_env(name: str | None) -> str | None:
    """The key in the environment variable ``name`` (None without a name).

    Raises:
        ConfigError: the variable is not set or empty (its value, if any, is never shown).
    """
    if name is None:
        return None
    value = os.environ.get(name, "")
    if not value.strip():
        raise ConfigError(f"--api-key-env {name}: that environment variable is not set", f"export {name}=…")
    return value.strip()


def served_models(
    address: ServerAddress, api_key: str | None = None, timeout_s: float = 10.0
) -> list[ServedModel]:
    """The models the server at ``address`` lists at ``/v1/models``.

    Raises:
        ServerError: nothing answers there, or what answers is not an OpenAI-compatible server.
    """
    url = address.base_url
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    connection = http.client.HTTPConnection(address.host, address.port, timeout=timeout_s)
    try:
        connection.request("GET", f"{address.path}/v1/models", headers=headers)
        response = connection.getresponse()
        status, body = response.status, response.read()
    except (OSError, http.client.HTTPException) as e:  # a timeout is an OSError
        raise ServerError(
            f"cannot reach {url}: {getattr(e, 'strerror', None) or e}", "start the server, or check --url"
        ) from e
    finally:
        connection.close()
    return _models(url, status, body)


def _models(url: str, status: int, body: bytes) -> list[ServedModel]:
    """The ``data`` of a ``/v1/models`` answer."""
    hint = "give --url the base URL of an OpenAI-compatible server (vLLM, TGI, NIM, Triton's OpenAI frontend)"
    if status in (401, 403):
        raise ServerError(
            f"{url} refused the request (HTTP {status})", "pass the key with --api-key-env NAME"
        )
    try:
        document: Any = json.loads(body) if status == 200 else None
    except ValueError:
        document = None
    data = document.get("data") if isinstance(document, dict) else None
    if not isinstance(data, list):
        raise ServerError(
            f"{url} is not an OpenAI-compatible server: GET /v1/models answered HTTP {status}", hint
        )
    models = []
    for entry in data:
        if isinstance(entry, dict) and isinstance(entry.get("id"), str):
            length = entry.get("max_model_len")
            models.append(ServedModel(entry["id"], length if isinstance(length, int) else None))
    return models


def check_served(models: list[ServedModel], model: str, longest_request: int | None = None) -> ServedModel:
    """The served model ``model``, checked to take requests of ``longest_request`` tokens (prompt + output).

    Raises:
        ConfigError: the server does not serve it, or its ``max_model_len`` is below the longest request.
    """
    found = next((m for m in models if m.id == model), None)
    if found is None:
        names = ", ".join(m.id for m in models) or "none"
        raise ConfigError(f"the server does not serve '{model}' (it serves: {names})", "give one of those")
    if (
        longest_request is not None
        and found.max_model_len is not None
        and longest_request > found.max_model_len
    ):
        raise ConfigError(
            f"requests of up to {longest_request} tokens (prompt and output) exceed '{model}''s "
            f"max_model_len {found.max_model_len}",
            "lower --input-tokens or --output-tokens",
        )
    return found


@dataclass(frozen=True)
class ProbeAnswer:
    """What one short request (``max_tokens`` 1, not streamed) told: the prompt's tokens, server-counted."""

    prompt_tokens: int | None
    """``usage.prompt_tokens``: the prompt with the chat template's tokens (None: no usage given)."""


def error_message(body: bytes) -> str:
    """The first line of an OpenAI error's message (``{"error": {"message": …}}`` or ``{"message": …}``)."""
    try:
        document: Any = json.loads(body)
    except ValueError:
        return body.decode("utf-8", errors="replace").strip().splitlines()[0] if body.strip() else ""
    inner = document.get("error") if isinstance(document, dict) else None
    source = inner if isinstance(inner, dict) else document
    message = source.get("message") if isinstance(source, dict) else None
    return str(message).strip().splitlines()[0] if message else ""


def no_chat_template(status: int, message: str) -> bool:
    """Whether an answer says the model has no chat template (vLLM answers HTTP 400 then)."""
    return status == 400 and "chat template" in message.lower()


def probe_request(
    address: ServerAddress, path: str, body: dict[str, Any], api_key: str | None = None
) -> ProbeAnswer:
    """Send one request of a load test's kind, cut to one output token, and read its usage.

    Raises:
        ConfigError: the model has no chat template (a chat request to a completions-only model),
            or the server refuses the request as too long or malformed.
        ServerError: the server cannot be reached, refuses the key or fails.
    """
    url = address.base_url
    headers = {
        "Content-Type": "application/json",
        **({"Authorization": f"Bearer {api_key}"} if api_key else {}),
    }
    probe = {key: value for key, value in body.items() if key not in ("stream", "stream_options")}
    probe |= {"max_tokens": 1, "min_tokens": 1}
    connection = http.client.HTTPConnection(address.host, address.port, timeout=120)
    try:
        connection.request("POST", address.path + path, json.dumps(probe).encode(), headers)
        response = connection.getresponse()
        status, answer = response.status, response.read()
    except (OSError, http.client.HTTPException) as e:
        raise ServerError(f"a first request to {url}{path} failed: {e}", "check the server's log") from e
    finally:
        connection.close()
    return _probe_answer(url, path, status, answer)


def _probe_answer(url: str, path: str, status: int, body: bytes) -> ProbeAnswer:
    """The probe's usage, or the one-line error its answer means."""
    message = error_message(body)
    if no_chat_template(status, message):
        raise ConfigError(
            f"the model at {url} has no chat template: {path} answered HTTP 400 ({message})",
            "load it with --api openai-completions, or serve the model with a chat template",
        )
    if status in (401, 403):
        raise ServerError(
            f"{url} refused the request (HTTP {status})", "pass the key with --api-key-env NAME"
        )
    if status == 400:
        raise ConfigError(f"{url}{path} refused a request of this test: HTTP 400 ({message})")
    if status != 200:
        raise ServerError(f"a first request to {url}{path} failed: HTTP {status} ({message})")
    try:
        document: Any = json.loads(body)
    except ValueError as e:
        raise ServerError(f"{url}{path} answered with something that is not JSON") from e
    usage = document.get("usage") if isinstance(document, dict) else None
    tokens = usage.get("prompt_tokens") if isinstance(usage, dict) else None
    return ProbeAnswer(tokens if isinstance(tokens, int) else None)


class OpenAiHealth:
    """Whether an OpenAI-compatible server still answers and serves the model, during a load test."""

    def __init__(self, address: ServerAddress, api_key: str | None = None, timeout_s: float = 2.0) -> None:
        self.address, self.api_key, self.timeout_s = address, api_key, timeout_s
        self._served: list[ServedModel] = []

    def is_live(self) -> bool:
        """Whether ``/v1/models`` answers with a model list."""
        try:
            self._served = served_models(self.address, self.api_key, self.timeout_s)
        except ServerError:
            return False
        return True

    def is_model_ready(self, model: str) -> bool:
        """Whether the last model list (of :meth:`is_live`) holds ``model``."""
        return any(m.id == model for m in self._served)

    def close(self) -> None:
        """Nothing held between calls."""
