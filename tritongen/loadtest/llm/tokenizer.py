"""A model's tokenizer, read from a local Hugging Face ``tokenizer.json`` (nothing is downloaded)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tritongen.errors import ConfigError

TOKENIZER_FILE = "tokenizer.json"


def tokenizer_file(path: Path) -> Path:
    """``path`` itself, or the ``tokenizer.json`` in the directory ``path``.

    Raises:
        ConfigError: nothing there, or a directory without a ``tokenizer.json``.
    """
    if not path.exists():
        raise ConfigError(
            f"--tokenizer {path} does not exist",
            "give the model's directory or its tokenizer.json on this machine (nothing is downloaded)",
        )
    if path.is_dir():
        found = path / TOKENIZER_FILE
        if not found.is_file():
            raise ConfigError(
                f"--tokenizer {path} holds no {TOKENIZER_FILE}",
                "give the directory of a Hugging Face model, or the tokenizer.json itself",
            )
        return found
    return path


def load_tokenizer(path: Path) -> Any:
    """The ``tokenizers.Tokenizer`` of ``path`` (a directory or its ``tokenizer.json``).

    Raises:
        ConfigError: the file is missing or is not a tokenizer.
    """
    from tokenizers import Tokenizer  # a Rust extension: only when an LLM test needs it

    file = tokenizer_file(path)
    try:
        return Tokenizer.from_file(str(file))
    except Exception as e:  # the library raises a bare Exception for a file it cannot read
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise ConfigError(
            f"--tokenizer {file} is not a tokenizer: {first}", "give a Hugging Face tokenizer.json"
        ) from e


def count_tokens(tokenizer: Any, text: str) -> int:
    """Tokens of ``text`` as the model counts them, without the special tokens a template adds."""
    return len(tokenizer.encode(text, add_special_tokens=False).ids)
