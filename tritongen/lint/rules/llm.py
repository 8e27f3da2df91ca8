"""Rules of language-model engines: vLLM's engine arguments, TensorRT-LLM's parameters and its engine.

Model-level: an ``EXECUTION_ENV_PATH`` that exists; vLLM's settings as the engine checks them
(in Triton's vLLM backend's ``model.json``, or the parameters of tritongen's local vLLM model,
which must be decoupled); TensorRT-LLM's batching strategy, beam width and KV cache share, and
the engine they serve (built: its ``config.json``; not yet: the build command tritongen wrote)
agreeing with the config. The agreements across a TensorRT-LLM layout's models are in
:mod:`tritongen.lint.llm_layouts`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tritongen.lint.rules.context import ModelContext
from tritongen.triton.repository import read_metadata

ENGINE_ARGS_FILE = "model.json"
BATCHING_STRATEGIES = ("V1", "inflight_batching", "inflight_fused_batching")
MODEL_DIRECTORY = "$$TRITON_MODEL_DIRECTORY"
CONTAINER_ROOT = "/models"


def parameters(ctx: ModelContext) -> dict[str, str]:
    """The config's parameters as strings."""
    return {key: value.string_value for key, value in ctx.config.parameters.items()}


def is_decoupled(ctx: ModelContext) -> bool:
    """Whether the model's transaction policy is decoupled."""
    return bool(ctx.config.model_transaction_policy.decoupled)


def check_execution_env(ctx: ModelContext) -> None:
    """A Python model's ``EXECUTION_ENV_PATH`` must name an environment that exists (or a packed one)."""
    path_text = parameters(ctx).get("EXECUTION_ENV_PATH", "").strip()
    if not path_text or ctx.directory is None or not ctx.check_files:
        return
    path = Path(path_text.replace(MODEL_DIRECTORY, str(ctx.directory)))
    if path.name.endswith((".tar.gz", ".tgz")):
        return  # a packed environment (conda-pack): Triton unpacks it; its contents are not read here
    if not (path / "bin" / "python3").exists():
        ctx.error(
            "llm.execution-env",
            "parameters",
            f"EXECUTION_ENV_PATH {path_text} has no bin/python3: the stub cannot start",
            "make it (for vLLM: make vllm-env), or point the parameter at one",
        )


