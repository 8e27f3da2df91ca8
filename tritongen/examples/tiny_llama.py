"""A tiny random-weight Llama with a byte-level BPE tokenizer trained in code: an LLM server's model.

Nothing is downloaded. The model (hidden 128, 2 layers, 4 heads, 512 positions) says nothing
sensible, but a real server (vLLM) loads, batches and streams it as it would any Llama; with
``ignore_eos`` and ``min_tokens`` it answers with exactly the tokens asked, so an LLM load
test's output tokens are known. ``chat_template=False`` leaves the tokenizer without a chat
template: a completions-only model. :func:`write_tokenizer` alone makes the ``--tokenizer``
directory of a text model.

The tokenizer needs ``tokenizers`` (a dependency of tritongen); the model needs torch and
transformers, the optional extra ``tritongen[torch]``.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from tritongen.errors import MissingDependencyError

CORPUS = [
    "the quick brown fox jumps over the lazy dog",
    "every river runs toward an open sea and old stories travel along with it",
    "people build bridges paint walls and plant trees for the years that follow",
    "a tokenizer splits text into tokens and a model reads them one by one",
] * 20
"""What the tokenizer is trained on."""

CHAT_TEMPLATE = (
    "{% for message in messages %}<s>{{ message['role'] }}: {{ message['content'] }}</s>\n{% endfor %}"
    "{% if add_generation_prompt %}<s>assistant: {% endif %}"
)
"""Each message between ``<s>`` and ``</s>`` after its role, then the assistant's turn opened."""


def write_tokenizer(directory: Path, vocab_size: int = 300) -> Path:
    """``directory`` with its ``tokenizer.json`` (``<s>`` and ``</s>`` special); the directory."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        show_progress=False,  # its bars go to stdout, even where no one watches
        special_tokens=["<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tokenizer.train_from_iterator(CORPUS, trainer)
    directory.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(directory / "tokenizer.json"))
    return directory


def write_tiny_llama(directory: Path, chat_template: bool = True, seed: int = 0) -> Path:
    """A Hugging Face model directory (config, safetensors weights, tokenizer files); the directory.

    Raises:
        MissingDependencyError: torch or transformers is not installed.
    """
    try:
        import torch

        transformers: Any = importlib.import_module("transformers")  # untyped: one Any for it all
    except ImportError as e:
        raise MissingDependencyError(
            f"the tiny Llama needs torch and transformers ({e.name} is missing)",
            "install the torch extra: pip install 'tritongen[torch]'",
        ) from e
    write_tokenizer(directory)
    tokenizer = transformers.PreTrainedTokenizerFast(
        tokenizer_file=str(directory / "tokenizer.json"), bos_token="<s>", eos_token="</s>"
    )
    if chat_template:
        tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(directory)
    config = transformers.LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=512,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    torch.manual_seed(seed)
    transformers.utils.logging.disable_progress_bar()  # one shard of 1 MB: a bar says nothing
    transformers.LlamaForCausalLM(config).save_pretrained(directory, safe_serialization=True)
    return directory
