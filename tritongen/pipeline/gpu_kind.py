"""Where ``--kind gpu`` works: the engines a KIND_GPU instance group can run, refused in one line elsewhere.

The embedded (``local``) server has only the Python backend: its wrappers run TorchScript
on the instance's GPU when torch has CUDA, and TVM libraries built for CUDA; ONNX Runtime
there runs on the CPU and there is no TensorRT backend. A TVM library built for a CPU
runs on the CPU whatever the target. The ``container`` target's image brings its own
engines, so nothing about this machine is checked for it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tritongen.convert.tvm import METADATA, resolve_target
from tritongen.errors import ConfigError
from tritongen.pipeline.request import BuildRequest
from tritongen.triton.batching import resolve_kind
from tritongen.triton.model_config import ModelConfig
from tritongen.triton.repository import read_metadata

GPU_HINT = "use --kind cpu, or run on a GPU host"


def check_gpu_kind(fmt: str, target: str | None, tvm_device: str | None = None) -> None:
    """Refuse ``--kind gpu`` for ``fmt`` on ``target`` where a KIND_GPU instance cannot run it.

    ``tvm_device`` is what a TVM library is built for: ``cuda``, or a CPU target kind (``llvm``).

    Raises:
        ConfigError: the engine cannot run on a GPU instance there.
    """
    if fmt == "tvm":
        _check_tvm(tvm_device or "llvm", here=target == "local")
        return
    if target != "local":
        return
    if fmt == "torchscript":
        _check_torch()
    elif fmt == "onnx":
        raise ConfigError(
            "--kind gpu: ONNX Runtime in the embedded server runs on CPU",
            "use --formats torchscript (or tvm with --tvm-target cuda), or --target container for a GPU host",
        )
    elif fmt == "tensorrt":
        raise ConfigError(
            "--kind gpu: the embedded server has no TensorRT backend", "use --target container for a GPU host"
        )


def check_build_kind(request: BuildRequest) -> None:
    """Refuse a build's ``--kind gpu`` before anything is loaded, converted or written.

    Raises:
        ConfigError: one of the requested formats cannot run on a GPU instance of the target.
    """
    if request.options.kind != "gpu":
        return
    for fmt in request.formats:
        check_gpu_kind(fmt, request.target, tvm_target_kind(request.tvm.target) if fmt == "tvm" else None)


def check_render_kind(model_dir: Path, kind: str | None) -> None:
    """Refuse ``render --kind gpu`` on a model whose engine (from tritongen's metadata) cannot run there.

    A model without tritongen's metadata is not judged (its target is unknown).

    Raises:
        ConfigError: the model's engine cannot run on a GPU instance of its target.
    """
    if kind != "gpu":
        return
    data = read_metadata(model_dir) or {}
    fmt, target = data.get("format"), data.get("target")
    if not isinstance(fmt, str):
        return
    engine = data.get("engine")
    if not isinstance(engine, dict):
        engine = {}
    device = _tvm_library_kind(model_dir, engine) if fmt == "tvm" else None
    check_gpu_kind(fmt, target if isinstance(target, str) else None, device)


def tvm_target_kind(text: str | None) -> str:
    """The kind of ``--tvm-target`` (``llvm``, ``cuda``, ...), without importing TVM for the default."""
    if text is None or text.strip() in ("", "llvm"):
        return "llvm"
    return str(resolve_target(text)["kind"])


def verification_device(fmt: str, config: ModelConfig, target: str, engine: dict[str, Any]) -> int | None:
    """The CUDA device an artifact is verified on: its instance group's, where the engine runs there here.

    ``None`` means the CPU. On ``local`` a KIND_GPU group was checked by :func:`check_build_kind`;
    a ``container`` model is verified on a GPU only where this machine's engine has one.
    """
    groups = config.instance_group
    if not groups or groups[0].kind != "KIND_GPU" or fmt not in ("torchscript", "tvm"):
        return None
    device = groups[0].gpus[0] if groups[0].gpus else 0
    if target == "local":
        return device
    if fmt == "tvm":
        return device if engine.get("device") == "cuda" and _tvm_sees_gpu(device) else None
    try:
        import torch
    except ImportError:
        return None
    return device if torch.cuda.is_available() else None


def trace_device(request: BuildRequest) -> str:
    """Where a PyTorch source is traced: ``cuda:0`` for TorchScript served on a GPU, else the CPU.

    A trace records the device of tensors made inside ``forward``; tracing on the CPU would
    pin them there. Only where torch here has CUDA.
    """
    if "torchscript" not in request.formats:
        return "cpu"
    if resolve_kind(request.options.kind or "auto", request.target) != "KIND_GPU":
        return "cpu"
    try:
        import torch
    except ImportError:
        return "cpu"
    if not torch.cuda.is_available():
        return "cpu"
    return "cuda:0"  # the instance group's first GPU: tritongen writes groups without a gpus list


def _check_torch() -> None:
    """Refuse where torch here cannot put a module on a GPU (a missing torch is reported elsewhere)."""
    try:
        import torch
    except ImportError:
        return
    if torch.cuda.is_available():
        return
    if torch.version.cuda is None:
        raise ConfigError(
            f"torch {torch.__version__} has no CUDA: "
            "--kind gpu needs a CUDA build of torch and an NVIDIA GPU",
            GPU_HINT,
        )
    raise ConfigError(
        f"torch {torch.__version__} sees no CUDA GPU: --kind gpu needs an NVIDIA GPU on this machine",
        GPU_HINT,
    )


def _check_tvm(kind: str, here: bool) -> None:
    """Refuse a TVM library built for a CPU, or a CUDA one served ``here`` where TVM sees no GPU.

    A container's GPU host is not this machine: nothing about this machine is checked for it.
    """
    if kind != "cuda":
        raise ConfigError(
            f"--kind gpu: a TVM library built for {kind} runs on the CPU",
            "convert with --tvm-target cuda, or use --kind cpu",
        )
    if not here:
        return
    try:
        import tvm
    except Exception:  # a missing or broken TVM is reported by the build itself
        return
    if not tvm.cuda(0).exist:
        raise ConfigError("--kind gpu: TVM sees no CUDA GPU (tvm.cuda(0) does not exist)", GPU_HINT)


def _tvm_sees_gpu(device: int) -> bool:
    try:
        import tvm
    except Exception:  # a missing or broken TVM is reported by the build itself
        return False
    return bool(tvm.cuda(device).exist)


def _tvm_library_kind(model_dir: Path, engine: dict[str, Any]) -> str:
    """What a TVM model's library is built for: ``cuda`` or its target kind, from its newest version."""
    versions = sorted(
        (p for p in model_dir.iterdir() if p.name.isdigit() and (p / METADATA).is_file()),
        key=lambda p: int(p.name),
    )
    facts = engine
    if versions:
        try:
            facts = json.loads((versions[-1] / METADATA).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            facts = engine
    if facts.get("device") == "cuda":
        return "cuda"
    spec = facts.get("target")
    return str(spec.get("kind", "llvm")) if isinstance(spec, dict) else "llvm"
