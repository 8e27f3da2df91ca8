"""What Triton fills in for a model it completes the config of: the backend, and which tensors.

Without ``config.pbtxt`` Triton starts from an empty config and fills in the backend from
the files of the first subdirectory (sorted by name), in this order: TensorFlow
(``model.graphdef``, ``model.savedmodel``), TensorRT (``model.plan``), ONNX Runtime
(``model.onnx``), OpenVINO (``model.xml``), PyTorch (``model.pt``), Python (``model.py``);
failing those, a directory named ``<name>.<backend>`` names a custom backend. A config
that declares no inputs or no outputs (:func:`undeclared_tensors`) is completed too: the
backend fills in what is missing. The TensorRT, ONNX Runtime, OpenVINO and TensorFlow
SavedModel backends read them from the model file, the Python backend calls
``TritonPythonModel.auto_complete_config`` when ``model.py`` defines it; the others fill in
nothing. Lint's rules and the code that reads the config a server runs share these answers,
and the reading of a model directory's version subdirectories they rest on.

For a model Triton completes, only the server knows the config (:func:`server_completes`
says why); ``GET /v2/models/NAME/config`` reports it as JSON with Triton's field names
(:func:`tritongen.triton.proto.config_from_served` reads it).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tritongen.triton.model_config import ModelConfig
from tritongen.triton.proto import CONFIG_FILE, read_config_file

SPECIAL_DIRS = {"warmup", "initial_state", "configs"}
"""Subdirectories of a model directory that are no versions (warm-up data, initial state, configs)."""
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
    "vllm": "the vLLM backend's auto_complete_config (text_input, stream, sampling_parameters; text_output)",
}


@dataclass(frozen=True)
class AutoFill:
    """What Triton fills in for a model directory without ``config.pbtxt`` (empty: it cannot)."""

    backend: str = ""
    platform: str = ""
    default_model_filename: str = ""
    source: str = ""
    """Where Triton read the backend from, e.g. ``1/model.onnx`` or ``the directory name``."""


def version_dirs(directory: Path | None) -> list[Path]:
    """The model directory's subdirectories in the order Triton sorts them."""
    if directory is None or not directory.is_dir():
        return []
    try:
        return sorted((p for p in directory.iterdir() if p.is_dir()), key=lambda p: p.name.encode())
    except OSError:
        return []


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


def undeclared_tensors(config: Any) -> str:
    """What a config (an ``inference.ModelConfig`` message) leaves to the backend to fill in.

    ``"inputs"``, ``"outputs"``, ``"inputs or outputs"`` (neither is declared), or ``""``
    when it declares both: then the backend has nothing to fill in.
    """
    tensors = (("inputs", config.input), ("outputs", config.output))
    missing = [kind for kind, declared in tensors if not declared]
    return " or ".join(missing)


def server_completes(model_dir: Path) -> str | None:
    """Why the server's config, not ``config.pbtxt``, describes the model (None: the file does).

    The server completes the config when there is no file, when the file declares no
    inputs or no outputs (the backend fills them in), or when a Python model's
    ``auto_complete_config`` may change it on every load.
    """
    if not (model_dir / CONFIG_FILE).exists():
        return f"no {CONFIG_FILE}"
    message = read_config_file(model_dir).message
    if message is None:
        return None  # reading the file reports the problem
    if message.platform == "ensemble":
        return None
    missing = undeclared_tensors(message)  # the condition lint's note uses too
    if missing:
        return f"{CONFIG_FILE} declares no {missing}"
    backend = message.backend or (autofill(model_dir).backend if not message.platform else "")
    versions, _ = numeric_versions(model_dir)
    if backend == "python" and versions:
        model_py = model_dir / str(max(versions)) / (message.default_model_filename or "model.py")
        if python_auto_complete(model_py) is True:
            return f"{model_py.relative_to(model_dir)} completes it in auto_complete_config"
    return None


def completed_note(config: ModelConfig, why: str) -> str:
    """What a command says when it starts from the config the server completed, ``why`` it did."""
    instances = sum(group.count for group in config.instance_group) or 1
    return (
        f"{why}: using the config the server reports (max batch {config.max_batch_size}, "
        f"{len(config.input)} input(s), {len(config.output)} output(s), "
        f"{'dynamic batching, ' if config.dynamic_batching is not None else ''}{instances} instance(s))"
    )
