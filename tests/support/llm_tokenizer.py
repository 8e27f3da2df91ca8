"""A small byte-level BPE tokenizer trained in code (nothing downloaded), saved as ``tokenizer.json``."""

from __future__ import annotations

from pathlib import Path

CORPUS = [
    "the quick brown fox jumps over the lazy dog",
    "every river runs toward an open sea and old stories travel along with it",
    "people build bridges paint walls and plant trees for the years that follow",
    "a tokenizer splits text into tokens and a model reads them one by one",
] * 20


def write_tokenizer(directory: Path, vocab_size: int = 300) -> Path:
    """The model directory ``directory`` with its ``tokenizer.json``; the directory."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tokenizer.train_from_iterator(CORPUS, trainer)
    directory.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(directory / "tokenizer.json"))
    return directory
