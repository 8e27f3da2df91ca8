"""LLM models on Kubernetes: the engine's image, readiness on the model, scaling on the engine.

A repository holding Triton's vLLM backend or the TensorRT-LLM layout (``--target container``)
runs in that engine's Triton image; a replica is ready when the model users call is (an
engine takes minutes to load); it scales on the engine's own pressure, not Triton's queue
(an LLM model has no Triton queue: the engine batches): ``llm-queue``, the requests waiting
for the engine, or ``llm-kv-cache``, the KV cache's used share. The engine reads its weights
at ``/models/…``, so the repository must be a volume mounted there, not a bucket.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tritongen.deploy.kubernetes.scaling import ScalingSignal
from tritongen.deploy.kubernetes.spec import ModelStore
from tritongen.deploy.llm import entry_model, flavoured_image, llm_engines
from tritongen.errors import ConfigError

LLM_SIGNALS = ("llm-queue", "llm-kv-cache")
QUEUE_GAUGES = {
    "vllm": ("vllm:num_requests_waiting",),
    "tensorrtllm": ('nv_trt_llm_request_metrics{request_type="waiting"}',),
}
"""Per engine, the gauge of requests waiting for it (Triton publishes the engine's own)."""
KV_GAUGES = {
    "vllm": ("vllm:gpu_cache_usage_perc", "vllm:kv_cache_usage_perc"),  # the backend's, vLLM's newer
    "tensorrtllm": ('nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="fraction"}',),
}


@dataclass(frozen=True)
class LlmServing:
    """How a repository of LLM models is served: its engine, the model users call, the image."""

    engine: str
    model: str
    image: str

    @property
    def ready_path(self) -> str:
        """The probe path: the model users call is ready (its engine loaded)."""
        return f"/v2/models/{self.model}/ready"


def llm_serving(repo: Path, models: list[str], image: str, store: ModelStore) -> LlmServing | None:
    """The repository's LLM serving (None: no LLM model in it).

    Raises:
        ConfigError: vLLM and TensorRT-LLM models together, a local-target LLM model, or a bucket
            store (the engines read their weights at ``/models``).
    """
    engines = llm_engines(repo)
    if not engines:
        return None
    if len(engines) > 1:
        raise ConfigError(
            f"{repo} holds vLLM and TensorRT-LLM models: no Triton image serves both",
            "deploy each engine's models from a repository of its own",
        )
    engine = engines.pop()
    if store.is_bucket:
        raise ConfigError(
            f"--model-store {store.uri}: an LLM engine reads its weights at /models/…, not from a bucket",
            "use a volume: --model-store pvc:CLAIM or nfs:SERVER:/EXPORT (or none: a new claim)",
        )
    return LlmServing(engine, entry_model(repo, models, engine), flavoured_image(image, engine))


def llm_signal(name: str, engine: str) -> ScalingSignal:
    """``llm-queue`` or ``llm-kv-cache`` for ``engine``.

    Raises:
        ConfigError: another name.
    """
    if name == "llm-queue":
        return ScalingSignal(
            name=name,
            metric="tritongen_llm_requests_waiting",
            numerator="",
            denominator="",
            unit="requests",
            default_target=4.0,
            description="requests waiting for the LLM engine",
            gauges=QUEUE_GAUGES[engine],
        )
    if name == "llm-kv-cache":
        return ScalingSignal(
            name=name,
            metric="tritongen_llm_kv_cache_usage",
            numerator="",
            denominator="",
            unit="",
            default_target=0.8,
            description="the LLM engine's KV cache used share (0-1)",
            gauges=KV_GAUGES[engine],
        )
    raise ConfigError(f"unknown scaling signal {name!r} for an LLM", f"use one of: {', '.join(LLM_SIGNALS)}")


def resolve_signal(name: str, serving: LlmServing | None) -> ScalingSignal | None:
    """The LLM signal ``name`` asks for (``auto``: ``llm-queue`` for LLM models); None: Triton's own signal.

    Raises:
        ConfigError: an LLM signal for a repository without LLM models.
    """
    if name == "auto":
        name = "llm-queue" if serving is not None else "queue-time"
    if name not in LLM_SIGNALS:
        return None
    if serving is None:
        raise ConfigError(
            f"--scale-on {name} reads an LLM engine's figures; the repository holds no LLM model",
            "scale on queue-time or queue-ratio",
        )
    return llm_signal(name, serving.engine)
