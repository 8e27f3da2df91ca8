"""The OpenAI kind: prompts to an OpenAI-compatible server (vLLM, TGI, NIM, Triton's OpenAI frontend).

``--api openai-chat`` or ``--api openai-completions`` with ``--url`` the server's base URL.
Before the load the server must list the model, the key must be accepted and the longest
request must fit the model (:mod:`tritongen.loadtest.llm.openai_server`). The server is no
Triton: it is watched through ``/v1/models``, it has no statistics API, and its metrics are
vLLM's (``/metrics`` on its port), summed up for each run (``llm_server``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from tritongen.client.endpoint import TritonEndpoint
from tritongen.client.inputs import ModelInterface
from tritongen.client.openai_api import OpenAiHealth, api_key_from_env
from tritongen.errors import ConfigError
from tritongen.loadtest.kinds.base import Health, LoadKind, ModelConfig, Requests, RunView
from tritongen.loadtest.llm.openai_server import prepare_openai_requests
from tritongen.loadtest.llm.runs import (
    LLM_REQUESTS_FILE,
    add_llm_figures,
    llm_options,
    llm_server_notes,
)
from tritongen.loadtest.shapes.trace_requests import replayed_prompts
from tritongen.metrics.vllm import parse_vllm_metrics, vllm_figures

if TYPE_CHECKING:
    from tritongen.loadtest.result import RunResult
    from tritongen.loadtest.spec import LoadSpec


class OpenAiKind(LoadKind):
    """Prompts to an OpenAI-compatible server, timed token by token."""

    name = "openai"
    option = "--api openai-chat or --api openai-completions"
    statistics = False

    def given(self, spec: LoadSpec) -> str | None:
        """``--api openai-…``, when given."""
        return f"--api {spec.llm.api}" if spec.llm is not None and spec.llm.openai else None

    def claims(self, spec: LoadSpec, config: ModelConfig) -> bool:
        """``--api openai-chat`` or ``--api openai-completions``."""
        del config
        return self.given(spec) is not None

    def prepare(
        self, spec: LoadSpec, endpoint: TritonEndpoint, config: ModelConfig, folder: Path
    ) -> Requests:
        """The prompts, checked against what the server serves.

        Raises:
            ServerError: the server cannot be reached, is not OpenAI-compatible or refuses the key.
            ConfigError: the model is not served, or the longest request does not fit it.
            SourceError: the prompts file cannot be read.
        """
        del endpoint, config  # the server is no Triton
        llm = spec.llm
        if llm is None:
            raise ConfigError("--load-kind openai needs --api", "e.g. --api openai-chat")
        path = folder / LLM_REQUESTS_FILE
        key = api_key_from_env(llm.api_key_env)
        replayed = replayed_prompts(spec.shape, llm.tokenizer, spec.seed)
        prepare_openai_requests(llm, spec.model, spec.address, path, key, spec.seed, replayed)
        interface = ModelInterface(spec.model, 0, (), ())
        return Requests(interface=interface, rows=1, path=path, options=llm_options(llm, path))

    def add_figures(self, result: RunResult, run: RunView) -> None:
        """The token figures, and the server's own (vLLM's metrics) over the measured span."""
        add_llm_figures(result, run.users)
        result.llm_server = vllm_figures(run.sampler.samples, *run.span)

    def notes(self, run: RunResult) -> list[str]:
        """The token figures in a line, and the server's (where its metrics were vLLM's)."""
        return llm_server_notes(run)

    def health(self, spec: LoadSpec) -> Health:
        """``/v1/models`` answers and lists the model."""
        key = api_key_from_env(spec.llm.api_key_env) if spec.llm is not None else None
        return OpenAiHealth(spec.address, key)

    def metrics_parser(self) -> Callable[[str], dict[str, float]]:
        """The server's ``/metrics``, read as vLLM's figures."""
        return parse_vllm_metrics


KIND = OpenAiKind()
