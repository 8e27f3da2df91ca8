"""Building a plan here: with the ``tensorrt`` Python API when it imports, else with ``trtexec``."""

from __future__ import annotations

import importlib
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

from tritongen.convert.artifact import Progress
from tritongen.convert.tensorrt.options import TensorRtOptions
from tritongen.convert.tensorrt.profiles import ShapeProfile
from tritongen.convert.tensorrt.versions import version_from_log
from tritongen.errors import ConversionError

UNAVAILABLE = "TensorRT is not available here (no `tensorrt` module, no `trtexec` on PATH)"


def import_tensorrt() -> Any | None:
    """The ``tensorrt`` module, or None where it does not import."""
    try:
        return importlib.import_module("tensorrt")
    except ImportError:
        return None


class Builders(NamedTuple):
    """What can build a plan here; the first one present is used."""

    trt: Any | None
    """The ``tensorrt`` module."""
    trtexec: str | None
    """The path of ``trtexec``, looked up only without the module."""


def find_builders() -> Builders:
    """The ``tensorrt`` module and, only without it, the ``trtexec`` path; each None when absent."""
    trt = import_tensorrt()
    return Builders(trt, None if trt is not None else shutil.which("trtexec"))


def tensorrt_unavailable_reason() -> str | None:
    """Why no plan can be built on this machine; None when the tensorrt module or trtexec exists."""
    if import_tensorrt() is not None or shutil.which("trtexec") is not None:
        return None
    return UNAVAILABLE


def build_with_trtexec(
    argv: list[str], progress: Progress | None = None, timeout_s: float = 3600
) -> str | None:
    """Run ``trtexec`` and return the TensorRT version its log reports.

    Raises:
        ConversionError: ``trtexec`` fails or times out; the message carries the log's last lines.
    """
    lines: list[str] = []
    try:
        process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    except OSError as e:
        raise ConversionError(f"cannot run {argv[0]}: {e.strerror}", "check the trtexec installation") from e
    assert process.stdout is not None
    for line in process.stdout:
        lines.append(line.rstrip())
        if progress is not None and ("[E]" in line or "[W]" in line):
            progress(line.rstrip())
    try:
        code = process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired as e:
        process.kill()
        raise ConversionError(
            f"trtexec ran past {timeout_s:.0f} s", "raise the limit or simplify the model"
        ) from e
    if code != 0:
        tail = " | ".join(line for line in lines[-8:] if line.strip())
        raise ConversionError(f"trtexec failed with exit code {code}: {tail}", "see the trtexec log above")
    return version_from_log("\n".join(lines))


def build_with_python_api(
    trt: Any, onnx_path: Path, plan_path: Path, profiles: Mapping[str, ShapeProfile], options: TensorRtOptions
) -> str:
    """Build the plan with the ``tensorrt`` Python API and return its version.

    Raises:
        ConversionError: parsing or building fails.
    """
    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    network, _parser = _parse_network(trt, builder, logger, onnx_path, options.strongly_typed)
    config = builder.create_builder_config()
    if options.workspace_mb is not None:
        config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, options.workspace_mb << 20)
    if not options.strongly_typed:
        _set_precision(trt, config, network, options)
    _add_profile(builder, config, profiles)
    timing = _use_timing_cache(config, options.timing_cache)
    serialized = builder.build_serialized_network(network, config)
    if serialized is None:
        raise ConversionError(
            f"TensorRT could not build a plan for {onnx_path.name}", "run with trtexec --verbose"
        )
    plan_path.parent.mkdir(parents=True, exist_ok=True)
    plan_path.write_bytes(bytes(serialized))
    if timing is not None and options.timing_cache is not None:
        options.timing_cache.write_bytes(bytes(config.get_timing_cache().serialize()))
    return str(trt.__version__)


def _parse_network(
    trt: Any, builder: Any, logger: Any, onnx_path: Path, strongly_typed: bool
) -> tuple[Any, Any]:
    """The network parsed from ``onnx_path``, and its parser (which owns the weights until the build).

    Raises:
        ConversionError: the parser rejects the model.
    """
    flags = 0
    if strongly_typed:
        flags |= 1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED)
    network = builder.create_network(flags)
    parser = trt.OnnxParser(network, logger)
    if not parser.parse_from_file(str(onnx_path)):
        errors = "; ".join(str(parser.get_error(i)) for i in range(parser.num_errors))
        raise ConversionError(
            f"TensorRT cannot parse {onnx_path.name}: {errors}", "simplify or re-export the model"
        )
    return network, parser


def _set_precision(trt: Any, config: Any, network: Any, options: TensorRtOptions) -> None:
    """The builder flags of a weakly typed network: FP16/INT8, a calibration cache, kept FP32 layers."""
    if options.precision in ("fp16", "int8"):
        config.set_flag(trt.BuilderFlag.FP16)
    if options.precision == "int8":
        config.set_flag(trt.BuilderFlag.INT8)
        if options.calibration_cache is not None:
            config.int8_calibrator = _cache_calibrator(trt, options.calibration_cache)
    if options.keep_fp32_layers:
        config.set_flag(trt.BuilderFlag.OBEY_PRECISION_CONSTRAINTS)
        keep = set(options.keep_fp32_layers)
        for index in range(network.num_layers):
            layer = network.get_layer(index)
            if layer.name in keep:
                layer.precision = trt.float32


def _add_profile(builder: Any, config: Any, profiles: Mapping[str, ShapeProfile]) -> None:
    """Add the optimization profile of the dynamic inputs (none when every input is static)."""
    if not any(p.dynamic for p in profiles.values()):
        return
    profile = builder.create_optimization_profile()
    for name, shapes in profiles.items():
        if shapes.dynamic:
            profile.set_shape(name, shapes.min, shapes.opt, shapes.max)
    config.add_optimization_profile(profile)


def _use_timing_cache(config: Any, path: Path | None) -> Any | None:
    """Load the timing cache at ``path`` (empty when the file does not exist yet) into ``config``."""
    if path is None:
        return None
    data = path.read_bytes() if path.is_file() else b""
    timing = config.create_timing_cache(data)
    config.set_timing_cache(timing, False)
    return timing


def _cache_calibrator(trt: Any, cache: Path) -> Any:
    """An INT8 calibrator that only replays an existing calibration cache."""

    class _CacheCalibrator(trt.IInt8EntropyCalibrator2):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()

        def get_batch_size(self) -> int:
            return 1

        def get_batch(self, names: list[str]) -> None:
            return None

        def read_calibration_cache(self) -> bytes:
            return cache.read_bytes()

        def write_calibration_cache(self, data: bytes) -> None:
            return None

    return _CacheCalibrator()
