"""What a command tells from a SOURCE argument before loading it: its kind, and the model name it gives."""

from __future__ import annotations

import re
from pathlib import Path

from tritongen.errors import TritongenError
from tritongen.sources.model_source import source_kind


def source_kind_or_none(source: str) -> str | None:
    """The kind of source (onnx, torchscript, pytorch), or None when it cannot be told."""
    try:
        return source_kind(source)
    except TritongenError:
        return None


def default_name(source: str | Path) -> str:
    """Derive a legal model name: ``My Model.onnx`` -> ``My_Model``; ``pkg.models:bert`` -> ``bert``."""
    text = str(source)
    factory = source_kind_or_none(text) == "pytorch"
    stem = text.rpartition(":")[2].rpartition(".")[2] if factory else Path(text).stem
    stem = re.sub(r"[^A-Za-z0-9_.\-]", "_", stem).lstrip(".-")
    return stem or "model"
