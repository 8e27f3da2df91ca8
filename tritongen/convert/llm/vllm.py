"""vLLM model directories: ours for the embedded server (``local``), Triton's vLLM backend's (``container``).

``local``: a decoupled Python-backend model (:mod:`tritongen.convert.wrappers.vllm_model`) that
runs vLLM's engine in the environment ``EXECUTION_ENV_PATH`` names; the engine settings are
config parameters, so a live reload with new ones restarts the engine with them.
``container``: ``backend: "vllm"`` of Triton's vLLM image, its engine arguments in
``1/model.json`` with the weights at their path inside the container (the repository is
mounted at ``/models``), and the engine's figures published as Triton metrics
(``REPORT_CUSTOM_METRICS``).
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

from tritongen.convert.llm.files import (
    DECOUPLED,
    WEIGHTS_DIR,
    WrittenModel,
    flag,
    optional_input,
    place_model_files,
    text_input,
    text_output,
)
from tritongen.convert.llm.settings import EngineSettings
from tritongen.sources.llm_source import LlmSource
from tritongen.triton.model_config import InstanceGroup, ModelConfig, ModelOutput

WRAPPER = "vllm_model.py"
ENGINE_ARGS_FILE = "model.json"
CONTAINER_ROOT = "/models"
"""Where the compose file and the Kubernetes layout mount the repository in Triton's image."""
LOCAL_INPUTS = (
    ("stream", "TYPE_BOOL"),
    ("max_tokens", "TYPE_INT32"),
    ("temperature", "TYPE_FP32"),
    ("top_p", "TYPE_FP32"),
    ("top_k", "TYPE_INT32"),
    ("seed", "TYPE_INT64"),
    ("min_tokens", "TYPE_INT32"),
    ("ignore_eos", "TYPE_BOOL"),
    ("sampling_parameters", "TYPE_STRING"),
)
"""The local model's optional inputs (``stop``, a list of strings, comes apart)."""
USAGE_OUTPUTS = (
    ("prompt_tokens", "TYPE_INT32"),
    ("completion_tokens", "TYPE_INT32"),
    ("finish_reason", "TYPE_STRING"),
)


def local_parameters(settings: EngineSettings, env_path: Path) -> dict[str, str]:
    """The local model's config parameters: its environment and the engine's settings."""
    parameters = {
        "EXECUTION_ENV_PATH": str(env_path),
        "max_model_len": str(settings.max_model_len),
        "max_num_seqs": str(settings.max_num_seqs),
        "max_num_batched_tokens": str(settings.max_num_batched_tokens),
        "enable_chunked_prefill": flag(settings.chunked_prefill),
        "enable_prefix_caching": flag(settings.prefix_caching),
        "enforce_eager": "true",  # CUDA graphs and torch.compile cost minutes at every start on a CPU
    }
    if settings.kv_cache_bytes is not None:
        parameters["kv_cache_memory_bytes"] = str(settings.kv_cache_bytes)
    if settings.kv_cache_fraction is not None:
        parameters["gpu_memory_utilization"] = str(settings.kv_cache_fraction)
    return parameters


def local_config(name: str, settings: EngineSettings, env_path: Path) -> ModelConfig:
    """The local model's config: decoupled, one CPU instance (the engine batches), no Triton batching."""
    inputs = [text_input(), *(optional_input(n, t) for n, t in LOCAL_INPUTS)]
    inputs.append(optional_input("stop", "TYPE_STRING", (-1,)))
    outputs = [text_output(), *(ModelOutput(name=n, data_type=t, dims=[1]) for n, t in USAGE_OUTPUTS)]
    return ModelConfig(
        name=name,
        backend="python",
        max_batch_size=0,
        input=inputs,
        output=outputs,
        instance_group=[InstanceGroup(count=1, kind="KIND_CPU")],
        parameters=local_parameters(settings, env_path),
        passthrough=DECOUPLED,
    )


def write_vllm_local(
    source: LlmSource, settings: EngineSettings, model_dir: Path, env_path: Path
) -> WrittenModel:
    """Our vLLM model for the embedded server: the wrapper, the model's files, the config (not rendered)."""
    version_dir = model_dir / "1"
    version_dir.mkdir(parents=True)
    wrapper = resources.files("tritongen.convert.wrappers").joinpath(WRAPPER).read_text(encoding="utf-8")
    (version_dir / "model.py").write_text(wrapper, encoding="utf-8")
    placed = place_model_files(source, version_dir / WEIGHTS_DIR)
    engine: dict[str, object] = {
        "engine": "vllm",
        "settings": settings.to_json(),
        "environment": str(env_path),
        "model_files": list(placed),
    }
    return WrittenModel(
        name=model_dir.name,
        format="vllm",
        role="engine",
        config=local_config(model_dir.name, settings, env_path),
        files=("1/model.py", f"1/{WEIGHTS_DIR}/"),
        engine=engine,
    )


def engine_arguments(settings: EngineSettings, weights: str) -> dict[str, object]:
    """Triton's vLLM backend's ``model.json``: vLLM's engine arguments."""
    arguments: dict[str, object] = {
        "model": weights,
        "tokenizer": weights,
        "max_model_len": settings.max_model_len,
        "max_num_seqs": settings.max_num_seqs,
        "max_num_batched_tokens": settings.max_num_batched_tokens,
        "enable_chunked_prefill": settings.chunked_prefill,
        "enable_prefix_caching": settings.prefix_caching,
        "disable_log_stats": False,  # the engine's figures become Triton metrics
    }
    if settings.kv_cache_bytes is not None:
        arguments["kv_cache_memory_bytes"] = settings.kv_cache_bytes
    if settings.kv_cache_fraction is not None:
        arguments["gpu_memory_utilization"] = settings.kv_cache_fraction
    return arguments


def container_config(name: str) -> ModelConfig:
    """Triton's vLLM backend's config: decoupled, one instance the engine places (KIND_MODEL)."""
    return ModelConfig(
        name=name,
        backend="vllm",
        max_batch_size=0,
        input=[
            text_input(),
            optional_input("stream", "TYPE_BOOL"),
            optional_input("sampling_parameters", "TYPE_STRING"),
            optional_input("exclude_input_in_output", "TYPE_BOOL"),
        ],
        output=[text_output()],
        instance_group=[InstanceGroup(count=1, kind="KIND_MODEL")],
        parameters={"REPORT_CUSTOM_METRICS": "true"},
        passthrough=DECOUPLED,
    )


def write_vllm_container(source: LlmSource, settings: EngineSettings, model_dir: Path) -> WrittenModel:
    """The model directory Triton's vLLM image serves: ``model.json``, the model's files, the config."""
    version_dir = model_dir / "1"
    version_dir.mkdir(parents=True)
    placed = place_model_files(source, version_dir / WEIGHTS_DIR)
    weights = f"{CONTAINER_ROOT}/{model_dir.name}/1/{WEIGHTS_DIR}"
    arguments = engine_arguments(settings, weights)
    (version_dir / ENGINE_ARGS_FILE).write_text(json.dumps(arguments, indent=2) + "\n", encoding="utf-8")
    engine: dict[str, object] = {
        "engine": "vllm",
        "settings": settings.to_json(),
        "image_backend": "vllm",
        "model_files": list(placed),
    }
    return WrittenModel(
        name=model_dir.name,
        format="vllm",
        role="engine",
        config=container_config(model_dir.name),
        files=(f"1/{ENGINE_ARGS_FILE}", f"1/{WEIGHTS_DIR}/"),
        engine=engine,
    )
