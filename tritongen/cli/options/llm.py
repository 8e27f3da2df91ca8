"""``loadtest``'s options of an LLM load: the API, the tokenizer, the prompts, the latency limits."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from tritongen.cli.options.parsing import parse_int_list
from tritongen.cli.options.settings import settings
from tritongen.errors import ConfigError
from tritongen.loadtest.llm.load import LlmLoad
from tritongen.loadtest.llm.spec import APIS, Slo, parse_api, parse_slo, parse_token_count


@dataclass(frozen=True)
class LlmFlags:
    """An LLM load (``--api``): prompts to a text model, measured token by token."""

    api: Annotated[
        str | None,
        typer.Option(
            "--api",
            help=f"An LLM load, one of {', '.join(APIS)}: Triton's generate_stream endpoint, a "
            "decoupled text model over gRPC streams (with --protocol grpc), or an OpenAI-compatible "
            "server at the base URL --url http://HOST:PORT. TTFT, ITL, tokens/s and goodput per run.",
        ),
    ] = None
    tokenizer: Annotated[
        Path | None,
        typer.Option(
            "--tokenizer",
            help="The model's directory or its tokenizer.json, on this machine (never downloaded): "
            "counts the prompts' tokens, and the answers' where the server reports no usage.",
        ),
    ] = None
    input_tokens: Annotated[
        str, typer.Option("--input-tokens", help="Synthetic prompts' tokens, MEAN[:SD], e.g. 512:64.")
    ] = "128"
    output_tokens: Annotated[
        str, typer.Option("--output-tokens", help="Output tokens asked per request, MEAN[:SD], e.g. 128.")
    ] = "64"
    prompts: Annotated[
        Path | None,
        typer.Option(
            "--prompts",
            help="Prompts from a file instead: JSON lines (text, prompt or chat messages, optional "
            "max_tokens) or a ShareGPT JSON file.",
        ),
    ] = None
    slo: Annotated[
        str | None,
        typer.Option(
            "--slo",
            help="Limits in ms, e.g. ttft=200,itl=50,e2e=5000: goodput counts the requests meeting each.",
        ),
    ] = None
    api_key_env: Annotated[
        str | None,
        typer.Option(
            "--api-key-env",
            help="The environment variable holding the API key, sent as a bearer token (never printed).",
        ),
    ] = None

    stream: Annotated[
        bool,
        typer.Option(
            "--stream/--no-stream",
            help="Stream each answer token by token (TTFT and gaps measured), or ask for it whole.",
        ),
    ] = True

    sessions: Annotated[
        str | None,
        typer.Option(
            "--sessions",
            help="Chat sessions in flight per run, e.g. 1,4,8 (not --concurrency): each turn sends the "
            "history so far plus a new message; TTFT of first and later turns reported apart.",
            show_default=False,
        ),
    ] = None
    turns: Annotated[
        str | None,
        typer.Option(
            "--turns", help="With --sessions: turns per session, MEAN[:SD] (default 3).", show_default=False
        ),
    ] = None
    think_time: Annotated[
        float | None,
        typer.Option(
            "--think-time",
            help="With --sessions: ms between an answer and the next turn (default 0).",
            show_default=False,
        ),
    ] = None

    def load(self) -> LlmLoad | None:
        """The LLM load asked (None without ``--api``), checked.

        Raises:
            ConfigError: a malformed option, an API not available, or no way to count tokens.
        """
        if self.sessions is None:
            given = [
                flag
                for flag, value in (("--turns", self.turns), ("--think-time", self.think_time))
                if value is not None
            ]
            if given:
                raise ConfigError(
                    f"{given[0]} applies with --sessions", f"add --sessions N, or drop {given[0]}"
                )
        if self.api is None:
            if self.sessions is not None:
                raise ConfigError(
                    "--sessions holds chat sessions with a language model", "add --api openai-chat"
                )
            return None
        load = settings(
            LlmLoad,
            self,
            api=parse_api(self.api),
            input_tokens=parse_token_count(self.input_tokens, "--input-tokens"),
            output_tokens=parse_token_count(self.output_tokens, "--output-tokens"),
            slo=parse_slo(self.slo) if self.slo else Slo(),
            sessions=tuple(parse_int_list(self.sessions, "--sessions") or ()) if self.sessions else (),
            turns=parse_token_count(self.turns or "3", "--turns"),
            think_ms=self.think_time or 0.0,
        )
        load.check()
        return load
