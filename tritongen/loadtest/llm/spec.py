"""What an LLM load test asks: the API, token counts drawn from distributions, the latency limits.

``--input-tokens 512:64`` is a mean and a standard deviation (counts drawn from a normal
distribution, rounded, at least 1); ``--input-tokens 512`` is exactly 512. ``--slo
ttft=200,itl=50,e2e=5000`` are limits in milliseconds on time to first token, on every gap
between tokens, and on the whole request: a request meets the limits when it meets every
one given (goodput counts those).
"""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass
from typing import Literal

from tritongen.errors import ConfigError

Api = Literal["openai-chat", "openai-completions", "triton-generate", "triton-grpc"]
APIS: tuple[Api, ...] = ("openai-chat", "openai-completions", "triton-generate", "triton-grpc")

_COUNT = re.compile(r"^\s*(\d+)\s*(?::\s*(\d+(?:\.\d+)?)\s*)?$")
SLO_KEYS = ("ttft", "itl", "e2e")


@dataclass(frozen=True)
class TokenCount:
    """A token count: a mean and a standard deviation (0: always the mean)."""

    mean: int
    sd: float = 0.0

    def draw(self, rng: random.Random) -> int:
        """One count (at least 1)."""
        if self.sd <= 0:
            return self.mean
        return max(1, round(rng.gauss(self.mean, self.sd)))

    def text(self) -> str:
        """``512`` or ``512:64``."""
        return str(self.mean) if self.sd <= 0 else f"{self.mean}:{self.sd:g}"


def parse_token_count(text: str, option: str) -> TokenCount:
    """``MEAN[:SD]`` -> the count.

    Raises:
        ConfigError: not a positive mean with an optional spread.
    """
    match = _COUNT.match(text)
    if not match or int(match.group(1)) < 1:
        raise ConfigError(
            f"{option} {text!r} is not MEAN[:SD] with a mean of at least 1", f"e.g. {option} 512:64"
        )
    return TokenCount(int(match.group(1)), float(match.group(2) or 0.0))


@dataclass(frozen=True)
class Slo:
    """Latency limits in milliseconds (None: no limit on that figure)."""

    ttft_ms: float | None = None
    itl_ms: float | None = None
    e2e_ms: float | None = None

    def met(self, ttft_us: float | None, max_gap_us: float | None, e2e_us: float) -> bool:
        """Whether one request met every limit given (its longest gap against ``itl``)."""
        checks = (
            (self.ttft_ms, ttft_us),
            (self.itl_ms, max_gap_us),
            (self.e2e_ms, e2e_us),
        )
        return all(limit is None or (value is not None and value <= limit * 1000) for limit, value in checks)

    def text(self) -> str:
        """``ttft=200,itl=50`` (empty without limits)."""
        given = zip(SLO_KEYS, (self.ttft_ms, self.itl_ms, self.e2e_ms), strict=True)
        return ",".join(f"{key}={value:g}" for key, value in given if value is not None)


def parse_slo(text: str) -> Slo:
    """``ttft=MS,itl=MS,e2e=MS`` (any of them) -> the limits.

    Raises:
        ConfigError: an unknown key, a value that is not a positive number, a key twice.
    """
    found: dict[str, float] = {}
    for part in text.split(","):
        key, _, value = part.strip().partition("=")
        try:
            number = float(value)
        except ValueError:
            number = math.nan
        if key not in SLO_KEYS or not number > 0 or key in found:
            raise ConfigError(
                f"--slo {text!r}: {part.strip()!r} is not ttft=MS, itl=MS or e2e=MS (each once, positive)",
                "e.g. --slo ttft=200,itl=50,e2e=5000",
            )
        found[key] = number
    return Slo(found.get("ttft"), found.get("itl"), found.get("e2e"))


def parse_api(text: str) -> Api:
    """``--api`` -> the API.

    Raises:
        ConfigError: an API not known.
    """
    for api in APIS:
        if text == api:
            return api
    raise ConfigError(f"--api {text!r} is not one of {', '.join(APIS)}", "e.g. --api openai-chat")
