"""An LLM engine's settings: what the user asks, what is derived from the model, what the engine refuses.

The settings are the ones both engines share under their own names: the longest sequence
(``max_model_len``; TensorRT-LLM's ``max_seq_len``), the sequences batched together
(``max_num_seqs``; ``max_batch_size``), the tokens one engine step takes
(``max_num_batched_tokens``; ``max_num_tokens``), chunked prefill (chunked context), prefix
caching (KV cache reuse) and the KV cache's size: a fraction of the GPU's memory, or a
number of GiB (on a CPU, where a fraction of the machine's memory is no size to take).
"""

from __future__ import annotations

from dataclasses import dataclass

from tritongen.convert.artifact import Target
from tritongen.errors import ConfigError
from tritongen.sources.llm_source import LlmSource

GIB = 2**30
LOCAL_KV_CACHE_GIB = 1.0
"""The local target's KV cache (vLLM's CPU engine takes an explicit size)."""
DEFAULT_KV_CACHE_FRACTION = 0.9
"""A GPU's memory share the engines take for weights, activations and KV cache (vLLM's default)."""
DEFAULT_MAX_NUM_SEQS = {"local": 16, "container": 256}
DEFAULT_BATCHED_TOKENS = {"local": 2048, "container": 8192}


@dataclass(frozen=True)
class EngineOptions:
    """The settings asked for (``None``: derived from the model and the target)."""

    max_model_len: int | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    chunked_prefill: bool | None = None
    prefix_caching: bool | None = None
    kv_cache_fraction: float | None = None
    kv_cache_gib: float | None = None

    def given(self) -> list[str]:
        """The options given, by their flags."""
        return [f"--{name.replace('_', '-')}" for name, value in vars(self).items() if value is not None]


@dataclass(frozen=True)
class EngineSettings:
    """The resolved settings of one model's engine."""

    max_model_len: int
    max_num_seqs: int
    max_num_batched_tokens: int
    chunked_prefill: bool
    prefix_caching: bool
    kv_cache_fraction: float | None
    """The GPU memory share (``None`` on the local target, which sizes the cache in bytes)."""
    kv_cache_bytes: int | None
    """The KV cache's size (``None``: the engine sizes it from the fraction)."""

    def to_json(self) -> dict[str, object]:
        """The settings by name, for the model's metadata."""
        return dict(vars(self))


def resolve_settings(options: EngineOptions, source: LlmSource, target: Target) -> EngineSettings:
    """The engine's settings: the options given, the others derived from the model's config.

    The local target's defaults fit a CPU: a 1 GiB KV cache, and the longest sequence the
    model was trained for cut to what that cache holds.

    Raises:
        ConfigError: settings the engine refuses (see :func:`check_settings`).
    """
    if target == "local" and options.kv_cache_fraction is not None:
        raise ConfigError(
            "--kv-cache-fraction is a share of a GPU's memory; the local target runs on the CPU",
            "size the KV cache with --kv-cache-gib (default 1)",
        )
    if options.kv_cache_fraction is not None and options.kv_cache_gib is not None:
        raise ConfigError("--kv-cache-fraction and --kv-cache-gib both size the KV cache", "give one of them")
    gib = options.kv_cache_gib if options.kv_cache_gib is not None else None
    if gib is None and target == "local":
        gib = LOCAL_KV_CACHE_GIB
    kv_bytes = int(gib * GIB) if gib is not None else None
    fraction = None if kv_bytes is not None else options.kv_cache_fraction or DEFAULT_KV_CACHE_FRACTION
    max_len = options.max_model_len or source.max_positions
    if options.max_model_len is None and kv_bytes is not None:
        max_len = min(max_len, max(1, kv_bytes // source.kv_bytes_per_token))
    chunked = True if options.chunked_prefill is None else options.chunked_prefill
    batched = options.max_num_batched_tokens
    if batched is None:
        batched = DEFAULT_BATCHED_TOKENS[target] if chunked else max(max_len, DEFAULT_BATCHED_TOKENS[target])
    settings = EngineSettings(
        max_model_len=max_len,
        max_num_seqs=options.max_num_seqs or DEFAULT_MAX_NUM_SEQS[target],
        max_num_batched_tokens=batched,
        chunked_prefill=chunked,
        prefix_caching=True if options.prefix_caching is None else options.prefix_caching,
        kv_cache_fraction=fraction,
        kv_cache_bytes=kv_bytes,
    )
    check_settings(settings, source)
    return settings


def check_settings(settings: EngineSettings, source: LlmSource) -> None:
    """Refuse, in one line, what the engines refuse to start with.

    Raises:
        ConfigError: a count below 1, a sequence longer than the model's positions, a step that
            cannot take a whole prompt without chunked prefill, fewer step tokens than
            sequences, a KV cache share outside (0, 1], or a KV cache without room for one
            sequence of ``max_model_len``.
    """
    for name in ("max_model_len", "max_num_seqs", "max_num_batched_tokens"):
        if getattr(settings, name) < 1:
            raise ConfigError(f"--{name.replace('_', '-')} must be at least 1", "give a positive number")
    if settings.max_model_len > source.max_positions:
        raise ConfigError(
            f"--max-model-len {settings.max_model_len} is longer than the {source.max_positions} "
            "positions the model was trained for",
            f"give at most {source.max_positions}",
        )
    if settings.max_num_batched_tokens < settings.max_model_len and not settings.chunked_prefill:
        raise ConfigError(
            f"--max-num-batched-tokens {settings.max_num_batched_tokens} is below --max-model-len "
            f"{settings.max_model_len} without chunked prefill: no step could take a whole prompt",
            "turn --chunked-prefill on, raise --max-num-batched-tokens, or lower --max-model-len",
        )
    if settings.max_num_batched_tokens < settings.max_num_seqs:
        raise ConfigError(
            f"--max-num-batched-tokens {settings.max_num_batched_tokens} is below --max-num-seqs "
            f"{settings.max_num_seqs}: a step must take one token of every sequence",
            "raise --max-num-batched-tokens or lower --max-num-seqs",
        )
    fraction = settings.kv_cache_fraction
    if fraction is not None and not 0 < fraction <= 1:
        raise ConfigError(f"--kv-cache-fraction {fraction} is not in (0, 1]", "give a share such as 0.9")
    if settings.kv_cache_bytes is not None and settings.kv_cache_bytes <= 0:
        raise ConfigError("--kv-cache-gib must be above 0", "give a size such as 1 (GiB)")
    needed = settings.max_model_len * source.kv_bytes_per_token
    if settings.kv_cache_bytes is not None and settings.kv_cache_bytes < needed:
        raise ConfigError(
            f"a KV cache of {settings.kv_cache_bytes / GIB:.3g} GiB holds no sequence of --max-model-len "
            f"{settings.max_model_len} ({needed / GIB:.3g} GiB at {source.kv_bytes_per_token} bytes a token)",
            "raise --kv-cache-gib or lower --max-model-len",
        )
