"""A language model as a source: a local Hugging Face folder (config, weights, tokenizer).

Nothing is downloaded: the folder must hold ``config.json`` naming a causal-LM architecture,
its weights (safetensors or PyTorch ``.bin`` files) and a tokenizer (``tokenizer.json``, or a
SentencePiece ``tokenizer.model``, or a vocabulary). What the engines' settings are derived
from is read from the config: the positions the model was trained for, its layers, heads and
width (the KV cache a token takes), and its data type.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tritongen.errors import SourceError

CONFIG_FILE = "config.json"
WEIGHT_PATTERNS = ("*.safetensors", "pytorch_model*.bin")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "vocab.txt", "tiktoken.model")
POSITION_KEYS = ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length", "n_ctx")
DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float8_e4m3fn": 1}


def is_llm_folder(reference: str | Path) -> bool:
    """Whether ``reference`` is a directory holding a Hugging Face ``config.json``."""
    path = Path(reference)
    return path.is_dir() and (path / CONFIG_FILE).is_file()


@dataclass(frozen=True)
class LlmSource:
    """A causal language model in a local Hugging Face folder, and the facts its engines need."""

    path: Path
    architecture: str
    model_type: str
    max_positions: int
    layers: int
    hidden_size: int
    attention_heads: int
    kv_heads: int
    head_dim: int
    vocab_size: int
    dtype: str
    weight_files: tuple[str, ...]
    tokenizer_files: tuple[str, ...]

    @property
    def kv_bytes_per_token(self) -> int:
        """The KV cache one token takes: keys and values of every layer, in the model's data type."""
        return 2 * self.layers * self.kv_heads * self.head_dim * DTYPE_BYTES.get(self.dtype, 2)

    @property
    def weight_bytes(self) -> int:
        """The weights' size on disk."""
        return sum((self.path / name).stat().st_size for name in self.weight_files)

    def describe(self) -> str:
        """One line: architecture, size, context and tokenizer."""
        return (
            f"{self.architecture} ({self.layers} layers, hidden {self.hidden_size}, {self.attention_heads} "
            f"heads, {self.kv_heads} KV heads, vocab {self.vocab_size}, {self.dtype}), "
            f"{self.max_positions} positions, weights {self.weight_bytes / 2**20:.1f} MiB"
        )


def _read_config(path: Path) -> dict[str, Any]:
    """The folder's ``config.json``.

    Raises:
        SourceError: the folder or its config is missing or not a JSON object.
    """
    if not path.is_dir():
        raise SourceError(f"{path} is not a directory", "give the folder of a Hugging Face model")
    try:
        config = json.loads((path / CONFIG_FILE).read_text(encoding="utf-8"))
    except FileNotFoundError as e:
        raise SourceError(
            f"{path} has no {CONFIG_FILE}: not a Hugging Face model folder",
            "give the folder holding config.json, the weights and the tokenizer",
        ) from e
    except (OSError, ValueError) as e:
        raise SourceError(f"cannot read {path / CONFIG_FILE}: {e}", "fix or replace the file") from e
    if not isinstance(config, dict):
        raise SourceError(f"{path / CONFIG_FILE} is not a JSON object", "fix or replace the file")
    return config


def _architecture(config: dict[str, Any], path: Path) -> str:
    """The causal-LM architecture the config names.

    Raises:
        SourceError: none, an encoder-decoder, or an architecture that is not a causal LM.
    """
    names = [str(name) for name in config.get("architectures") or []]
    if config.get("is_encoder_decoder"):
        raise SourceError(
            f"{path} holds an encoder-decoder model ({', '.join(names) or config.get('model_type')}), "
            "not a causal language model",
            "vLLM and TensorRT-LLM serve decoder-only models here; convert it as ONNX instead",
        )
    causal = [name for name in names if name.endswith(("ForCausalLM", "LMHeadModel"))]
    if not causal:
        shown = ", ".join(names) or "no architecture"
        raise SourceError(
            f"{path} is not a causal language model ({shown} in {CONFIG_FILE})",
            "give a model whose architectures name a *ForCausalLM class; others convert as ONNX",
        )
    return causal[0]


def _text_config(config: dict[str, Any]) -> dict[str, Any]:
    """The language model's part of the config (multimodal configs nest it as ``text_config``)."""
    nested = config.get("text_config")
    return {**config, **nested} if isinstance(nested, dict) else config


def _integer(config: dict[str, Any], keys: tuple[str, ...], path: Path) -> int:
    """The first positive integer the config has under one of ``keys``.

    Raises:
        SourceError: none of them is there.
    """
    for key in keys:
        value = config.get(key)
        if isinstance(value, int) and value > 0:
            return value
    raise SourceError(
        f"{path / CONFIG_FILE} has no {keys[0]}", "the config of a transformer language model names it"
    )


def _files(path: Path, patterns: tuple[str, ...]) -> tuple[str, ...]:
    """The files of ``path`` matching any of ``patterns``, sorted."""
    return tuple(sorted({p.name for pattern in patterns for p in path.glob(pattern) if p.is_file()}))


def load_llm_source(reference: str | Path) -> LlmSource:
    """Read a local Hugging Face folder as a causal language model.

    Raises:
        SourceError: not a folder with a config, not a causal LM, no weights, or no tokenizer.
    """
    path = Path(reference)
    raw = _read_config(path)
    architecture = _architecture(raw, path)
    config = _text_config(raw)
    weights = _files(path, WEIGHT_PATTERNS)
    if not weights:
        raise SourceError(
            f"{path} has no weights (*.safetensors or pytorch_model*.bin)",
            "put the model's weight files beside its config.json (nothing is downloaded)",
        )
    tokenizer = _files(path, TOKENIZER_FILES)
    if not tokenizer:
        raise SourceError(
            f"{path} has no tokenizer ({', '.join(TOKENIZER_FILES[:2])} or a vocabulary)",
            "save the tokenizer into the folder (tokenizer.save_pretrained(folder)); nothing is downloaded",
        )
    heads = _integer(config, ("num_attention_heads", "n_head", "num_heads"), path)
    hidden = _integer(config, ("hidden_size", "n_embd", "d_model"), path)
    kv_heads = config.get("num_key_value_heads")
    head_dim = config.get("head_dim")
    return LlmSource(
        path=path,
        architecture=architecture,
        model_type=str(raw.get("model_type") or ""),
        max_positions=_integer(config, POSITION_KEYS, path),
        layers=_integer(config, ("num_hidden_layers", "n_layer", "num_layers"), path),
        hidden_size=hidden,
        attention_heads=heads,
        kv_heads=kv_heads if isinstance(kv_heads, int) and kv_heads > 0 else heads,
        head_dim=head_dim if isinstance(head_dim, int) and head_dim > 0 else hidden // heads,
        vocab_size=int(config.get("vocab_size") or 0),
        dtype=str(raw.get("torch_dtype") or raw.get("dtype") or "float16"),
        weight_files=weights,
        tokenizer_files=tokenizer,
    )
