"""The ``trtexec`` command that builds a plan, on this host and inside the Triton image."""

from __future__ import annotations

import dataclasses
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from tritongen.convert.tensorrt.options import TensorRtOptions, needs_prepared_onnx
from tritongen.convert.tensorrt.profiles import ShapeProfile

PLAN_FILE = "model.plan"
BUILD_DIR = "trt-build"
"""Folder inside the model directory holding the build inputs; Triton ignores non-numeric folders."""
COMPOSE_SERVICE = "trt-build"
CONTAINER_REPOSITORY = "/models"
"""Where the compose file mounts the model repository inside the containers."""
TRTEXEC_IN_IMAGE = "/usr/src/tensorrt/bin/trtexec"
"""``trtexec`` inside the Triton images (not on their ``PATH``)."""


@dataclass(frozen=True)
class TensorRtCommands:
    """The commands that build a plan: on a host with ``trtexec``, and in the compose service."""

    trtexec: tuple[str, ...]
    compose: tuple[str, ...]
    prepared_onnx: bool
    """Whether the build reads a rewritten ONNX model (FP16 or Q/DQ) from the build folder."""

    def trtexec_line(self) -> str:
        """The ``trtexec`` command as one shell line."""
        return shlex.join(self.trtexec)

    def compose_line(self) -> str:
        """The ``docker compose run`` command as one shell line."""
        return shlex.join(self.compose)


def trtexec_command(
    onnx_path: Path | str,
    plan_path: Path | str,
    profiles: Mapping[str, ShapeProfile],
    options: TensorRtOptions,
    *,
    trtexec: str = "trtexec",
) -> list[str]:
    """The ``trtexec`` argv that builds ``plan_path`` from ``onnx_path`` (build only, no benchmark).

    For strongly typed builds (TensorRT 11+) ``onnx_path`` must already carry the
    precision (see :func:`~tritongen.convert.tensorrt.prepare.prepare_onnx`); no precision
    flags are emitted.
    """
    argv = [trtexec, f"--onnx={onnx_path}", f"--saveEngine={plan_path}"]
    if any(p.dynamic for p in profiles.values()):
        argv += [
            f"--minShapes={_shape_arg(profiles, 'min')}",
            f"--optShapes={_shape_arg(profiles, 'opt')}",
            f"--maxShapes={_shape_arg(profiles, 'max')}",
        ]
    if not options.strongly_typed:
        argv += _precision_flags(options)
    if options.workspace_mb is not None:
        argv.append(f"--memPoolSize=workspace:{options.workspace_mb}M")
    if options.timing_cache is not None:
        argv.append(f"--timingCacheFile={options.timing_cache}")
    argv.append("--skipInference")
    return argv


def tensorrt_commands(
    source_onnx: Path,
    model_dir: Path,
    profiles: Mapping[str, ShapeProfile],
    options: TensorRtOptions,
    *,
    version: int = 1,
    prepared: bool | None = None,
) -> TensorRtCommands:
    """The host ``trtexec`` command and the ``docker compose run`` line for one model.

    ``model_dir`` is where the model lives in the repository (its name is the folder
    name inside the container's ``/models``). Timing and calibration caches are
    expected in the model's build folder inside the container. ``prepared`` says whether
    the build reads a rewritten ONNX model (default: whether the options need one).
    """
    prepared = needs_prepared_onnx(options) if prepared is None else prepared
    host_onnx = model_dir / BUILD_DIR / "model.onnx" if prepared else source_onnx
    host = trtexec_command(host_onnx, model_dir / str(version) / PLAN_FILE, profiles, options)
    inside = f"{CONTAINER_REPOSITORY}/{model_dir.name}"
    in_container = trtexec_command(
        f"{inside}/{BUILD_DIR}/model.onnx",
        f"{inside}/{version}/{PLAN_FILE}",
        profiles,
        _in_container(options, f"{inside}/{BUILD_DIR}"),
        trtexec=TRTEXEC_IN_IMAGE,
    )
    compose = ("docker", "compose", "run", "--rm", COMPOSE_SERVICE, *in_container)
    return TensorRtCommands(trtexec=tuple(host), compose=compose, prepared_onnx=prepared)


def _precision_flags(options: TensorRtOptions) -> list[str]:
    """The builder flags of TensorRT 10.x and older: precision, calibration cache, kept FP32 layers."""
    flags = []
    if options.precision in ("fp16", "int8"):
        flags.append("--fp16")
    if options.precision == "int8":
        flags.append("--int8")
        if options.calibration_cache is not None:
            flags.append(f"--calib={options.calibration_cache}")
    if options.keep_fp32_layers:
        flags.append("--precisionConstraints=obey")
        flags.append("--layerPrecisions=" + ",".join(f"{name}:fp32" for name in options.keep_fp32_layers))
    return flags


def _shape_arg(profiles: Mapping[str, ShapeProfile], which: Literal["min", "opt", "max"]) -> str:
    parts = []
    for name, profile in profiles.items():
        if not profile.dynamic:
            continue
        shape: tuple[int, ...] = getattr(profile, which)
        quoted = f"'{name}'" if ":" in name or "," in name else name
        parts.append(f"{quoted}:{'x'.join(str(d) for d in shape)}")
    return ",".join(parts)


def _in_container(options: TensorRtOptions, build_dir: str) -> TensorRtOptions:
    """The options with their cache paths as seen inside the container (only their text matters)."""
    calibration_cache = (
        Path(f"{build_dir}/calibration.cache") if options.calibration_cache is not None else None
    )
    return dataclasses.replace(
        options,
        calibration_cache=calibration_cache,
        calibration_data=options.calibration_data if calibration_cache is None else None,
        timing_cache=Path(f"{build_dir}/timing.cache") if options.timing_cache is not None else None,
    )