def _number(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _flag(value: Any) -> bool:
    return str(value).strip().lower() in ("1", "true", "yes", "on")


def check_vllm_settings(ctx: ModelContext, settings: dict[str, Any], where: str) -> None:
    """VLLM's own refusals: no step takes a prompt, fewer step tokens than sequences, a bad share."""
    batched = _number(settings.get("max_num_batched_tokens"))
    length = _number(settings.get("max_model_len"))
    seqs = _number(settings.get("max_num_seqs"))
    chunked = _flag(settings.get("enable_chunked_prefill", True))
    if batched is not None and length is not None and batched < length and not chunked:
        ctx.error(
            "llm.vllm-batched-tokens",
            where,
            f"max_num_batched_tokens {batched:g} is below max_model_len {length:g} without chunked "
            "prefill: vLLM refuses to start",
            "set enable_chunked_prefill true, raise max_num_batched_tokens, or lower max_model_len",
        )
    if batched is not None and seqs is not None and batched < seqs:
        ctx.error(
            "llm.vllm-batched-tokens",
            where,
            f"max_num_batched_tokens {batched:g} is below max_num_seqs {seqs:g}: vLLM refuses to start",
            "raise max_num_batched_tokens or lower max_num_seqs",
        )
    share = _number(settings.get("gpu_memory_utilization"))
    if share is not None and not 0 < share <= 1:
        ctx.error(
            "llm.kv-cache-fraction",
            where,
            f"gpu_memory_utilization {share:g} is not in (0, 1]",
            "give a share such as 0.9",
        )


def check_vllm(ctx: ModelContext) -> None:
    """Triton's vLLM backend (``model.json``) and tritongen's local vLLM model (its parameters)."""
    if ctx.backend == "vllm":
        _check_vllm_backend(ctx)
        return
    metadata = read_metadata(ctx.directory) if ctx.directory is not None else None
    if ctx.backend != "python" or not metadata or metadata.get("format") != "vllm":
        return
    if not is_decoupled(ctx):
        ctx.error(
            "llm.vllm-decoupled",
            "model_transaction_policy.decoupled",
            "the vLLM model streams a response per token and must be decoupled",
            "set model_transaction_policy { decoupled: true }",
        )
    check_vllm_settings(ctx, parameters(ctx), "parameters")


def _check_vllm_backend(ctx: ModelContext) -> None:
    """``1/model.json``: a JSON object naming the model, settings vLLM takes, weights in the repository."""
    if ctx.wrote("model_transaction_policy.decoupled") and not is_decoupled(
        ctx
    ):  # left out: the backend sets it
        ctx.warning(
            "llm.vllm-decoupled",
            "model_transaction_policy.decoupled",
            "vLLM's backend streams only when decoupled: each request is answered whole",
            "set model_transaction_policy { decoupled: true }",
        )
    if ctx.directory is None or not ctx.check_files:
        return
    path = ctx.directory / "1" / ENGINE_ARGS_FILE
    try:
        arguments = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        ctx.error(
            "llm.vllm-engine-args",
            "",
            f"{ctx.directory.name}/1/{ENGINE_ARGS_FILE} is missing or no JSON ({e})",
            'write vLLM\'s engine arguments there, e.g. {"model": "/models/NAME/1/hf"}',
        )
        return
    if not isinstance(arguments, dict) or not arguments.get("model"):
        ctx.error(
            "llm.vllm-engine-args",
            "",
            f"{ctx.directory.name}/1/{ENGINE_ARGS_FILE} names no model",
            'add "model": the weights\' folder inside the image, or a hub name',
        )
        return
    check_vllm_settings(ctx, arguments, "")
    model = str(arguments["model"])
    prefix = f"{CONTAINER_ROOT}/{ctx.directory.name}/"
    inside = model.removeprefix(prefix)
    if model.startswith(prefix) and not (ctx.directory / inside).is_dir():
        ctx.error(
            "llm.vllm-weights",
            "",
            f"model.json's model {model} is not in the repository ({ctx.directory.name}/{inside})",
            "put the model's files there, or convert the model again",
        )


def _reuses(found: dict[str, str]) -> bool:
    """Whether chunked context or KV cache reuse is on."""
    return _flag(found.get("enable_chunked_context")) or _flag(found.get("enable_kv_cache_reuse"))


def check_tensorrtllm(ctx: ModelContext) -> None:
    """The ``tensorrtllm`` backend: strategy, beam width, KV cache share; and the engine it serves."""
    if ctx.backend != "tensorrtllm":
        return
    found = parameters(ctx)
    strategy = found.get("gpt_model_type", "")
    if strategy not in BATCHING_STRATEGIES:
        ctx.error(
            "llm.trtllm-batching",
            "parameters",
            f"gpt_model_type {strategy or '(unset)'} is not a batching strategy of TensorRT-LLM",
            f"set one of {', '.join(BATCHING_STRATEGIES)} (inflight_fused_batching batches in flight)",
        )
    elif strategy == "V1" and (
        _flag(found.get("enable_chunked_context")) or _flag(found.get("enable_kv_cache_reuse"))
    ):
        ctx.error(
            "llm.trtllm-batching",
            "parameters",
            "chunked context and KV cache reuse need inflight batching, not V1",
            "set gpt_model_type inflight_fused_batching, or turn them off",
        )
    share = _number(found.get("kv_cache_free_gpu_mem_fraction"))
    if share is not None and not 0 < share <= 1:
        ctx.error(
            "llm.kv-cache-fraction",
            "parameters",
            f"kv_cache_free_gpu_mem_fraction {share:g} is not in (0, 1]",
            "give a share such as 0.9",
        )
    beams = _number(found.get("max_beam_width", "1"))
    if beams is None or beams < 1 or beams != int(beams):
        ctx.error(
            "llm.trtllm-beam-width",
            "parameters",
            f"max_beam_width {found.get('max_beam_width')} is not a whole number of beams",
            "set max_beam_width to the engine's (1 without beam search)",
        )
        return
    check_engine_build(ctx, found, int(beams))


def engine_build(ctx: ModelContext, found: dict[str, str]) -> tuple[dict[str, Any], str] | None:
    """What the engine was (or will be) built with, and whence: its ``config.json``, or how it is built."""
    if ctx.directory is None:
        return None
    model_path = found.get("gpt_model_path", "").replace(MODEL_DIRECTORY, str(ctx.directory))
    prefix = f"{CONTAINER_ROOT}/{ctx.directory.name}/"
    local = (
        ctx.directory / model_path.removeprefix(prefix) if model_path.startswith(prefix) else Path(model_path)
    )
    try:
        built = json.loads((local / "config.json").read_text(encoding="utf-8"))
        build = built.get("build_config", {})
        plugins = build.get("plugin_config", {})
        return {
            "max_batch_size": build.get("max_batch_size"),
            "max_beam_width": build.get("max_beam_width"),
            "paged_kv_cache": plugins.get("paged_kv_cache"),
            "remove_input_padding": plugins.get("remove_input_padding"),
            "use_paged_context_fmha": plugins.get("use_paged_context_fmha"),
        }, "the built engine"
    except (OSError, ValueError, AttributeError):
        pass
    metadata = read_metadata(ctx.directory) or {}
    arguments = ((metadata.get("engine") or {}).get("build") or {}).get("trtllm_build")
    if not isinstance(arguments, list):
        return None
    pairs = dict(zip(arguments[::2], arguments[1::2], strict=False))
    return {
        "max_batch_size": int(pairs.get("--max_batch_size", 0)) or None,
        "max_beam_width": int(pairs.get("--max_beam_width", 1)),
        "paged_kv_cache": pairs.get("--kv_cache_type") == "paged",
        "remove_input_padding": pairs.get("--remove_input_padding") == "enable",
        "use_paged_context_fmha": pairs.get("--use_paged_context_fmha") == "enable",
    }, "its build command (build_engine.sh)"


def check_engine_build(ctx: ModelContext, found: dict[str, str], beams: int) -> None:
    """The config against the engine: batch size, beam width, and the plugins the strategy needs."""
    known = engine_build(ctx, found)
    if known is None:
        return
    build, origin = known
    if origin != "the built engine":
        ctx.note(
            "llm.trtllm-not-built",
            "parameters",
            "the engine is not built yet: gpt_model_path holds no config.json",
            "build it where TensorRT-LLM lives: build_engine.sh in Triton's TensorRT-LLM image",
        )
    built_batch = build.get("max_batch_size")
    if built_batch and built_batch != ctx.config.max_batch_size:
        ctx.error(
            "llm.trtllm-batch-size",
            "max_batch_size",
            f"max_batch_size {ctx.config.max_batch_size} differs from {origin}'s {built_batch}",
            "use one batch size in the config and the engine's build (--max-num-seqs)",
        )
    if build.get("max_beam_width") not in (None, beams):
        ctx.error(
            "llm.trtllm-beam-width",
            "parameters",
            f"max_beam_width {beams} differs from {origin}'s {build['max_beam_width']}",
            "use one beam width in the config and the engine's build",
        )
    if found.get("gpt_model_type", "").startswith("inflight") and not (
        build.get("paged_kv_cache") and build.get("remove_input_padding")
    ):
        ctx.error(
            "llm.trtllm-batching",
            "parameters",
            f"inflight batching needs an engine with a paged KV cache and packed inputs; {origin} has not",
            "build with --kv_cache_type paged --remove_input_padding enable",
        )
    if _reuses(found) and build.get("use_paged_context_fmha") is False:
        ctx.error(
            "llm.trtllm-context-fmha",
            "parameters",
            f"chunked context and KV cache reuse need paged context attention; {origin} has none",
            "build with --use_paged_context_fmha enable, or turn both off",
        )
