"""The Triton LLM kind: prompts to a text model on Triton, over its generate endpoint or gRPC streams.

``--api triton-generate`` (HTTP, ``/v2/models/M/generate`` or ``generate_stream``) or
``--api triton-grpc`` (a decoupled model over gRPC streams): the model takes ``text_input``
and answers ``text_output``, the convention of Triton's LLM backends. The requests are the
prompts, written as JSON lines (:mod:`tritongen.loadtest.llm.load`); each run adds its token
figures (TTFT, ITL, TPOT, tokens/s, goodput). A model running vLLM's engine inside Triton
publishes vLLM's figures on Triton's metrics endpoint: they are read beside Triton's
(``llm_server``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from tritongen.client.endpoint import TritonEndpoint
from tritongen.errors import ConfigError
from tritongen.loadtest.kinds.base import LoadKind, ModelConfig, Requests, RunView
from tritongen.loadtest.llm.load import prepare_llm_requests
from tritongen.loadtest.llm.runs import (
    LLM_REQUESTS_FILE,
    add_llm_figures,
    llm_options,
    llm_server_notes,
)
from tritongen.loadtest.shapes.trace_requests import replayed_prompts
from tritongen.metrics.vllm import parse_triton_and_vllm_metrics, vllm_figures

if TYPE_CHECKING:
    from tritongen.loadtest.result import RunResult
    from tritongen.loadtest.spec import LoadSpec


class TritonLlmKind(LoadKind):
    """Prompts to a text model on Triton, timed token by token."""

    name = "triton-llm"
    option = "--api triton-generate or --api triton-grpc"

    def given(self, spec: LoadSpec) -> str | None:
        """``--api triton-…``, when given."""
        return f"--api {spec.llm.api}" if spec.llm is not None and not spec.llm.openai else None

    def claims(self, spec: LoadSpec, config: ModelConfig) -> bool:
        """``--api triton-generate`` or ``--api triton-grpc``."""
        del config
        return self.given(spec) is not None

    def prepare(
        self, spec: LoadSpec, endpoint: TritonEndpoint, config: ModelConfig, folder: Path
    ) -> Requests:
        """The prompts, for a model that takes ``text_input``.

        Raises:
            ConfigError: the model takes no ``text_input``, or the prompts cannot be made.
            SourceError: the prompts file cannot be read.
        """
        del config  # the model's inputs say what it takes
        llm = spec.llm
        if llm is None:
            raise ConfigError("--load-kind triton-llm needs --api", "e.g. --api triton-generate")
        interface = endpoint.interface(spec.model)
        names = {tensor.name for tensor in interface.inputs}
        if "text_input" not in names:
            raise ConfigError(
                f"'{spec.model}' takes no text_input (its inputs: {', '.join(sorted(names))}): "
                f"--api {llm.api} loads a text model",
                "give a model with the text_input/text_output convention of Triton's LLM backends",
            )
        path = folder / LLM_REQUESTS_FILE
        replayed = replayed_prompts(spec.shape, llm.tokenizer, spec.seed)
        prepare_llm_requests(llm, spec.model, path, spec.seed, replayed)
        return Requests(interface=interface, rows=1, path=path, options=llm_options(llm, path))

    def add_figures(self, result: RunResult, run: RunView) -> None:
        """The token figures, and the engine's where the model publishes vLLM's."""
        add_llm_figures(result, run.users)
        result.llm_server = vllm_figures(run.sampler.samples, *run.span)

    def notes(self, run: RunResult) -> list[str]:
        """The token figures in a line, and the engine's (where the model published vLLM's)."""
        return llm_server_notes(run)

    def metrics_parser(self) -> Callable[[str], dict[str, float]]:
        """Triton's metrics endpoint, read for its own figures and for vLLM's (``vllm:*``)."""
        return parse_triton_and_vllm_metrics


KIND = TritonLlmKind()
