"""Precision variants: what can be asked for, which format takes which, and their options.

A *variant* is one precision of one format, served as its own model directory:
``NAME_onnx`` (FP32), ``NAME_onnx_fp16``, ``NAME_onnx_int8`` (static, calibrated Q/DQ),
``NAME_onnx_int8_dynamic`` (weights INT8, activations quantized at run time). TensorRT
takes FP32, FP16 and static INT8; TorchScript and TVM are built in FP32 only.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tritongen.convert.accuracy import ERROR_METRICS
from tritongen.convert.calibration import CalibrationSource, check_calibration_request
from tritongen.convert.quantize import CALIBRATION_METHODS
from tritongen.errors import ConfigError

PRECISIONS = ("fp32", "fp16", "int8")
INT8_MODES = ("static", "dynamic")


@dataclass(frozen=True, order=True)
class Variant:
    """One precision: ``fp32``, ``fp16``, or ``int8`` with its mode."""

    precision: str = "fp32"
    int8_mode: str = "static"

    @property
    def key(self) -> str:
        """How options and JSON name it: ``fp32``, ``fp16``, ``int8``, ``int8-dynamic``."""
        if self.precision == "int8" and self.int8_mode == "dynamic":
            return "int8-dynamic"
        return self.precision

    @property
    def suffix(self) -> str:
        """What the model directory name gets after the format: ``""``, ``_fp16``, ``_int8_dynamic``."""
        return "" if self.precision == "fp32" else "_" + self.key.replace("-", "_")

    @property
    def label(self) -> str:
        """How tables name it: ``fp16``, ``int8``, ``int8 dynamic``."""
        return self.key.replace("-", " ")

    def of(self, fmt: str) -> str:
        """A format in this precision, as reports name it: ``onnx``, ``onnx int8 dynamic``."""
        return f"{fmt} {self.label}" if self.reduced else fmt

    @property
    def reduced(self) -> bool:
        """Anything but FP32."""
        return self.precision != "fp32"

    @property
    def calibrated(self) -> bool:
        """Static INT8: needs calibration data."""
        return self.precision == "int8" and self.int8_mode == "static"


FP32 = Variant()

FORMAT_VARIANTS: dict[str, tuple[Variant, ...]] = {
    "onnx": (FP32, Variant("fp16"), Variant("int8", "static"), Variant("int8", "dynamic")),
    "tensorrt": (FP32, Variant("fp16"), Variant("int8", "static")),
    "torchscript": (FP32,),
    "tvm": (FP32,),
}


def parse_precisions(text: str, int8_mode: str = "static") -> tuple[Variant, ...]:
    """Parse ``--precision``: comma-separated fp32, fp16, int8, int8-static, int8-dynamic.

    A bare ``int8`` takes ``int8_mode``.

    Raises:
        ConfigError: an unknown or repeated precision, or an unknown INT8 mode.
    """
    if int8_mode not in INT8_MODES:
        raise ConfigError(f"--int8-mode {int8_mode!r} is unknown", "use static or dynamic")
    variants: list[Variant] = []
    for item in (part.strip().lower() for part in text.split(",")):
        if not item:
            continue
        if item == "int8":
            variant = Variant("int8", int8_mode)
        elif item in ("int8-static", "int8-dynamic"):
            variant = Variant("int8", item.partition("-")[2])
        elif item in PRECISIONS:
            variant = Variant(item)
        else:
            raise ConfigError(
                f"precision {item!r} is unknown",
                "choose from fp32, fp16, int8 (with --int8-mode), int8-static, int8-dynamic",
            )
        if variant in variants:
            raise ConfigError(f"--precision names {variant.key} twice", "list each precision once")
        variants.append(variant)
    if not variants:
        raise ConfigError("--precision is empty", "pass fp32, fp16 or int8")
    return tuple(variants)


def variant_unavailable_reason(fmt: str, variant: Variant) -> str | None:
    """Why ``fmt`` is not built in ``variant``; ``None`` when it is."""
    if variant in FORMAT_VARIANTS.get(fmt, (FP32,)):
        return None
    takes = ", ".join(v.key for v in FORMAT_VARIANTS.get(fmt, (FP32,)))
    return f"{fmt} is built in {takes} only; reduced precision applies to onnx and tensorrt"


@dataclass(frozen=True)
class PrecisionOptions:
    """How reduced-precision variants are made and judged."""

    calibration: CalibrationSource | None = None
    """``--calibration-data``: a path, ``random``, or nothing."""
    calibration_method: str = "minmax"
    calibration_cache: Path | None = None
    """A ready TensorRT calibration cache (TensorRT 10.x and older, INT8 without data)."""
    calibration_samples: int | None = None
    """At most this many rows calibrated on (default: all)."""
    keep_fp32: tuple[str, ...] = ()
    """Node names, globs or ``op:TYPE`` kept in FP32 in every reduced variant."""
    auto_mixed: bool = False
    max_error: float | None = None
    error_metric: str = "max-abs"

    def check(self, variants: tuple[Variant, ...], formats: tuple[str, ...] = ("onnx",)) -> None:
        """Refuse contradictions before anything is built.

        Raises:
            ConfigError: static INT8 without data, options that apply to no variant,
                or an unknown method or metric.
        """
        if self.calibration_method not in CALIBRATION_METHODS:
            raise ConfigError(
                f"--calibration-method {self.calibration_method!r} is unknown",
                f"choose one of {', '.join(CALIBRATION_METHODS)}",
            )
        if self.error_metric not in ERROR_METRICS:
            raise ConfigError(
                f"--error-metric {self.error_metric!r} is unknown",
                f"choose one of {', '.join(ERROR_METRICS)}",
            )
        static = any(v.calibrated for v in variants)
        if self.calibration_cache is not None:
            if not static or set(formats) - {"tensorrt"}:
                raise ConfigError(
                    "--calibration-cache is a TensorRT cache: it serves static INT8 TensorRT only",
                    "pass --formats tensorrt --precision int8, or --calibration-data for other formats",
                )
            if self.calibration is not None:
                raise ConfigError(
                    "--calibration-data and --calibration-cache are two ways to calibrate",
                    "pass one: data is quantized into a Q/DQ model, a cache is handed to trtexec --calib",
                )
        else:
            check_calibration_request(static, self.calibration)
        reduced = any(v.reduced for v in variants)
        if (self.keep_fp32 or self.auto_mixed) and not reduced:
            option = "--keep-fp32" if self.keep_fp32 else "--auto-mixed-precision"
            raise ConfigError(f"{option} needs a reduced precision", "add --precision fp16 or int8")
        if self.auto_mixed and self.max_error is None:
            raise ConfigError(
                "--auto-mixed-precision needs an error budget", "pass --max-error X (see --error-metric)"
            )
        if self.max_error is not None and not self.auto_mixed:
            raise ConfigError(
                "--max-error is the budget of --auto-mixed-precision", "add --auto-mixed-precision"
            )
        if self.max_error is not None and self.max_error <= 0:
            raise ConfigError(f"--max-error must be positive, got {self.max_error:g}")

    def to_json(self) -> dict[str, Any]:
        """The settings as recorded in reports."""
        return {
            "calibration_data": str(self.calibration) if self.calibration is not None else None,
            "calibration_method": self.calibration_method,
            "keep_fp32": list(self.keep_fp32),
            "auto_mixed_precision": self.auto_mixed,
            "max_error": self.max_error,
            "error_metric": self.error_metric,
        }
