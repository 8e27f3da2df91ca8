"""The vLLM tier: the real vLLM OpenAI-compatible server, started once for the session.

Its model is the tiny random-weight Llama of :mod:`tritongen.examples.tiny_llama`, served as ``tiny-llama``
with an API key; every test here runs ``tritongen loadtest --api openai-*`` against it.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from tritongen.examples.tiny_llama import write_tiny_llama

from support.vllm_server import SERVED_MODEL, VllmServer, vllm_server


@pytest.fixture(scope="session")
def tiny_llama(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The model's directory (weights, tokenizer with a chat template)."""
    return write_tiny_llama(tmp_path_factory.mktemp("tiny-llama") / "model")


@pytest.fixture(scope="session")
def vllm(tiny_llama: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[VllmServer]:
    """The one vLLM server of the session (3–5 minutes to start here), stopped by its process id."""
    key = "sk-" + secrets.token_hex(16)
    with vllm_server(tiny_llama, tmp_path_factory.mktemp("vllm"), SERVED_MODEL, key) as server:
        yield server


@pytest.fixture(scope="session")
def plain_vllm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VllmServer]:
    """A second server (about 30 s to start): the same Llama, its tokenizer without a chat template."""
    model = write_tiny_llama(tmp_path_factory.mktemp("plain-llama") / "model", chat_template=False)
    key = "sk-" + secrets.token_hex(16)
    with vllm_server(model, tmp_path_factory.mktemp("plain-vllm"), SERVED_MODEL, key) as server:
        yield server
