"""What both LLM kinds share: their ``--triton-llm-*`` options, their figures and their notes."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from tritongen.io.loadgen_shared import CONVERSATION_TTFT
from tritongen.loadtest.llm.load import LlmLoad, llm_figures
from tritongen.loadtest.llm.tokenizer import tokenizer_file
from tritongen.metrics.vllm import vllm_text

if TYPE_CHECKING:
    from tritongen.loadtest.result import RunResult

LLM_REQUESTS_FILE = "llm_requests.jsonl"


def llm_options(llm: LlmLoad, requests: Path) -> dict[str, str]:
    """The ``--triton-llm-*`` options of a load whose prepared requests are in ``requests``.

    Raises:
        ConfigError: a ``--tokenizer`` that is not there.
    """
    options = {"llm-api": llm.api, "llm-requests": str(requests), "llm-stream": "1" if llm.stream else "0"}
    if llm.api_key_env:
        options["llm-key-env"] = llm.api_key_env
    if llm.tokenizer is not None:
        options["llm-tokenizer"] = str(tokenizer_file(llm.tokenizer).resolve())
    slo = llm.slo_option()
    if slo:
        options["llm-slo"] = slo
    if llm.sessions:  # chat sessions: each turn sends the history so far
        options |= {
            "llm-turns": llm.turns.text(),
            "llm-max-turns": str(llm.max_turns),
            "llm-think-ms": repr(llm.think_ms),
        }
    return options


def add_llm_figures(result: RunResult, users: int) -> None:
    """An LLM run's token figures (``ttft_us`` … ``goodput_per_s``), its end-to-end time ``latency_us``."""
    ok = result.requests - result.errors
    figures = llm_figures(result.latencies_us, result.counts, result.duration_s, users, ok)
    for name, value in figures.items():
        setattr(result, name, value)
    result.e2e_us = result.latency_us


def llm_note(run: RunResult) -> list[str]:
    """An LLM run's token figures in a line: TTFT, ITL, TPOT (P50 / P99 ms), tokens/s, goodput."""
    if run.output_tokens_per_s is None:
        return []
    parts = []
    for label, figures in (("TTFT", run.ttft_us), ("ITL", run.itl_us), ("TPOT", run.tpot_us)):
        parts.append(f"{label} {_ms((figures or {}).get('p50'))} / {_ms((figures or {}).get('p99'))} ms")
    return [
        f"{', '.join(parts)} (P50 / P99); {run.output_tokens_per_s:,.1f} output tokens/s, goodput "
        f"{run.goodput_per_s or 0:,.2f} req/s (tokens counted from {run.output_token_source})"
    ]


def llm_server_notes(run: RunResult) -> list[str]:
    """The token figures in a line, and the engine's where the server published vLLM's."""
    return [*llm_note(run), *conversation_note(run), *([vllm_text(run.llm_server)] if run.llm_server else [])]


def conversation_note(run: RunResult) -> list[str]:
    """``--sessions``: the time to first token of the sessions' first turns and of their later ones."""
    first, later = (run.latencies_us.get(name) for name in CONVERSATION_TTFT)
    if first is None:
        return []
    text = f"sessions: first turns' TTFT P50 {_ms(first.get('p50'))} ms, P99 {_ms(first.get('p99'))} ms"
    if later is not None:
        text += (
            f"; later turns' (history resent) P50 {_ms(later.get('p50'))} ms, P99 {_ms(later.get('p99'))} ms"
        )
    return [text]


def _ms(us: float | None) -> str:
    return "–" if us is None else f"{us / 1000:.2f}"
