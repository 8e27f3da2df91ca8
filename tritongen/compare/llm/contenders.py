"""The contenders of an LLM comparison: each one's cold start, memory and runs; the report holding them."""

from __future__ import annotations

from dataclasses import dataclass, field

from tritongen.convert.llm.settings import EngineSettings
from tritongen.loadtest.result import RunResult

VLLM, TRITON = "vllm-openai", "triton-vllm"
LABELS = {
    VLLM: "vLLM's OpenAI server",
    TRITON: "vLLM inside Triton",
    "triton-tensorrtllm": "TensorRT-LLM in Triton",
}


@dataclass
class Contender:
    """One server: its cold start, memory and every round's run."""

    key: str
    cold_start_s: float | None = None
    memory_peak_bytes: int | None = None
    runs: list[RunResult] = field(default_factory=list)
    unavailable: str | None = None


@dataclass
class LlmCompareReport:
    """The contenders and the settings both ran with."""

    settings: EngineSettings | None = None
    contenders: dict[str, Contender] = field(default_factory=dict)
    rounds: int = 0
    wall_s: float = 0.0
