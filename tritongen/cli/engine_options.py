"""``convert``'s per-engine options: sources without a signature, TorchScript, TVM, TensorRT, verification."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from tritongen.convert.verify import TOLERANCES


class PrecisionChoice(str, Enum):
    """Numeric precision of engines that support reduced precision."""

    fp32 = "fp32"
    fp16 = "fp16"
    int8 = "int8"


def _tolerances() -> str:
    return "; ".join(f"{p} atol {t.atol:g} rtol {t.rtol:g}" for p, t in TOLERANCES.items())


InputSpecs = Annotated[
    list[str] | None,
    typer.Option(
        "--input-spec",
        help="NAME:DTYPE:DIMS of one input, repeatable, in forward() order; first dim the batch, "
        "-1 dynamic (e.g. input_ids:INT64:-1,-1). Needed for PyTorch and TorchScript sources.",
        show_default=False,
        rich_help_panel="Source",
    ),
]
OutputNames = Annotated[
    str | None,
    typer.Option(
        "--output-names",
        help="Names of a PyTorch source's outputs, comma-separated "
        "(default: dict keys, else output, output_1...).",
        show_default=False,
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
        help="TVM target: llvm (this CPU, the default), cuda, or a JSON target dict.",
        show_default=False,
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
        help="Tune TVM for about this many minutes.",
        min=0.0,
        show_default=False,
        rich_help_panel="TVM",
    ),
]
Precision = Annotated[
    PrecisionChoice,
    typer.Option("--precision", help="TensorRT precision.", case_sensitive=False, rich_help_panel="TensorRT"),
]
CalibrationData = Annotated[
    Path | None,
    typer.Option(
        "--calibration-data",
        help="INT8 calibration inputs: an .npz (one array per input) or a directory of them.",
        show_default=False,
        rich_help_panel="TensorRT",
    ),
]
CalibrationCache = Annotated[
    Path | None,
    typer.Option(
        "--calibration-cache",
        help="INT8 calibration cache to reuse or write.",
        show_default=False,
        rich_help_panel="TensorRT",
    ),
]
KeepFp32 = Annotated[
    str | None,
    typer.Option(
        "--mixed-precision-keep-fp32",
        help="TensorRT layers kept in FP32 under fp16/int8, comma-separated.",
        show_default=False,
        rich_help_panel="TensorRT",
    ),
]
OptBatchSize = Annotated[
    int | None,
    typer.Option(
        "--opt-batch-size",
        help="Batch size TensorRT optimises for (default: max batch size).",
        min=1,
        show_default=False,
        rich_help_panel="TensorRT",
    ),
]
WorkspaceMb = Annotated[
    int | None,
    typer.Option(
        "--workspace-mb",
        help="TensorRT builder workspace in MiB.",
        min=1,
        show_default=False,
        rich_help_panel="TensorRT",
    ),
]
TimingCache = Annotated[
    Path | None,
    typer.Option(
        "--timing-cache",
        help="TensorRT timing cache file (read and updated).",
        show_default=False,
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
        show_default=False,
        rich_help_panel="TensorRT",
    ),
]
TensorRtVersion = Annotated[
    str | None,
    typer.Option(
        "--tensorrt-version",
        help="TensorRT version of the serving image (e.g. 10.3), "
        "when tritongen cannot tell it from the image.",
        show_default=False,
        rich_help_panel="TensorRT",
    ),
]
VerifyData = Annotated[
    Path | None,
    typer.Option(
        "--verify-data",
        help="Extra verification inputs: an .npz with one array per input (batch dim first).",
        show_default=False,
        rich_help_panel="Verification",
    ),
]
Atol = Annotated[
    float | None,
    typer.Option(
        "--atol",
        help=f"Absolute tolerance of verification (defaults: {_tolerances()}).",
        min=0.0,
        show_default=False,
        rich_help_panel="Verification",
    ),
]
Rtol = Annotated[
    float | None,
    typer.Option(
        "--rtol",
        help="Relative tolerance of verification.",
        min=0.0,
        show_default=False,
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
