"""How a plan is built: :class:`TensorRtOptions`, their checks, and the CLI helpers that make them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from tritongen.convert.tensorrt.versions import major_minor
from tritongen.errors import ConfigError

Precision = Literal["fp32", "fp16", "int8"]
PRECISIONS: tuple[Precision, ...] = ("fp32", "fp16", "int8")


@dataclass(frozen=True)
class TensorRtOptions:
    """How a plan is built.

    ``dims`` overrides the range of dynamic dims, keyed ``"input:axis"`` (axis of the
    full tensor, batch dim = 0 when batched) or by the ONNX dim name (``"seq"``).
    ``trt_version`` is the TensorRT that will build and serve the plan (from the Triton
    image); it chooses builder flags (10.x and older) or a strongly typed model (11.x).
    """

    precision: Precision = "fp32"
    calibration_data: Path | str | None = None
    """``.npz`` data (a file or folder), or ``random`` (see :mod:`tritongen.convert.calibration`)."""
    calibration_cache: Path | None = None
    keep_fp32_layers: tuple[str, ...] = ()
    calibration_method: str = "minmax"
    opt_batch_size: int | None = None
    dims: Mapping[str, tuple[int, int, int]] = field(default_factory=dict, hash=False)
    workspace_mb: int | None = None
    timing_cache: Path | None = None
    cuda_graphs: bool = False
    dry_run: bool = False
    trt_version: str | None = None

    def __post_init__(self) -> None:
        """Reject option combinations no build can honour."""
        if self.precision not in PRECISIONS:
            raise ConfigError(
                f"unknown TensorRT precision {self.precision!r}", f"choose one of {', '.join(PRECISIONS)}"
            )
        self._check_calibration()
        if self.keep_fp32_layers and self.precision == "fp32":
            raise ConfigError("--keep-fp32 needs --precision fp16 or int8")
        self._check_sizes()
        if self.trt_version is not None and major_minor(self.trt_version) is None:
            raise ConfigError(
                f"cannot read TensorRT version {self.trt_version!r}", "write it as 10.3 or 10.3.0"
            )
        if self.strongly_typed and self.calibration_cache is not None:
            raise ConfigError(
                f"TensorRT {self.trt_version} has no implicit INT8 calibration, so the cache is unusable",
                "pass --calibration-data to quantize the model explicitly (Q/DQ)",
            )

    def _check_calibration(self) -> None:
        """INT8 takes exactly one of calibration data and a cache; other precisions take neither."""
        if self.precision == "int8":
            if self.calibration_data is None and self.calibration_cache is None:
                raise ConfigError(
                    "INT8 needs calibration data or a TensorRT calibration cache",
                    "pass --calibration-data FILE.npz|DIR (or --calibration-cache FILE)",
                )
            if self.calibration_data is not None and self.calibration_cache is not None:
                raise ConfigError(
                    "--calibration-data and --calibration-cache are two ways to calibrate",
                    "pass one: data is quantized into a Q/DQ model, a cache is handed to trtexec --calib",
                )
        elif self.calibration_data is not None or self.calibration_cache is not None:
            raise ConfigError(
                f"calibration applies to INT8 only, not {self.precision}", "pass --precision int8"
            )

    def _check_sizes(self) -> None:
        """The batch size, workspace and dim ranges are positive and ordered."""
        if self.opt_batch_size is not None and self.opt_batch_size < 1:
            raise ConfigError(f"--opt-batch-size must be at least 1, not {self.opt_batch_size}")
        if self.workspace_mb is not None and self.workspace_mb < 1:
            raise ConfigError(f"--workspace-mb must be positive, not {self.workspace_mb}")
        for key, value in self.dims.items():
            if len(value) != 3 or not 1 <= value[0] <= value[1] <= value[2]:
                raise ConfigError(
                    f"dim range {key}={value} is not min<=opt<=max with min>=1", "write it as MIN,OPT,MAX"
                )

    @property
    def strongly_typed(self) -> bool:
        """TensorRT 11 and later build strongly typed networks only (no precision flags)."""
        version = major_minor(self.trt_version) if self.trt_version else None
        return version is not None and version[0] >= 11


def needs_prepared_onnx(options: TensorRtOptions) -> bool:
    """Whether the build reads a rewritten ONNX model instead of the source."""
    return (options.precision == "int8" and options.calibration_data is not None) or (
        options.strongly_typed and options.precision == "fp16"
    )


def parse_dim_ranges(text: str) -> dict[str, tuple[int, int, int]]:
    """Parse ``seq=1,128,512;input_ids:1=8,64,256`` into dim overrides.

    Raises:
        ConfigError: an entry is not ``KEY=MIN,OPT,MAX`` with integers.
    """
    ranges: dict[str, tuple[int, int, int]] = {}
    for entry in filter(None, (e.strip() for e in text.split(";"))):
        key, _, values = entry.partition("=")
        try:
            low, opt, high = (int(v) for v in values.split(","))
        except ValueError as e:
            raise ConfigError(
                f"cannot read dim range {entry!r}", "write KEY=MIN,OPT,MAX, e.g. seq=1,128,512"
            ) from e
        ranges[key.strip()] = (low, opt, high)
    return ranges
