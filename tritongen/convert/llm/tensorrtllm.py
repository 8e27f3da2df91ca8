"""TensorRT-LLM's inflight-batching layout for Triton's TensorRT-LLM image (``container`` only).

Four model directories: ``<name>_tensorrtllm`` (the ensemble users call: ``text_input``,
``max_tokens``, ``stream`` in, ``text_output`` out), ``…_preprocessing`` (the tokenizer:
text to ids), ``…_engine`` (``backend: "tensorrtllm"``, decoupled, inflight fused batching)
and ``…_postprocessing`` (ids to text). What must agree across them is written once from
the engine settings: the max batch size, the beam width, the KV cache share, the batching
strategy and the decoupled mode (``tritongen lint`` checks them, and against the engine
once built). The engine is built where TensorRT-LLM lives: ``build_engine.sh`` in the
engine's directory converts the Hugging Face checkpoint and runs ``trtllm-build`` with the
same settings, inside the image that serves it.
"""

from __future__ import annotations

import shlex
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
from tritongen.convert.llm.vllm import CONTAINER_ROOT
from tritongen.errors import ConfigError
from tritongen.sources.llm_source import LlmSource
from tritongen.triton.model_config import InstanceGroup, ModelConfig, ModelInput, ModelOutput, Reshape
from tritongen.triton.proto import parse_config_text

BUILD_SCRIPT = "build_engine.sh"
BEAM_WIDTH = 1
BATCHING = "inflight_fused_batching"
SCHEDULER = "max_utilization"
FAMILIES = {
    "llama": "llama",
    "mistral": "llama",
    "qwen2": "qwen",
    "qwen": "qwen",
    "gpt2": "gpt",
    "phi3": "phi",
    "gemma": "gemma",
    "gemma2": "gemma",
    "falcon": "falcon",
}
"""Hugging Face ``model_type`` → the TensorRT-LLM example folder whose ``convert_checkpoint.py`` reads it."""
DTYPES = {"float32": "float16", "float16": "float16", "bfloat16": "bfloat16"}
"""The checkpoint's data type on a GPU (float32 weights are served in float16)."""


def layout_names(name: str) -> dict[str, str]:
    """The four model directories of ``name``, by role."""
    base = f"{name}_tensorrtllm"
    return {
        "ensemble": base,
        "preprocessing": f"{base}_preprocessing",
        "engine": f"{base}_engine",
        "postprocessing": f"{base}_postprocessing",
    }


def family(source: LlmSource) -> str:
    """The TensorRT-LLM example folder of the model's type.

    Raises:
        ConfigError: a model type whose checkpoint converter tritongen does not know.
    """
    found = FAMILIES.get(source.model_type)
    if found is None:
        raise ConfigError(
            f"tritongen knows no TensorRT-LLM checkpoint converter for model type {source.model_type!r}",
            f"TensorRT-LLM layouts are written for {', '.join(sorted(FAMILIES))}; use --formats vllm",
        )
    return found


def build_arguments(settings: EngineSettings) -> list[str]:
    """``trtllm-build``'s options: the settings, and the paged KV cache inflight batching needs."""
    arguments = [
        "--max_batch_size", str(settings.max_num_seqs),
        "--max_num_tokens", str(settings.max_num_batched_tokens),
        "--max_seq_len", str(settings.max_model_len),
        "--max_input_len", str(max(1, settings.max_model_len - 1)),
        "--max_beam_width", str(BEAM_WIDTH),
        "--kv_cache_type", "paged",
        "--remove_input_padding", "enable",
        "--gemm_plugin", "auto",
    ]  # fmt: skip
    if settings.chunked_prefill or settings.prefix_caching:
        arguments += ["--use_paged_context_fmha", "enable"]  # chunked context and KV reuse need it
    return arguments


def build_script(source: LlmSource, settings: EngineSettings, engine_name: str) -> str:
    """The shell script that builds the engine, in Triton's TensorRT-LLM image or wherever it lives.

    ``$MODELS`` is the repository's root (``/models`` in the image, mounted writable); the
    engine goes to the engine model's version directory, where ``gpt_model_path`` points.
    """
    example = family(source)
    build = shlex.join(
        ["trtllm-build", "--checkpoint_dir", "@CHECKPOINT@", "--output_dir", "@ENGINE@/1",
         *build_arguments(settings)]
    ).replace("@CHECKPOINT@", '"$CHECKPOINT"').replace("@ENGINE@", '"$ENGINE"')  # fmt: skip
    return f"""#!/usr/bin/env bash
# Builds the TensorRT-LLM engine of {engine_name} (written by tritongen) in Triton's TensorRT-LLM image:
#   {build_command(engine_name, "REPOSITORY", "IMAGE")}
set -euo pipefail
MODELS="${{MODELS:-{CONTAINER_ROOT}}}"
ENGINE="$MODELS/{engine_name}"
EXAMPLES="${{TRTLLM_EXAMPLES:-/app/tensorrt_llm/examples}}"
CONVERT="$EXAMPLES/models/core/{example}/convert_checkpoint.py"
[ -f "$CONVERT" ] || CONVERT="$EXAMPLES/{example}/convert_checkpoint.py"
CHECKPOINT="$(mktemp -d)"
trap 'rm -rf "$CHECKPOINT"' EXIT
python3 "$CONVERT" --model_dir "$ENGINE/1/{WEIGHTS_DIR}" --output_dir "$CHECKPOINT" \\
    --dtype {DTYPES.get(source.dtype, "float16")} --tp_size 1
{build}
"""


