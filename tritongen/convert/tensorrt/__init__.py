"""TensorRT target: a serialized plan (``model.plan``) served by Triton's ``tensorrt_plan`` platform.

A plan only runs on the TensorRT version that built it, so plans are built where
TensorRT lives, in this order:

1. the ``tensorrt`` Python API, when it imports;
2. ``trtexec`` on ``PATH``;
3. nowhere here: the converter raises :class:`TensorRtUnavailableError` whose hint
   holds the exact ``trtexec`` command and the ``docker compose run --rm trt-build``
   line that builds the plan inside the Triton image that serves it. With
   ``dry_run`` it writes the build inputs and returns those commands instead.

Precision. TensorRT up to 10.x takes precision as builder flags (``--fp16``,
``--int8``, ``--precisionConstraints=obey --layerPrecisions=NAME:fp32``). TensorRT 11
removed those flags: networks are strongly typed, so the ONNX model itself carries the
precision. For 11.x the converter therefore rewrites the ONNX model (FP16 with the
kept layers left in FP32) before the build.

INT8. ``trtexec`` cannot calibrate from raw data; it only reads a calibration cache.
With ``calibration_data`` the converter quantizes explicitly: ONNX Runtime's static
quantizer runs the float model on the calibration batches and writes a Q/DQ model
(symmetric INT8, per-channel weights, the kept layers excluded), which every TensorRT
from 8.x to 11.x builds as an explicitly quantized network. That step runs on the CPU,
here, so the calibrated model can be checked before any GPU is involved. A ready
TensorRT calibration cache (``calibration_cache``, without data) is passed through as
``--calib`` for implicit quantization, which TensorRT 10.x and older support.

The modules, one job each:

- :mod:`.versions`: the TensorRT each Triton image ships, and plan/image checks;
- :mod:`.options`: :class:`TensorRtOptions`, their checks and the CLI helpers;
- :mod:`.profiles`: the min/opt/max shape of every input;
- :mod:`.commands`: the ``trtexec`` and ``docker compose run`` commands;
- :mod:`.prepare`: the ONNX model the build reads (checked, rewritten where needed);
- :mod:`.builder`: building here, with the Python API or ``trtexec``;
- :mod:`.runner`: running a plan in-process on the GPU;
- :mod:`.artifact`: the artifact itself, built or left as build inputs and commands.
"""

from tritongen.convert.tensorrt.artifact import (
    EngineUnavailableError,
    TensorRtUnavailableError,
    write_tensorrt_artifact,
)
from tritongen.convert.tensorrt.builder import tensorrt_unavailable_reason
from tritongen.convert.tensorrt.commands import TRTEXEC_IN_IMAGE, tensorrt_commands, trtexec_command
from tritongen.convert.tensorrt.options import (
    TensorRtOptions,
    needs_prepared_onnx,
    parse_dim_ranges,
)
from tritongen.convert.tensorrt.profiles import ShapeProfile, onnx_dim_names, shape_profiles
from tritongen.convert.tensorrt.runner import tensorrt_runner
from tritongen.convert.tensorrt.versions import check_plan_matches_image, tensorrt_version_for_image

__all__ = [
    "TRTEXEC_IN_IMAGE",
    "EngineUnavailableError",
    "ShapeProfile",
    "TensorRtOptions",
    "TensorRtUnavailableError",
    "check_plan_matches_image",
    "needs_prepared_onnx",
    "onnx_dim_names",
    "parse_dim_ranges",
    "shape_profiles",
    "tensorrt_commands",
    "tensorrt_runner",
    "tensorrt_unavailable_reason",
    "tensorrt_version_for_image",
    "trtexec_command",
    "write_tensorrt_artifact",
]
