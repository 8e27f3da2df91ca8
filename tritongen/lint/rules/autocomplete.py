"""Configs Triton completes itself: model directories without config.pbtxt, and configs without tensors.

Without ``config.pbtxt`` Triton starts from an empty config and fills in the backend from
the files of the first subdirectory (sorted by name), in this order: TensorFlow
(``model.graphdef``, ``model.savedmodel``), TensorRT (``model.plan``), ONNX Runtime
(``model.onnx``), OpenVINO (``model.xml``), PyTorch (``model.pt``), Python (``model.py``);
failing those, a directory named ``<name>.<backend>`` names a custom backend. The backend
then fills in inputs, outputs and ``max_batch_size``: the TensorRT, ONNX Runtime, OpenVINO
and TensorFlow SavedModel backends read them from the model file, the Python backend calls
``TritonPythonModel.auto_complete_config`` when ``model.py`` defines it; the others fill in
nothing.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tritongen.lint.rules.context import ModelContext
from tritongen.lint.rules.layout import numeric_versions, version_dirs

CONFIG_FILE = "config.pbtxt"
PYTHON_CLASS = "TritonPythonModel"
AUTO_COMPLETE_METHOD = "auto_complete_config"

# (file, must be a directory (True), a file (False) or either (None), backend, platform), in Triton's order.
MODEL_FILES: tuple[tuple[str, bool | None, str, str], ...] = (
    ("model.graphdef", False, "tensorflow", "tensorflow_graphdef"),
    ("model.savedmodel", True, "tensorflow", "tensorflow_savedmodel"),
    ("model.plan", False, "tensorrt", "tensorrt_plan"),
    ("model.onnx", None, "onnxruntime", "onnxruntime_onnx"),
    ("model.xml", None, "openvino", ""),
    ("model.pt", False, "pytorch", "pytorch_libtorch"),
    ("model.py", None, "python", ""),
)
KNOWN_FILES = tuple(name for name, *_ in MODEL_FILES)

# What each backend reads inputs, outputs and max_batch_size from (Python: see auto_complete_config).
FILLED_FROM = {
    "tensorrt_plan": "the TensorRT plan",
    "onnxruntime_onnx": "the ONNX graph",
    "tensorflow_savedmodel": "the SavedModel's signature",
    "openvino": "the OpenVINO model",
}


@dataclass(frozen=True)
class AutoFill:
    """What Triton fills in for a model directory without ``config.pbtxt`` (empty: it cannot)."""

    backend: str = ""
    platform: str = ""
    default_model_filename: str = ""
    source: str = ""
    """Where Triton read the backend from, e.g. ``1/model.onnx`` or ``the directory name``."""


def _matches(path: Path, directory: bool | None) -> bool:
    if directory is None:
        return path.exists()
    return path.is_dir() if directory else path.is_file()


def autofill(directory: Path) -> AutoFill:
    """The backend, platform and model file Triton infers for ``directory`` when it has no config."""
    dirs = version_dirs(directory)
    if dirs:
        first = dirs[0]
        for name, is_dir, backend, platform in MODEL_FILES:
            if _matches(first / name, is_dir):
                return AutoFill(backend, platform, name, f"{first.name}/{name}")
    if "." in directory.name:
        backend = directory.name.split(".", 1)[1]
        return AutoFill(backend, "", f"model.{backend}", "the directory name")
    return AutoFill()


def _holds_model_file(directory: Path) -> bool:
    """Whether a subdirectory of ``directory`` holds a model file Triton recognises."""
    subdirs = [sub for sub in version_dirs(directory) if sub.name not in KNOWN_FILES]
    return any((sub / name).exists() for sub in subdirs for name in KNOWN_FILES)


def looks_like_model(directory: Path) -> bool:
    """Whether ``directory`` looks like a model directory: a config, or a model file in a subdirectory."""
    return (directory / CONFIG_FILE).is_file() or _holds_model_file(directory)


def is_model_directory(path: Path) -> bool:
    """Whether ``path`` is one model directory rather than a repository of them."""
    if (path / CONFIG_FILE).is_file():
        return True
    return _holds_model_file(path) and not any(looks_like_model(sub) for sub in version_dirs(path))


def autofilled_config(directory: Path) -> Any:
    """The ``inference.ModelConfig`` message Triton starts from for a directory without config."""
    from tritonclient.grpc import model_config_pb2

    fill = autofill(directory)
    return model_config_pb2.ModelConfig(
        name=directory.name,
        backend=fill.backend,
        platform=fill.platform,
        default_model_filename=fill.default_model_filename,
    )


def python_auto_complete(path: Path) -> bool | SyntaxError:
    """Whether ``model.py`` defines ``TritonPythonModel.auto_complete_config`` (the error if unparsable).

    The file is parsed, never run: a method inherited from another class is not seen.
    """
    try:
        tree = ast.parse(path.read_bytes(), filename=str(path))
    except SyntaxError as e:
        return e
    except (OSError, ValueError) as e:
        return SyntaxError(str(e))
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == PYTHON_CLASS:
            return any(
                isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and item.name == AUTO_COMPLETE_METHOD
                for item in node.body
            )
    return False


def _served_version(ctx: ModelContext) -> Path | None:
    """The directory of the newest numeric version (the one Triton serves by default)."""
    versions, _ = numeric_versions(ctx.directory)
    if ctx.directory is None or not versions:
        return None
    return ctx.directory / str(max(versions))


def check_auto_complete(ctx: ModelContext) -> None:
    """Say what Triton fills in (a note), and whether it can: no backend, or no inputs and outputs."""
    if ctx.directory is None or not ctx.check_files or ctx.is_ensemble:
        return
    name = ctx.directory.name
    if ctx.auto_completed and not ctx.backend:
        dirs = version_dirs(ctx.directory)
        missing = (
            f"{dirs[0].name}/ (the first subdirectory) holds none of {', '.join(KNOWN_FILES)}"
            if dirs
            else "no subdirectory holding a model file"
        )
        ctx.error(
            "autocomplete.no-backend",
            "",
            f"no config.pbtxt, and {missing}: Triton cannot tell the backend and refuses the directory",
            f'write {name}/config.pbtxt naming the backend (e.g. backend: "python"), '
            f"or put the model file at {name}/1/, or move the directory out of the repository",
        )
        return
    if ctx.config.input or ctx.config.output:
        return  # declared: Triton has nothing to fill in
    lead = "no config.pbtxt" if ctx.auto_completed else "the config declares no inputs or outputs"
    fill = autofill(ctx.directory) if ctx.auto_completed else AutoFill(backend=ctx.backend)
    filled = (
        f"no config.pbtxt: Triton fills it in: backend '{ctx.backend}' from {fill.source}; "
        if ctx.auto_completed
        else f"{lead}: Triton fills them in: "
    )
    if ctx.backend == "python":
        _check_python(ctx, lead, filled)
        return
    source = FILLED_FROM.get(ctx.platform) or FILLED_FROM.get(ctx.backend)
    if source is not None:
        ctx.note(
            "autocomplete.filled",
            "",
            f"{filled}inputs, outputs and max_batch_size from {source}",
            "nothing to do; the full Triton image has this backend, the embedded server only the Python one "
            "(serve it with docker compose)",
        )
        return
    if fill.source == "the directory name":
        ctx.warning(
            "autocomplete.backend-from-name",
            "",
            f"no config.pbtxt: Triton takes the backend '{ctx.backend}' from the directory name "
            f"(after its first '.') and looks for {fill.default_model_filename}",
            f"write {name}/config.pbtxt naming the backend, or rename the directory",
        )
        return
    ctx.warning(
        "autocomplete.no-io",
        "",
        f"{lead}, and Triton's '{ctx.backend}' backend does not fill them in: the model has none",
        f"declare the inputs and outputs in {name}/config.pbtxt",
    )


def _check_python(ctx: ModelContext, lead: str, filled: str) -> None:
    """A Python model without declared tensors: its ``auto_complete_config`` must supply them."""
    version = _served_version(ctx)
    if version is None or ctx.directory is None:
        return  # the version rules report it
    filename = str(ctx.config.default_model_filename) or "model.py"
    path = version / filename
    shown = f"{version.name}/{filename}"
    if not path.is_file():
        return  # the model-file rule reports it
    found = python_auto_complete(path)
    if isinstance(found, SyntaxError):
        ctx.error(
            "autocomplete.python-syntax",
            "",
            f"{shown} does not parse ({found.msg or found}, line {found.lineno}): "
            "the Python backend refuses it",
            f"fix {ctx.directory.name}/{shown}",
        )
    elif found:
        ctx.note(
            "autocomplete.filled",
            "",
            f"{filled}inputs, outputs and max_batch_size from {PYTHON_CLASS}.{AUTO_COMPLETE_METHOD} "
            f"in {shown}",
            "nothing to do; write config.pbtxt (or let `tritongen tune --apply` write it) "
            "to pin the settings",
        )
    else:
        ctx.warning(
            "autocomplete.python-no-io",
            "",
            f"{lead}, and {shown} defines no {PYTHON_CLASS}.{AUTO_COMPLETE_METHOD}: "
            "Triton serves the model with no inputs or outputs",
            f"declare them in {ctx.directory.name}/config.pbtxt, or add {AUTO_COMPLETE_METHOD} to "
            f"{PYTHON_CLASS}",
        )
