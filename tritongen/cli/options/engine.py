"""Engine options of ``convert`` and ``compare``: signature, engines, TensorRT, verification, precision."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from tritongen.cli.options.parsing import parse_name_list
from tritongen.cli.options.settings import settings
from tritongen.cli.source_names import source_kind_or_none
from tritongen.convert.calibration import parse_calibration_source
from tritongen.convert.precision import PrecisionOptions, Variant, parse_precisions
from tritongen.convert.tensorrt import TensorRtOptions, parse_dim_ranges
from tritongen.convert.torch_export import TorchScriptMode
from tritongen.convert.tvm import TvmOptions
from tritongen.convert.verify import TOLERANCES
from tritongen.pipeline.request import BuildRequest, VerifyOptions


def _tolerances() -> str:
    return "; ".join(f"{p} atol {t.atol:g} rtol {t.rtol:g}" for p, t in TOLERANCES.items())


InputSpecs = Annotated[
    list[str] | None,
    typer.Option(
        "--input-spec",
        help="NAME:DTYPE:DIMS of one input, repeatable, in forward() order; first dim the batch, "
        "-1 dynamic (e.g. input_ids:INT64:-1,-1). Needed for PyTorch and TorchScript sources.",
        rich_help_panel="Source",
    ),
]
OutputNames = Annotated[
    str | None,
    typer.Option(
        "--output-names",
        help="Names of a PyTorch source's outputs, comma-separated "
        "(default: dict keys, else output, output_1...).",
        rich_help_panel="Source",
    ),
]
Script = Annotated[
    bool,
    typer.Option(
        "--script",
        help="Make TorchScript by scripting the module instead of tracing it.",
        rich_help_panel="TorchScript",
    ),
]
TvmTarget = Annotated[
    str | None,
    typer.Option(
        "--tvm-target",
        help="TVM target: llvm (this CPU, the default), cuda, an Arm board cross-compiled here "
        "(aarch64, rpi4, rk3588), or a JSON target dict.",
        rich_help_panel="TVM",
    ),
]
TvmTuneTrials = Annotated[
    int,
    typer.Option(
        "--tvm-tune-trials", help="MetaSchedule tuning trials (0 = no tuning).", min=0, rich_help_panel="TVM"
    ),
]
TvmTuneMinutes = Annotated[
    float | None,
    typer.Option(
        "--tvm-tune-minutes",
        help="Tune TVM for about this many minutes (one budget over all buckets).",
        min=0.0,
        rich_help_panel="TVM",
    ),
]
TvmBuckets = Annotated[
    str | None,
    typer.Option(
        "--tvm-buckets",
        metavar="DIM=V,V;DIM=V",
        help="Shape buckets, one library each: 'batch=1,8,32;seq=64,128' (dims by ONNX name or "
        "--tvm-pad alias). Default when tuning: batch 1, the preferred batch sizes and the max batch "
        "size; 128 for other dims.",
        rich_help_panel="TVM",
    ),
]
TvmPad = Annotated[
    list[str] | None,
    typer.Option(
        "--tvm-pad",
        metavar="[ALIAS=]INPUT:AXIS",
        help="Repeatable: that dim may be padded up to a bucket; INPUT is its mask (0 at padding), "
        "e.g. seq=attention_mask:1. One alias on several inputs ties their dims. Undeclared dims are "
        "never padded.",
        rich_help_panel="TVM",
    ),
]
TvmStrictBuckets = Annotated[
    bool,
    typer.Option(
        "--tvm-strict-buckets",
        help="Refuse requests no bucket holds (default: run them on the symbolic library, warned once).",
        rich_help_panel="TVM",
    ),
]
TvmExactMath = Annotated[
    bool,
    typer.Option(
        "--tvm-exact-math",
        help="Keep erf, exp and softmax exact (default: TVM's fast approximations, checked by verification).",
        rich_help_panel="TVM",
    ),
]
Precision = Annotated[
    str,
    typer.Option(
        "--precision",
        help="Precisions to build, comma-separated: fp32, fp16, int8 (mode from --int8-mode), int8-static, "
        "int8-dynamic. Each reduced precision is its own model directory (NAME_onnx_int8, ...); "
        "onnx and tensorrt take them, other formats are built in fp32.",
        rich_help_panel="Precision",
    ),
]
Int8Mode = Annotated[
    str,
    typer.Option(
        "--int8-mode",
        help="static: calibrated Q/DQ (needs --calibration-data); dynamic: weights INT8, activations "
        "quantized at run time (no calibration; the usual choice for transformer encoders on CPU).",
        rich_help_panel="Precision",
    ),
]
CalibrationData = Annotated[
    str | None,
    typer.Option(
        "--calibration-data",
        help="Static INT8 calibration inputs: an .npz (one array per input, batch first) or a directory "
        "of them; 'random' calibrates on noise, knowingly. 20% is held out for the accuracy report "
        "when no --verify-data is given.",
        rich_help_panel="Precision",
    ),
]
CalibrationMethod = Annotated[
    str,
    typer.Option(
        "--calibration-method",
        help="How activation ranges are chosen: minmax, entropy or percentile (99.999).",
        rich_help_panel="Precision",
    ),
]
CalibrationSamples = Annotated[
    int | None,
    typer.Option(
        "--calibration-samples",
        help="Calibrate on at most this many rows (default: all).",
        min=1,
        rich_help_panel="Precision",
    ),
]
CalibrationCache = Annotated[
    Path | None,
    typer.Option(
        "--calibration-cache",
        help="A ready TensorRT calibration cache for INT8 (TensorRT 10.x and older), instead of data.",
        rich_help_panel="Precision",
    ),
]
KeepFp32 = Annotated[
    str | None,
    typer.Option(
        "--keep-fp32",
        "--mixed-precision-keep-fp32",
        help="Nodes kept in FP32 under fp16/int8, comma-separated: node names, globs (*attention*) or "
        "op:TYPE (op:Softmax). TensorRT gets them as layer precisions.",
        rich_help_panel="Precision",
    ),
]
AutoMixed = Annotated[
    bool,
    typer.Option(
        "--auto-mixed-precision",
        help="Measure each weighted node's share of the error and keep the most sensitive ones in FP32 "
        "until --max-error holds.",
        rich_help_panel="Precision",
    ),
]
MaxError = Annotated[
    float | None,
    typer.Option(
        "--max-error",
        help="Error budget of --auto-mixed-precision, in --error-metric units.",
        rich_help_panel="Precision",
    ),
]
ErrorMetric = Annotated[
    str,
    typer.Option(
        "--error-metric",
        help="What --max-error bounds (worst output): max-abs, rel-rms (‖a−b‖/‖b‖), cosine (1 − mean "
        "row cosine) or cosine-min (1 − lowest row cosine).",
        rich_help_panel="Precision",
    ),
]
OptBatchSize = Annotated[
    int | None,
    typer.Option(
        "--opt-batch-size",
        help="Batch size TensorRT optimises for (default: max batch size).",
        min=1,
        rich_help_panel="TensorRT",
    ),
]
WorkspaceMb = Annotated[
    int | None,
    typer.Option(
        "--workspace-mb",
        help="TensorRT builder workspace in MiB.",
        min=1,
        rich_help_panel="TensorRT",
    ),
]
TimingCache = Annotated[
    Path | None,
    typer.Option(
        "--timing-cache",
        help="TensorRT timing cache file (read and updated).",
        rich_help_panel="TensorRT",
    ),
]
CudaGraphs = Annotated[
    bool,
    typer.Option(
        "--cuda-graphs",
        help="Capture CUDA graphs for TensorRT models (config optimization).",
        rich_help_panel="TensorRT",
    ),
]
DryRun = Annotated[
    bool,
    typer.Option(
        "--dry-run",
        help="TensorRT: write the build inputs into the model directory and print the trtexec and "
        "docker compose commands instead of building (for hosts without TensorRT).",
        rich_help_panel="TensorRT",
    ),
]
TrtDims = Annotated[
    str | None,
    typer.Option(
        "--dims",
        help="TensorRT min,opt,max of dynamic non-batch dims, by ONNX dim name or INPUT:AXIS, e.g. "
        "'seq=1,128,512;input_ids:1=8,64,256' (default 1,128,512).",
        rich_help_panel="TensorRT",
    ),
]
TensorRtVersion = Annotated[
    str | None,
    typer.Option(
        "--tensorrt-version",
        help="TensorRT version of the serving image (e.g. 10.3), "
        "when tritongen cannot tell it from the image.",
        rich_help_panel="TensorRT",
    ),
]
VerifyData = Annotated[
    Path | None,
    typer.Option(
        "--verify-data",
        help="Extra verification inputs: an .npz with one array per input (batch dim first), or "
        "perf_analyzer's input-data JSON.",
        rich_help_panel="Verification",
    ),
]
Atol = Annotated[
    float | None,
    typer.Option(
        "--atol",
        help=f"Absolute tolerance of verification (defaults: {_tolerances()}).",
        min=0.0,
        rich_help_panel="Verification",
    ),
]
Rtol = Annotated[
    float | None,
    typer.Option(
        "--rtol",
        help="Relative tolerance of verification.",
        min=0.0,
        rich_help_panel="Verification",
    ),
]
KeepFailed = Annotated[
    bool,
    typer.Option(
        "--keep-failed",
        help="Write artifacts that fail verification anyway (marked in metadata).",
        rich_help_panel="Verification",
    ),
]
NoVerify = Annotated[
    bool,
    typer.Option("--no-verify", help="Skip verification against the source.", rich_help_panel="Verification"),
]


@dataclass(frozen=True)
class EngineFlags:
    """How engines are made from the source: its signature (when it carries none), TorchScript, TVM."""

    input_spec: InputSpecs = None
    output_names: OutputNames = None
    script: Script = False
    tvm_target: TvmTarget = None
    tvm_tune_trials: TvmTuneTrials = 0
    tvm_tune_minutes: TvmTuneMinutes = None
    tvm_buckets: TvmBuckets = None
    tvm_pad: TvmPad = None
    tvm_strict_buckets: TvmStrictBuckets = False
    tvm_exact_math: TvmExactMath = False

    def specs(self) -> tuple[str, ...]:
        """``--input-spec`` values in order."""
        return tuple(self.input_spec or ())

    def names(self) -> tuple[str, ...]:
        """``--output-names`` as a tuple."""
        return parse_name_list(self.output_names) if self.output_names else ()

    def torchscript_mode(self) -> TorchScriptMode:
        """Script or trace."""
        return "script" if self.script else "trace"

    def tvm(self) -> TvmOptions:
        """The TVM options."""
        return settings(
            TvmOptions, self, prefix="tvm_", pads=tuple(self.tvm_pad or ()), fast_math=not self.tvm_exact_math
        )


@dataclass(frozen=True)
class TensorRtFlags:
    """How TensorRT plans are built (``convert``)."""

    opt_batch_size: OptBatchSize = None
    workspace_mb: WorkspaceMb = None
    timing_cache: TimingCache = None
    cuda_graphs: CudaGraphs = False
    trt_dims: TrtDims = None
    tensorrt_version: TensorRtVersion = None
    dry_run: DryRun = False

    def options(self) -> TensorRtOptions:
        """The TensorRT options (checked: a one-line ConfigError when contradictory)."""
        dims = parse_dim_ranges(self.trt_dims) if self.trt_dims else {}
        return settings(TensorRtOptions, self, dims=dims, trt_version=self.tensorrt_version)


@dataclass(frozen=True)
class VerifyFlags:
    """How artifacts are checked against the source."""

    verify_data: VerifyData = None
    atol: Atol = None
    rtol: Rtol = None
    keep_failed: KeepFailed = False
    no_verify: NoVerify = False

    def options(self) -> VerifyOptions:
        """The verification options."""
        return settings(VerifyOptions, self, data=self.verify_data, skip=self.no_verify)


@dataclass(frozen=True)
class PrecisionFlags:
    """Which precisions are built and how reduced ones are made."""

    precision: Precision = "fp32"
    int8_mode: Int8Mode = "static"
    calibration_data: CalibrationData = None
    calibration_method: CalibrationMethod = "minmax"
    calibration_samples: CalibrationSamples = None
    calibration_cache: CalibrationCache = None
    keep_fp32: KeepFp32 = None
    auto_mixed_precision: AutoMixed = False
    max_error: MaxError = None
    error_metric: ErrorMetric = "max-abs"

    def settings(self) -> tuple[tuple[Variant, ...], PrecisionOptions]:
        """The variants asked for and how they are made.

        Raises:
            ConfigError: an unknown precision or mode.
        """
        variants = parse_precisions(self.precision, self.int8_mode.strip().lower())
        return variants, settings(
            PrecisionOptions,
            self,
            calibration=parse_calibration_source(self.calibration_data),
            calibration_method=self.calibration_method.strip().lower(),
            keep_fp32=parse_name_list(self.keep_fp32),
            auto_mixed=self.auto_mixed_precision,
            error_metric=self.error_metric.strip().lower(),
        )


def build_request(
    source: str, engines: EngineFlags, verify: VerifyFlags, precision: PrecisionFlags, **given: Any
) -> BuildRequest:
    """What ``convert`` and ``compare`` ask to build from SOURCE: its engines, verification and precisions.

    ``given``: the rest of the request (name, repository, formats, batching, ...).

    Raises:
        ConfigError: an unknown precision or mode.
    """
    variants, precision_options = precision.settings()
    return BuildRequest(
        source=source if source_kind_or_none(source) == "pytorch" else Path(source),
        input_specs=engines.specs(),
        output_names=engines.names(),
        torchscript_mode=engines.torchscript_mode(),
        tvm=engines.tvm(),
        verify=verify.options(),
        precisions=variants,
        precision=precision_options,
        **given,
    )
