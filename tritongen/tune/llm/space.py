"""The engine settings a tune of a local vLLM model tries, and the baseline it measures them against.

A candidate is one value of each searched setting: ``max_num_seqs``, ``max_num_batched_tokens``,
chunked prefill and prefix caching. The baseline is the model's config as it is. Combinations
vLLM refuses to start with (a step that cannot take a whole prompt without chunked prefill,
fewer step tokens than sequences) are left out, each with why.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from tritongen.errors import ConfigError

ON_OFF = {"on": True, "off": False, "true": True, "false": False}


def _flag(text: str) -> bool:
    return text.strip().lower() in ("1", "true", "yes", "on")


@dataclass(frozen=True, order=True)
class EngineCandidate:
    """One set of engine settings."""

    max_num_seqs: int
    max_num_batched_tokens: int
    chunked_prefill: bool
    prefix_caching: bool

    @property
    def key(self) -> str:
        """A short stable id, e.g. ``s16-t2048-cp1-pc1``."""
        return (
            f"s{self.max_num_seqs}-t{self.max_num_batched_tokens}-cp{int(self.chunked_prefill)}"
            f"-pc{int(self.prefix_caching)}"
        )

    def parameters(self) -> dict[str, str]:
        """The config parameters of these settings (the local vLLM model reads them at start)."""
        return {
            "max_num_seqs": str(self.max_num_seqs),
            "max_num_batched_tokens": str(self.max_num_batched_tokens),
            "enable_chunked_prefill": "true" if self.chunked_prefill else "false",
            "enable_prefix_caching": "true" if self.prefix_caching else "false",
        }

    def to_json(self) -> dict[str, Any]:
        """The settings by name."""
        return {
            "max_num_seqs": self.max_num_seqs,
            "max_num_batched_tokens": self.max_num_batched_tokens,
            "chunked_prefill": self.chunked_prefill,
            "prefix_caching": self.prefix_caching,
        }

    def refusal(self, max_model_len: int) -> str | None:
        """Why vLLM refuses to start with these settings; None when it starts."""
        if self.max_num_batched_tokens < max_model_len and not self.chunked_prefill:
            return (
                f"max_num_batched_tokens {self.max_num_batched_tokens} is below max_model_len "
                f"{max_model_len} without chunked prefill"
            )
        if self.max_num_batched_tokens < self.max_num_seqs:
            tokens, seqs = self.max_num_batched_tokens, self.max_num_seqs
            return f"max_num_batched_tokens {tokens} is below max_num_seqs {seqs}"
        return None


def current_settings(parameters: dict[str, str]) -> tuple[EngineCandidate, int]:
    """The model's settings as its config has them, and its ``max_model_len``.

    Raises:
        ConfigError: the config has no engine settings (not tritongen's local vLLM model).
    """
    try:
        current = EngineCandidate(
            max_num_seqs=int(parameters["max_num_seqs"]),
            max_num_batched_tokens=int(parameters["max_num_batched_tokens"]),
            chunked_prefill=_flag(parameters.get("enable_chunked_prefill", "true")),
            prefix_caching=_flag(parameters.get("enable_prefix_caching", "true")),
        )
        return current, int(parameters["max_model_len"])
    except (KeyError, ValueError) as e:
        raise ConfigError(
            f"the model's config has no engine setting {e}: not a local vLLM model of tritongen convert",
            "convert the model with tritongen convert MODEL_DIR --formats vllm",
        ) from e


def parse_flags(text: str | None, option: str) -> tuple[bool, ...] | None:
    """``on,off`` -> ``(True, False)``; None or empty: not given.

    Raises:
        ConfigError: a word other than on and off.
    """
    if text is None or not text.strip():
        return None
    values = []
    for word in (w.strip().lower() for w in text.split(",") if w.strip()):
        if word not in ON_OFF:
            raise ConfigError(f"{option} {text!r}: {word!r} is not on or off", f"e.g. {option} on,off")
        values.append(ON_OFF[word])
    return tuple(dict.fromkeys(values))


@dataclass(frozen=True)
class EngineSpace:
    """The values tried of each setting."""

    max_num_seqs: tuple[int, ...]
    max_num_batched_tokens: tuple[int, ...]
    chunked_prefill: tuple[bool, ...]
    prefix_caching: tuple[bool, ...]

    def candidates(
        self, max_model_len: int, current: EngineCandidate
    ) -> tuple[list[EngineCandidate], list[str]]:
        """Every combination vLLM starts with but the current one; why each other is left out."""
        legal, skipped = [], []
        for seqs in self.max_num_seqs:
            for tokens in self.max_num_batched_tokens:
                for chunked in self.chunked_prefill:
                    for prefix in self.prefix_caching:
                        candidate = EngineCandidate(seqs, tokens, chunked, prefix)
                        reason = candidate.refusal(max_model_len)
                        if reason is not None:
                            skipped.append(f"{candidate.key}: {reason}")
                        elif candidate != current:
                            legal.append(candidate)
        return legal, skipped


def pick(candidates: list[EngineCandidate], trials: int | None, seed: int) -> list[EngineCandidate]:
    """``trials`` of the candidates (all when None or more), drawn with ``seed``, in a stable order."""
    if trials is None or trials >= len(candidates):
        return sorted(candidates)
    return sorted(random.Random(seed).sample(candidates, trials))
