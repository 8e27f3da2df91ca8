"""The model directory as Triton reads it: platforms and backends, model files, version directories."""

from __future__ import annotations

from pathlib import Path

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
SPECIAL_DIRS = {"warmup", "initial_state", "configs"}


def version_dirs(directory: Path | None) -> list[Path]:
    """The model directory's subdirectories in the order Triton sorts them."""
    if directory is None or not directory.is_dir():
        return []
    try:
        return sorted((p for p in directory.iterdir() if p.is_dir()), key=lambda p: p.name.encode())
    except OSError:
        return []


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


def numeric_versions(directory: Path | None) -> tuple[list[int], list[str]]:
    """Version numbers Triton accepts, and the directory names it ignores (with a warning)."""
    versions: list[int] = []
    ignored: list[str] = []
    for path in version_dirs(directory):
        name = path.name
        if name in SPECIAL_DIRS:
            continue
        if (len(name) > 1 and name.startswith("0")) or not name.isdigit():
            ignored.append(name)
        else:
            versions.append(int(name))
    return versions, ignored
