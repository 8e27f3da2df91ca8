"""The engine settings of a language model (``convert`` of a Hugging Face folder)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from tritongen.cli.options.settings import settings
from tritongen.convert.llm.settings import EngineOptions

PANEL = "LLM engine (a Hugging Face model folder)"


@dataclass(frozen=True)
class LlmEngineFlags:
    """vLLM's and TensorRT-LLM's settings; each unset one is derived from the model's config."""

    max_model_len: Annotated[
        int | None,
        typer.Option(
            "--max-model-len",
            min=1,
            help="Longest sequence (prompt + output) in tokens. Default: the model's positions, on the "
            "local target cut to what the KV cache holds.",
            show_default=False,
            rich_help_panel=PANEL,
        ),
    ] = None
    max_num_seqs: Annotated[
        int | None,
        typer.Option(
            "--max-num-seqs",
            min=1,
            help="Sequences batched together (TensorRT-LLM's max batch size). Default: 16 local, 256 "
            "container.",
            show_default=False,
            rich_help_panel=PANEL,
        ),
    ] = None
    max_num_batched_tokens: Annotated[
        int | None,
        typer.Option(
            "--max-num-batched-tokens",
            min=1,
            help="Tokens one engine step takes (TensorRT-LLM's max_num_tokens). Default: 2048 local, 8192 "
            "container, at least --max-model-len without chunked prefill.",
            show_default=False,
            rich_help_panel=PANEL,
        ),
    ] = None
    chunked_prefill: Annotated[
        bool | None,
        typer.Option(
            "--chunked-prefill/--no-chunked-prefill",
            help="Split long prompts over steps (TensorRT-LLM's chunked context). Default: on.",
            show_default=False,
            rich_help_panel=PANEL,
        ),
    ] = None
    prefix_caching: Annotated[
        bool | None,
        typer.Option(
            "--prefix-caching/--no-prefix-caching",
            help="Reuse the KV cache of prompts' shared prefixes (TensorRT-LLM's KV cache reuse). "
            "Default: on.",
            show_default=False,
            rich_help_panel=PANEL,
        ),
    ] = None
    kv_cache_fraction: Annotated[
        float | None,
        typer.Option(
            "--kv-cache-fraction",
            help="Share of the GPU's memory the engine takes (container target). Default: 0.9.",
            show_default=False,
            rich_help_panel=PANEL,
        ),
    ] = None
    kv_cache_gib: Annotated[
        float | None,
        typer.Option(
            "--kv-cache-gib",
            help="The KV cache's size in GiB, instead of a share. Default: 1 on the local target (CPU).",
            show_default=False,
            rich_help_panel=PANEL,
        ),
    ] = None
    vllm_env: Annotated[
        Path | None,
        typer.Option(
            "--vllm-env",
            help="The environment the local vLLM model runs in on the embedded server (numpy 1, vLLM). "
            "Default: $TRITONGEN_VLLM_ENV, else .venv-vllm-triton (made by make vllm-env).",
            show_default=False,
            rich_help_panel=PANEL,
        ),
    ] = None

    def options(self) -> EngineOptions:
        """The settings asked for."""
        return settings(EngineOptions, self)

    def given(self) -> list[str]:
        """The flags given, by name."""
        named = self.options().given()
        return [*named, "--vllm-env"] if self.vllm_env is not None else named
