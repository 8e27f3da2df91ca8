"""An LLM load: its settings, the requests written for the load generator, and each run's token figures.

The requests are prepared once per test: the prompts (synthetic, of drawn token lengths, or a
file's), each turned into the request body of the API and written as JSON lines that every
load process sends in turn. Output lengths are held with ``max_tokens`` (and, for OpenAI
servers, ``min_tokens`` and ``ignore_eos``, which vLLM honours).

Each run's figures come from what the generator recorded: ``ttft_us`` (send to the first output
text), ``itl_us`` (every gap between two output events), ``tpot_us`` (the time after the first
token over the tokens after it) and ``e2e_us`` (send to the answer's end), each P50…P99.9, mean
and max; ``output_tokens_per_s`` (in total and per user), ``goodput_per_s`` (requests/s that met
every ``--slo`` limit), and where the output token counts came from (``usage``: the server's
report; ``tokenizer``: the answer's text counted with ``--tokenizer``, the server giving none;
``events``: one per output event, neither).
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tritongen.errors import ConfigError
from tritongen.io.loadgen_shared import token_source
from tritongen.loadtest.llm.prompts import Prompt, read_prompts, synthetic_prompts
from tritongen.loadtest.llm.spec import Api, Slo, TokenCount
from tritongen.loadtest.llm.tokenizer import load_tokenizer

SYNTHETIC_REQUESTS = 256
"""Synthetic prompts prepared per test (sent in turn, each process starting elsewhere)."""
AVAILABLE: tuple[Api, ...] = ("triton-generate", "triton-grpc", "openai-chat", "openai-completions")
"""The APIs this version load-tests end to end."""
OPENAI_APIS: tuple[Api, ...] = ("openai-chat", "openai-completions")


@dataclass(frozen=True)
class LlmLoad:
    """An LLM load test's own settings."""

    api: Api
    tokenizer: Path | None = None
    input_tokens: TokenCount = field(default_factory=lambda: TokenCount(128))
    output_tokens: TokenCount = field(default_factory=lambda: TokenCount(64))
    prompts: Path | None = None
    slo: Slo = field(default_factory=Slo)
    api_key_env: str | None = None
    stream: bool = True
    sessions: tuple[int, ...] = ()
    """``--sessions``: levels of chat sessions in flight, each turn sending the history (empty: none)."""
    turns: TokenCount = field(default_factory=lambda: TokenCount(3))
    """``--turns``: a session's turns, MEAN[:SD]."""
    think_ms: float = 0.0
    """``--think-time``: ms a session waits between an answer and its next turn."""

    @property
    def max_turns(self) -> int:
        """The most turns a session takes: the mean plus three standard deviations."""
        return max(1, math.ceil(self.turns.mean + 3 * self.turns.sd))

    @property
    def openai(self) -> bool:
        """Whether the load goes to an OpenAI-compatible server (not Triton's own endpoints)."""
        return self.api in OPENAI_APIS

    def check(self) -> None:
        """Refuse what cannot be measured.

        Raises:
            ConfigError: an API not available yet, or synthetic prompts without a tokenizer.
        """
        if self.api not in AVAILABLE:
            raise ConfigError(
                f"--api {self.api} is not available in this version: it load-tests Triton's "
                "generate endpoint and OpenAI-compatible servers",
                f"use --api {', '.join(AVAILABLE)}",
            )
        if self.prompts is None and self.tokenizer is None:
            raise ConfigError(
                "synthetic prompts of --input-tokens need the model's tokenizer to count tokens",
                "add --tokenizer DIR (the model's directory or its tokenizer.json), or give --prompts FILE",
            )
        if self.sessions and self.api == "triton-grpc":
            raise ConfigError(
                "--sessions holds chat sessions over HTTP (OpenAI's chat or completions API, Triton's "
                "generate): not --api triton-grpc",
                "use --api openai-chat, or --api triton-generate",
            )
        if self.think_ms < 0:
            raise ConfigError("--think-time must not be negative", "e.g. --think-time 500")
        if self.api == "triton-grpc" and not self.stream:
            raise ConfigError(
                "--api triton-grpc streams (a decoupled model answers over its gRPC stream): --no-stream "
                "does not apply",
                "drop --no-stream, or use --api triton-generate --no-stream for whole answers over HTTP",
            )

    def slo_option(self) -> str:
        """``--triton-llm-slo``: ``TTFT,ITL,E2E`` in ms, 0 for a figure without a limit."""
        values = (self.slo.ttft_ms, self.slo.itl_ms, self.slo.e2e_ms)
        return "" if all(v is None for v in values) else ",".join(f"{v or 0:g}" for v in values)


