"""What a converter hands to the repository builder: files written and how Triton serves them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy.typing as npt

from tritongen.sources.signature import Signature

Target = Literal["local", "container"]
"""``local``: the embedded server (Python backend only, CPU); ``container``: the full Triton image."""

TARGETS: tuple[Target, ...] = ("local", "container")

Array = npt.NDArray[Any]

Runner = Callable[[dict[str, Array]], list[Array]]
"""Runs one batch in-process: inputs by name in, outputs in signature order out."""

Progress = Callable[[str], None]
"""Receives one-line progress messages of a long conversion."""


@dataclass(frozen=True)
class Artifact:
    """A converted model inside one version directory."""

    format: str
    backend: str
    files: tuple[str, ...]
    """Paths written, relative to the model directory (e.g. ``1/model.onnx``)."""
    platform: str = ""
    parameters: dict[str, str] = field(default_factory=dict)
    python_requirements: tuple[str, ...] = ()
    """Packages a Python-backend wrapper imports (for the container image)."""
    engine: dict[str, object] = field(default_factory=dict)
    """Format-specific facts recorded in the model's metadata (engine version, target, shapes)."""


@dataclass(frozen=True)
class OnnxBuild:
    """An ONNX model to compile into one version directory of a model, and how it is served."""

    onnx_path: Path
    signature: Signature
    model_dir: Path
    """The model directory being written (staged; the version directory goes inside)."""
    target: Target
    max_batch_size: int
    version: int = 1

    @property
    def version_dir(self) -> Path:
        """The folder the compiled files go to: ``<model_dir>/<version>``."""
        return self.model_dir / str(self.version)