def build_command(engine_name: str, repo: str, image: str) -> str:
    """The ``docker run`` that builds the engine of a repository at ``repo`` in ``image``."""
    script = f"{CONTAINER_ROOT}/{engine_name}/{BUILD_SCRIPT}"
    return f'docker run --rm --gpus all -v "{repo}:{CONTAINER_ROOT}" {image} bash {script}'


def scalar_input(name: str, data_type: str, optional: bool = True) -> ModelInput:
    """A one-value input of a batching model, taken as a scalar per request."""
    return ModelInput(
        name=name,
        data_type=data_type,
        dims=[1],
        reshape=Reshape(shape=[]),
        optional=optional,
    )


def engine_config(name: str, settings: EngineSettings, source: LlmSource) -> ModelConfig:
    """The ``tensorrtllm`` backend's config: decoupled, inflight fused batching, the KV cache's size."""
    parameters = {
        "gpt_model_type": BATCHING,
        "gpt_model_path": f"{CONTAINER_ROOT}/{name}/1",
        "max_beam_width": str(BEAM_WIDTH),
        "batch_scheduler_policy": SCHEDULER,
        "enable_chunked_context": flag(settings.chunked_prefill),
        "enable_kv_cache_reuse": flag(settings.prefix_caching),
        "exclude_input_in_output": "true",
    }
    if settings.kv_cache_fraction is not None:
        parameters["kv_cache_free_gpu_mem_fraction"] = str(settings.kv_cache_fraction)
    if settings.kv_cache_bytes is not None:
        parameters["max_tokens_in_paged_kv_cache"] = str(settings.kv_cache_bytes // source.kv_bytes_per_token)
    return ModelConfig(
        name=name,
        backend="tensorrtllm",
        max_batch_size=settings.max_num_seqs,
        input=[
            ModelInput(name="input_ids", data_type="TYPE_INT32", dims=[-1], allow_ragged_batch=True),
            scalar_input("input_lengths", "TYPE_INT32", optional=False),
            scalar_input("request_output_len", "TYPE_INT32", optional=False),
            scalar_input("end_id", "TYPE_INT32"),
            scalar_input("pad_id", "TYPE_INT32"),
            scalar_input("streaming", "TYPE_BOOL"),
            scalar_input("beam_width", "TYPE_INT32"),
            scalar_input("temperature", "TYPE_FP32"),
        ],
        output=[
            ModelOutput(name="output_ids", data_type="TYPE_INT32", dims=[-1, -1]),
            ModelOutput(name="sequence_length", data_type="TYPE_INT32", dims=[-1]),
        ],
        instance_group=[InstanceGroup(count=1, kind="KIND_CPU")],  # the backend places the engine on its GPUs
        parameters=parameters,
        passthrough=DECOUPLED,
    )


def preprocessing_config(name: str, settings: EngineSettings) -> ModelConfig:
    """The tokenizer in front: text and the output length in, the engine's inputs out."""
    return ModelConfig(
        name=name,
        backend="python",
        max_batch_size=settings.max_num_seqs,
        input=[text_input(), ModelInput(name="max_tokens", data_type="TYPE_INT32", dims=[1], optional=True)],
        output=[
            ModelOutput(name="input_ids", data_type="TYPE_INT32", dims=[-1]),
            *(ModelOutput(name=n, data_type="TYPE_INT32", dims=[1]) for n in ENGINE_SCALARS),
        ],
        instance_group=[InstanceGroup(count=1, kind="KIND_CPU")],
    )


def postprocessing_config(name: str, settings: EngineSettings) -> ModelConfig:
    """The tokenizer behind: the engine's ids in, text out."""
    return ModelConfig(
        name=name,
        backend="python",
        max_batch_size=settings.max_num_seqs,
        input=[
            ModelInput(name="tokens_batch", data_type="TYPE_INT32", dims=[-1, -1]),
            ModelInput(name="sequence_length", data_type="TYPE_INT32", dims=[-1]),
        ],
        output=[text_output()],
        instance_group=[InstanceGroup(count=1, kind="KIND_CPU")],
    )


ENGINE_SCALARS = ("input_lengths", "request_output_len", "end_id", "pad_id")
"""The preprocessing outputs the engine takes as they are, besides ``input_ids``."""


def _maps(kind: str, pairs: list[tuple[str, str]]) -> str:
    return "".join(f'      {kind} {{ key: "{key}" value: "{value}" }}\n' for key, value in pairs)


def _step(model: str, inputs: list[tuple[str, str]], outputs: list[tuple[str, str]]) -> str:
    return (
        f'    {{\n      model_name: "{model}"\n      model_version: -1\n'
        + _maps("input_map", inputs)
        + _maps("output_map", outputs)
        + "    }"
    )


def ensemble_config(names: dict[str, str], settings: EngineSettings) -> ModelConfig:
    """The ensemble users call: preprocessing, the engine (streaming when ``stream``), postprocessing."""
    scalars = [(n, f"_{n}") for n in ("input_ids", *ENGINE_SCALARS)]
    steps = [
        _step(names["preprocessing"], [("text_input", "text_input"), ("max_tokens", "max_tokens")], scalars),
        _step(
            names["engine"],
            [*((k, v) for k, v in scalars), ("streaming", "stream"), ("temperature", "temperature")],
            [("output_ids", "_output_ids"), ("sequence_length", "_sequence_length")],
        ),
        _step(
            names["postprocessing"],
            [("tokens_batch", "_output_ids"), ("sequence_length", "_sequence_length")],
            [("text_output", "text_output")],
        ),
    ]
    written = "ensemble_scheduling {\n  step [\n" + ",\n".join(steps) + "\n  ]\n}"
    scheduling = parse_config_text(written, "ensemble_scheduling", default_name=names["ensemble"]).passthrough
    return ModelConfig(
        name=names["ensemble"],
        platform="ensemble",
        max_batch_size=settings.max_num_seqs,
        input=[
            text_input(),
            ModelInput(name="max_tokens", data_type="TYPE_INT32", dims=[1]),
            optional_input("stream", "TYPE_BOOL"),
            optional_input("temperature", "TYPE_FP32"),
        ],
        output=[text_output()],
        passthrough=scheduling,
    )


def write_tensorrtllm(
    source: LlmSource, settings: EngineSettings, staged: Path, name: str
) -> list[WrittenModel]:
    """The four model directories of the layout and the engine's build script, in ``staged``.

    Raises:
        ConfigError: a model type tritongen cannot write the checkpoint conversion of.
    """
    names = layout_names(name)
    script = build_script(source, settings, names["engine"])
    wrappers = resources.files("tritongen.convert.wrappers")
    written: list[WrittenModel] = []
    engine_facts: dict[str, object] = {
        "engine": "tensorrtllm",
        "settings": settings.to_json(),
        "layout": names,
        "build": {
            "script": BUILD_SCRIPT,
            "trtllm_build": build_arguments(settings),
            "max_beam_width": BEAM_WIDTH,
        },
        "built": False,
    }
    for role in ("preprocessing", "postprocessing"):
        version_dir = staged / names[role] / "1"
        version_dir.mkdir(parents=True)
        code = wrappers.joinpath(f"trtllm_{role}.py").read_text(encoding="utf-8")
        (version_dir / "model.py").write_text(code, encoding="utf-8")
        place_model_files(source, version_dir / "tokenizer", weights=False)
        maker = preprocessing_config if role == "preprocessing" else postprocessing_config
        written.append(
            WrittenModel(names[role], "tensorrtllm", role, maker(names[role], settings),
                         ("1/model.py", "1/tokenizer/"), {"engine": "tensorrtllm", "layout": names})
        )  # fmt: skip
    engine_dir = staged / names["engine"]
    place_model_files(source, engine_dir / "1" / WEIGHTS_DIR)
    (engine_dir / BUILD_SCRIPT).write_text(script, encoding="utf-8")
    (engine_dir / BUILD_SCRIPT).chmod(0o755)
    config = engine_config(names["engine"], settings, source)
    files = (BUILD_SCRIPT, f"1/{WEIGHTS_DIR}/")
    written.append(WrittenModel(names["engine"], "tensorrtllm", "engine", config, files, engine_facts))
    (staged / names["ensemble"] / "1").mkdir(parents=True)
    written.append(
        WrittenModel(names["ensemble"], "tensorrtllm", "ensemble", ensemble_config(names, settings), ("1/",),
                     {"engine": "tensorrtllm", "layout": names})
    )  # fmt: skip
    return written
