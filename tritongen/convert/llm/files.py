"""What every LLM model directory shares: the model's files placed in it, and the text model's tensors.

The weights, config and tokenizer files of the Hugging Face folder go into the version
directory (hard-linked where the repository is on the same file system, else copied), so a
repository carries its model; checkpoints in other formats beside safetensors are left out.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from tritongen.sources.llm_source import LlmSource
from tritongen.triton.model_config import ModelConfig, ModelInput, ModelOutput

WEIGHTS_DIR = "hf"
"""The folder of a version directory holding the model's files."""
OTHER_CHECKPOINTS = (".bin", ".pt", ".pth", ".msgpack", ".h5", ".gguf", ".ckpt")
DECOUPLED = "model_transaction_policy {\n  decoupled: true\n}"


@dataclass(frozen=True)
class WrittenModel:
    """One model directory an LLM format wrote into the staging directory."""

    name: str
    format: str
    role: str
    """Its part in the format's layout: ``engine``, ``preprocessing``, ``postprocessing``, ``ensemble``."""
    config: ModelConfig
    files: tuple[str, ...]
    engine: dict[str, object]


def place_model_files(source: LlmSource, folder: Path, weights: bool = True) -> tuple[str, ...]:
    """Hard-link (or copy) the model's top-level files into ``folder``; their names.

    With safetensors weights, the other checkpoint formats of the folder are not taken;
    without ``weights``, no weight file is (a tokenizer's folder).
    """
    folder.mkdir(parents=True, exist_ok=True)
    safetensors = any(name.endswith(".safetensors") for name in source.weight_files)
    placed = []
    for path in sorted(source.path.iterdir()):
        if not path.is_file() or path.name.startswith("."):
            continue
        if safetensors and path.suffix in OTHER_CHECKPOINTS:
            continue
        if not weights and (path.name in source.weight_files or path.suffix in OTHER_CHECKPOINTS):
            continue
        target = folder / path.name
        try:
            os.link(path, target)
        except OSError:  # another file system, or links refused
            shutil.copy2(path, target)
        placed.append(path.name)
    return tuple(placed)


def text_input() -> ModelInput:
    """The prompt: one string."""
    return ModelInput(name="text_input", data_type="TYPE_STRING", dims=[1])


def optional_input(name: str, data_type: str, dims: tuple[int, ...] = (1,)) -> ModelInput:
    """An optional request input."""
    return ModelInput(name=name, data_type=data_type, dims=list(dims), optional=True)


def text_output() -> ModelOutput:
    """The answer's text (a token's, streamed)."""
    return ModelOutput(name="text_output", data_type="TYPE_STRING", dims=[-1])


def flag(value: bool) -> str:
    """A boolean as engine parameters spell it."""
    return "true" if value else "false"
