"""The OpenAI-compatible server check before an LLM load test, against real servers that are not one.

The embedded Triton answers HTTP, but not ``/v1/models``: it must be told apart from an
OpenAI-compatible server in one line; a port where nothing listens cannot be reached. (The
OpenAI path against a real vLLM server is tested where its environment exists.)
"""

from __future__ import annotations

import pytest

from tritongen.client.address import ServerAddress
from tritongen.client.openai_api import (
    ServedModel,
    api_key_from_env,
    check_served,
    served_models,
)
from tritongen.errors import ConfigError, ServerError
from tritongen.server.local import LocalTritonServer

from support.network import free_port

pytestmark = pytest.mark.slow


def test_triton_is_not_an_openai_compatible_server(triton_server: LocalTritonServer) -> None:
    with pytest.raises(ServerError) as raised:
        served_models(ServerAddress.openai(triton_server.http_url))
    text = str(raised.value)
    assert "is not an OpenAI-compatible server: GET /v1/models answered HTTP" in text and "\n" not in text


def test_nothing_listening_cannot_be_reached() -> None:
    with pytest.raises(ServerError, match="cannot reach"):
        served_models(ServerAddress.openai(f"127.0.0.1:{free_port()}"), timeout_s=2)


def test_served_models_are_checked() -> None:
    models = [ServedModel("tiny", 256), ServedModel("other")]
    assert check_served(models, "tiny", 200).id == "tiny"
    assert check_served(models, "other", 10_000).id == "other"  # no length given: not checked
    with pytest.raises(ConfigError, match=r"does not serve 'big' \(it serves: tiny, other\)"):
        check_served(models, "big")
    with pytest.raises(ConfigError, match="exceed 'tiny''s max_model_len 256"):
        check_served(models, "tiny", 300)


def test_the_key_comes_from_the_environment_and_is_never_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRITONGEN_TEST_KEY", "sk-secret-value")
    assert api_key_from_env("TRITONGEN_TEST_KEY") == "sk-secret-value"
    assert api_key_from_env(None) is None
    monkeypatch.setenv("TRITONGEN_TEST_KEY", " ")
    with pytest.raises(ConfigError) as raised:
        api_key_from_env("TRITONGEN_TEST_KEY")
    assert "TRITONGEN_TEST_KEY: that environment variable is not set" in str(raised.value)