@dataclass(frozen=True)
class PreparedLlm:
    """The requests written for a test: how many, and the longest (prompt and output asked)."""

    count: int
    longest: dict[str, Any]
    """The body of the request with the most prompt plus output tokens (prompt characters where
    there is no tokenizer to count them)."""
    longest_output: int
    """Its ``max_tokens``."""


def prepare_llm_requests(
    load: LlmLoad, model: str, path: Path, seed: int = 0, replayed: list[Prompt] | None = None
) -> PreparedLlm:
    """Write the test's requests to ``path`` (JSON lines); how many, and the longest.

    ``replayed``: a trace's prompts, one per entry, in its order (None: the load's own).

    Raises:
        ConfigError: a tokenizer that cannot be read.
        SourceError: a prompts file that cannot be read.
    """
    tokenizer = load_tokenizer(load.tokenizer) if load.tokenizer is not None else None
    if replayed is not None:
        prompts = replayed
    elif load.prompts is not None:
        prompts = read_prompts(load.prompts, tokenizer)
    else:
        prompts = synthetic_prompts(
            tokenizer, SYNTHETIC_REQUESTS, load.input_tokens, load.output_tokens, seed
        )
    rng = random.Random(seed)
    longest: tuple[int, dict[str, Any], int] | None = None
    with path.open("w", encoding="utf-8") as out:
        for prompt in prompts:
            max_tokens = prompt.max_tokens or load.output_tokens.draw(rng)
            body = payload(load.api, model, prompt, max_tokens, load.stream)
            out.write(json.dumps({"payload": body, "input_tokens": prompt.input_tokens or 0}) + "\n")
            size = (prompt.input_tokens or len(prompt.as_text())) + max_tokens
            if longest is None or size > longest[0]:
                longest = (size, body, max_tokens)
    assert longest is not None  # read_prompts and synthetic_prompts give at least one
    return PreparedLlm(len(prompts), longest[1], longest[2])


def payload(api: Api, model: str, prompt: Prompt, max_tokens: int, stream: bool) -> dict[str, Any]:
    """One request's body for ``api``."""
    if api in ("triton-generate", "triton-grpc"):  # the same inputs, as JSON or as gRPC tensors
        # ignore_eos holds the length asked (vLLM-based models take it; others see a parameter they
        # leave alone); stream asks a model that streams by default for a whole answer (--no-stream)
        text = prompt.as_text()
        return {"text_input": text, "max_tokens": max_tokens, "ignore_eos": True, "stream": stream}
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": max_tokens,
        "min_tokens": max_tokens,
        "ignore_eos": True,
    }
    if api == "openai-chat":
        body["messages"] = prompt.messages or [{"role": "user", "content": prompt.as_text()}]
    else:
        body["prompt"] = prompt.as_text()
    if stream:
        body |= {"stream": True, "stream_options": {"include_usage": True}}
    return body


def llm_figures(
    latencies: dict[str, dict[str, float]], counts: dict[str, int], duration_s: float, users: int, ok: int
) -> dict[str, Any]:
    """A run's token figures from the generator's histograms and counters (see the module)."""
    per_s = counts.get("output_tokens", 0) / duration_s if duration_s > 0 else 0.0
    source = token_source(counts.get("usage_counted", 0), counts.get("tokenizer_counted", 0), ok)
    return {
        "ttft_us": latencies.get("ttft"),
        "itl_us": latencies.get("itl"),
        "tpot_us": latencies.get("tpot"),
        "output_tokens_per_s": per_s,
        "output_tokens_per_s_per_user": per_s / users if users else None,
        "goodput_per_s": counts.get("slo_met", 0) / duration_s if duration_s > 0 else 0.0,
        "output_token_source": source,
    }
