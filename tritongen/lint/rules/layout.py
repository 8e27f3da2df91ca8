"""The model directory as Triton reads it: platforms and backends, and their model files.

Its version directories (which subdirectories count, in which order) are in
:mod:`tritongen.triton.autofill`.
"""

from __future__ import annotations

from pathlib import Path

from tritongen.triton.autofill import version_dirs

# platform -> backend, and each backend's default model file (Triton's constants).
PLATFORM_BACKENDS = {
    "tensorflow_graphdef": "tensorflow",
    "tensorflow_savedmodel": "tensorflow",
    "tensorrt_plan": "tensorrt",
    "onnxruntime_onnx": "onnxruntime",
    "pytorch_libtorch": "pytorch",
}
DEFAULT_FILES = {
    "tensorflow_graphdef": "model.graphdef",
    "tensorflow_savedmodel": "model.savedmodel",
    "tensorrt": "model.plan",
    "onnxruntime": "model.onnx",
    "pytorch": "model.pt",
    "python": "model.py",
    "openvino": "model.xml",
}
CHECKED_BACKENDS = {"tensorflow", "tensorrt", "onnxruntime", "pytorch"}
"""Backends whose platform Triton checks against the backend."""


def detect_backend(directory: Path | None) -> str | None:
    """The backend Triton infers from the files of the first subdirectory (sorted by name)."""
    dirs = version_dirs(directory)
    if not dirs:
        return None
    first = dirs[0]
    for backend, filename in (
        ("tensorrt", "model.plan"),
        ("onnxruntime", "model.onnx"),
        ("openvino", "model.xml"),
        ("pytorch", "model.pt"),
        ("python", "model.py"),
    ):
        if (first / filename).exists():
            return backend
    if (first / "model.savedmodel").is_dir() or (first / "model.graphdef").is_file():
        return "tensorflow"
    return None
