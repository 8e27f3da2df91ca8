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
"""

from __future__ import annotations

import importlib
import re
import shlex
import shutil
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, NamedTuple

import numpy as np

from tritongen.convert.artifact import Array, Artifact, Runner, Target
from tritongen.errors import ConfigError, ConversionError, UnavailableHereError
from tritongen.sources.signature import TRITON_TO_NUMPY, Signature

Precision = Literal["fp32", "fp16", "int8"]
PRECISIONS: tuple[Precision, ...] = ("fp32", "fp16", "int8")

PLAN_FILE = "model.plan"
BUILD_DIR = "trt-build"
"""Folder inside the model directory holding the build inputs; Triton ignores non-numeric folders."""
COMPOSE_SERVICE = "trt-build"
CONTAINER_REPOSITORY = "/models"
"""Where the compose file mounts the model repository inside the containers."""
TRTEXEC_IN_IMAGE = "/usr/src/tensorrt/bin/trtexec"
"""``trtexec`` inside the Triton images (not on their ``PATH``)."""

DEFAULT_DYNAMIC_DIM: tuple[int, int, int] = (1, 128, 512)
"""min/opt/max of a dynamic non-batch dim (e.g. sequence length) that has no override."""

# Triton container release -> TensorRT version it ships (the ``-py3`` images); releases
# not listed are unknown (None). Only the ``-py3`` images count: the
# ``-trtllm-python-py3`` images ship another TensorRT (24.10: 10.4.0 there, 10.5.0 here),
# so the TRT-LLM compatibility matrix is no source for this table.
# "source" entries were read in the Triton release notes, as kept in
# github.com/triton-inference-server/server docs/introduction/release_notes.md, mirroring
# https://docs.nvidia.com/deeplearning/triton-inference-server/release-notes/rel-YY-MM.html
# ("The container also includes the following: ... NVIDIA TensorRT X.Y.Z.B").
# "unverified" entries were checked against no source; no source seen contradicts them.
# 25.03 and later: unknown (no source seen lists their TensorRT line).
TRITON_TENSORRT_VERSIONS: dict[str, str] = {
    "24.01": "8.6.1",  # unverified
    "24.02": "8.6.3",  # unverified
    "24.03": "8.6.3",  # unverified
    "24.04": "8.6.3",  # unverified
    "24.05": "10.0.1",  # unverified
    "24.06": "10.1.0",  # unverified
    "24.07": "10.2.0",  # unverified
    "24.08": "10.3.0",  # unverified
    "24.09": "10.4.0",  # unverified
    "24.10": "10.5.0",  # source: rel-24-10.html, NVIDIA TensorRT 10.5.0.18
    "24.11": "10.6.0",  # unverified
    "24.12": "10.7.0",  # source: rel-24-12.html, NVIDIA TensorRT 10.7.0.23
    "25.01": "10.8.0",  # source: rel-25-01.html, NVIDIA TensorRT 10.8.0.43
    "25.02": "10.8.0",  # unverified
}

Progress = Callable[[str], None]


class ShapeProfile(NamedTuple):
    """The min/opt/max shapes of one input (batch dim included when batched)."""

    min: tuple[int, ...]
    opt: tuple[int, ...]
    max: tuple[int, ...]
    dynamic: bool
    """Whether the network input has a dynamic dim (only those take explicit shapes)."""


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
        if self.keep_fp32_layers and self.precision == "fp32":
            raise ConfigError("--keep-fp32 needs --precision fp16 or int8", None)
        if self.opt_batch_size is not None and self.opt_batch_size < 1:
            raise ConfigError(f"--opt-batch-size must be at least 1, not {self.opt_batch_size}", None)
        if self.workspace_mb is not None and self.workspace_mb < 1:
            raise ConfigError(f"--workspace-mb must be positive, not {self.workspace_mb}", None)
        for key, value in self.dims.items():
            if len(value) != 3 or not 1 <= value[0] <= value[1] <= value[2]:
                raise ConfigError(
                    f"dim range {key}={value} is not min<=opt<=max with min>=1", "write it as MIN,OPT,MAX"
                )
        if self.trt_version is not None and _major_minor(self.trt_version) is None:
            raise ConfigError(
                f"cannot read TensorRT version {self.trt_version!r}", "write it as 10.3 or 10.3.0"
            )
        if self.strongly_typed and self.calibration_cache is not None:
            raise ConfigError(
                f"TensorRT {self.trt_version} has no implicit INT8 calibration, so the cache is unusable",
                "pass --calibration-data to quantize the model explicitly (Q/DQ)",
            )

    @property
    def strongly_typed(self) -> bool:
        """TensorRT 11 and later build strongly typed networks only (no precision flags)."""
        version = _major_minor(self.trt_version) if self.trt_version else None
        return version is not None and version[0] >= 11


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


class TensorRtUnavailableError(UnavailableHereError):
    """Neither the ``tensorrt`` module nor ``trtexec`` exists here; ``commands`` build the plan elsewhere."""

    def __init__(self, commands: TensorRtCommands) -> None:
        self.commands = commands
        hint = (
            f"build it where TensorRT lives: `{commands.trtexec_line()}`, or on the GPU host "
            f"`{commands.compose_line()}` (the Triton image's own TensorRT)"
        )
        if commands.prepared_onnx:
            hint += "; pass --dry-run first to write the rewritten ONNX model into the repository"
        else:
            hint += "; pass --dry-run to write the build inputs and print these commands"
        super().__init__("TensorRT is not available here (no `tensorrt` module, no `trtexec` on PATH)", hint)


EngineUnavailableError = UnavailableHereError
"""What the repository builder catches to report an ``unavailable`` outcome."""


def tensorrt_options(
    precision: str = "fp32",
    calibration_data: Path | None = None,
    calibration_cache: Path | None = None,
    keep_fp32_layers: tuple[str, ...] = (),
    opt_batch_size: int | None = None,
    workspace_mb: int | None = None,
    timing_cache: Path | None = None,
    cuda_graphs: bool = False,
    dry_run: bool = False,
    dims: Mapping[str, tuple[int, int, int]] | None = None,
    trt_version: str | None = None,
) -> TensorRtOptions:
    """Build :class:`TensorRtOptions` from CLI values (validated; one-line ConfigError when contradictory)."""
    return TensorRtOptions(
        precision=precision,  # type: ignore[arg-type]  # checked in __post_init__
        calibration_data=calibration_data,
        calibration_cache=calibration_cache,
        keep_fp32_layers=keep_fp32_layers,
        opt_batch_size=opt_batch_size,
        dims=dict(dims or {}),
        workspace_mb=workspace_mb,
        timing_cache=timing_cache,
        cuda_graphs=cuda_graphs,
        dry_run=dry_run,
        trt_version=trt_version,
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


def tensorrt_unavailable_reason() -> str | None:
    """Why no plan can be built on this machine; None when the tensorrt module or trtexec exists."""
    if _import_tensorrt() is not None or shutil.which("trtexec") is not None:
        return None
    return "TensorRT is not available here (no `tensorrt` module, no `trtexec` on PATH)"


# --------------------------------------------------------------------------- versions


def _major_minor(version: str) -> tuple[int, int] | None:
    match = re.match(r"^\s*(\d+)\.(\d+)", version)
    return (int(match.group(1)), int(match.group(2))) if match else None


def triton_release_of_image(image: str) -> str | None:
    """The Triton release (``24.08``) of an image reference or bare tag, or None."""
    tag = image.rsplit(":", 1)[-1] if ":" in image.rsplit("/", 1)[-1] else image
    match = re.match(r"^(\d{2}\.\d{2})(?:$|[-.])", tag)
    return match.group(1) if match else None


def tensorrt_version_for_image(image: str) -> str | None:
    """The TensorRT version a Triton image ships (``24.08`` -> ``10.3.0``); None when unknown."""
    release = triton_release_of_image(image)
    return TRITON_TENSORRT_VERSIONS.get(release) if release else None


def check_plan_matches_image(plan_trt_version: str | None, image: str) -> None:
    """Refuse a plan whose TensorRT major.minor differs from the image's (unknown passes).

    Raises:
        ConfigError: both versions are known and their major.minor differ.
    """
    image_version = tensorrt_version_for_image(image)
    if plan_trt_version is None or image_version is None:
        return
    if _major_minor(plan_trt_version) != _major_minor(image_version):
        raise ConfigError(
            f"the plan was built with TensorRT {plan_trt_version} but {image} ships TensorRT {image_version}",
            "rebuild the plan inside that image (`docker compose run --rm trt-build ...`) or pick a "
            "Triton image with the plan's TensorRT",
        )


def _version_from_log(log: str) -> str | None:
    """The TensorRT version in a ``trtexec`` log (``[TensorRT v100300]``, ``TensorRT version: 10.3.0``)."""
    match = re.search(r"TensorRT version:\s*(\d+\.\d+\.\d+)", log)
    if match:
        return match.group(1)
    match = re.search(r"\[TensorRT v(\d+)\]", log)
    if not match:
        return None
    code = int(match.group(1))
    if code >= 100000:  # 10.x and later: MMmmpp
        return f"{code // 10000}.{code // 100 % 100}.{code % 100}"
    return f"{code // 1000}.{code // 100 % 10}.{code % 100}"  # 8.x: Mmpp


# --------------------------------------------------------------------------- profiles


def onnx_dim_names(onnx_path: Path) -> dict[str, tuple[str | None, ...]]:
    """The symbolic dim names (``dim_param``) of each graph input; None for fixed dims."""
    import onnx

    model = onnx.load(str(onnx_path), load_external_data=False)
    initializers = {init.name for init in model.graph.initializer}
    names: dict[str, tuple[str | None, ...]] = {}
    for value in model.graph.input:
        if value.name in initializers:
            continue
        dims = value.type.tensor_type.shape.dim
        names[value.name] = tuple(d.dim_param or None for d in dims)
    return names


def shape_profiles(
    signature: Signature,
    max_batch_size: int,
    options: TensorRtOptions,
    dim_names: Mapping[str, tuple[str | None, ...]] | None = None,
) -> dict[str, ShapeProfile]:
    """The optimization profile: min/opt/max shape of every input.

    The batch dim runs 1..``max_batch_size`` with opt = ``opt_batch_size`` (default:
    the max, which dynamic batching fills under load). Other dynamic dims take their
    override from ``options.dims`` or :data:`DEFAULT_DYNAMIC_DIM`. With
    ``max_batch_size`` 0 a leading batch dim is fixed at 1 unless overridden.

    Raises:
        ConfigError: the batch options contradict the signature, or an override
            names no dynamic dim.
    """
    if max_batch_size < 0:
        raise ConfigError(f"max_batch_size must be >= 0, not {max_batch_size}", None)
    if max_batch_size > 0 and not signature.batched:
        raise ConfigError(
            "the model has no batch dim, so max_batch_size must be 0", "pass --max-batch-size 0"
        )
    if options.opt_batch_size is not None:
        if max_batch_size == 0:
            raise ConfigError("--opt-batch-size needs a max_batch_size above 0", None)
        if options.opt_batch_size > max_batch_size:
            raise ConfigError(
                f"--opt-batch-size {options.opt_batch_size} exceeds max_batch_size {max_batch_size}",
                f"pass a value between 1 and {max_batch_size}",
            )
    names = dim_names or {}
    used: set[str] = set()
    profiles: dict[str, ShapeProfile] = {}
    for spec in signature.inputs:
        full = ((-1,) if signature.batched else ()) + spec.dims
        symbolic = names.get(spec.name, ())
        lows: list[int] = []
        opts: list[int] = []
        highs: list[int] = []
        for axis, dim in enumerate(full):
            keys = [f"{spec.name}:{axis}"]
            if axis < len(symbolic) and symbolic[axis]:
                keys.append(str(symbolic[axis]))
            override = next((options.dims[k] for k in keys if k in options.dims), None)
            used.update(k for k in keys if k in options.dims)
            if dim != -1:
                if override is not None:
                    raise ConfigError(f"dim {keys[0]} is fixed at {dim} and takes no range", None)
                rng = (dim, dim, dim)
            elif override is not None:
                rng = override
                if signature.batched and axis == 0 and max_batch_size and override[2] > max_batch_size:
                    raise ConfigError(f"batch range {override} exceeds max_batch_size {max_batch_size}", None)
            elif signature.batched and axis == 0:
                if max_batch_size == 0:
                    rng = (1, 1, 1)
                else:
                    rng = (1, options.opt_batch_size or max_batch_size, max_batch_size)
            else:
                rng = DEFAULT_DYNAMIC_DIM
            lows.append(rng[0])
            opts.append(rng[1])
            highs.append(rng[2])
        profiles[spec.name] = ShapeProfile(tuple(lows), tuple(opts), tuple(highs), dynamic=-1 in full)
    unused = sorted(set(options.dims) - used)
    if unused:
        raise ConfigError(
            f"dim override {unused[0]} names no input dim", "key it INPUT:AXIS or by the ONNX dim name"
        )
    return profiles


# --------------------------------------------------------------------------- commands


def _shape_arg(profiles: Mapping[str, ShapeProfile], which: Literal["min", "opt", "max"]) -> str:
    parts = []
    for name, profile in profiles.items():
        if not profile.dynamic:
            continue
        shape: tuple[int, ...] = getattr(profile, which)
        quoted = f"'{name}'" if ":" in name or "," in name else name
        parts.append(f"{quoted}:{'x'.join(str(d) for d in shape)}")
    return ",".join(parts)


def trtexec_command(
    onnx_path: Path | str,
    plan_path: Path | str,
    profiles: Mapping[str, ShapeProfile],
    options: TensorRtOptions,
    trtexec: str = "trtexec",
) -> list[str]:
    """The ``trtexec`` argv that builds ``plan_path`` from ``onnx_path`` (build only, no benchmark).

    For strongly typed builds (TensorRT 11+) ``onnx_path`` must already carry the
    precision (see :func:`prepare_onnx`); no precision flags are emitted.
    """
    argv = [trtexec, f"--onnx={onnx_path}", f"--saveEngine={plan_path}"]
    if any(p.dynamic for p in profiles.values()):
        argv += [
            f"--minShapes={_shape_arg(profiles, 'min')}",
            f"--optShapes={_shape_arg(profiles, 'opt')}",
            f"--maxShapes={_shape_arg(profiles, 'max')}",
        ]
    if not options.strongly_typed:
        if options.precision in ("fp16", "int8"):
            argv.append("--fp16")
        if options.precision == "int8":
            argv.append("--int8")
            if options.calibration_cache is not None:
                argv.append(f"--calib={options.calibration_cache}")
        if options.keep_fp32_layers:
            argv.append("--precisionConstraints=obey")
            argv.append("--layerPrecisions=" + ",".join(f"{name}:fp32" for name in options.keep_fp32_layers))
    if options.workspace_mb is not None:
        argv.append(f"--memPoolSize=workspace:{options.workspace_mb}M")
    if options.timing_cache is not None:
        argv.append(f"--timingCacheFile={options.timing_cache}")
    argv.append("--skipInference")
    return argv


def needs_prepared_onnx(options: TensorRtOptions) -> bool:
    """Whether the build reads a rewritten ONNX model instead of the source."""
    return (options.precision == "int8" and options.calibration_data is not None) or (
        options.strongly_typed and options.precision == "fp16"
    )


def tensorrt_commands(
    source_onnx: Path,
    model_dir: Path,
    profiles: Mapping[str, ShapeProfile],
    options: TensorRtOptions,
    version: int = 1,
    prepared: bool | None = None,
) -> TensorRtCommands:
    """The host ``trtexec`` command and the ``docker compose run`` line for one model.

    ``model_dir`` is where the model lives in the repository (its name is the folder
    name inside the container's ``/models``). Timing and calibration caches are
    expected in the model's build folder inside the container.
    """
    prepared = needs_prepared_onnx(options) if prepared is None else prepared
    host_onnx = model_dir / BUILD_DIR / "model.onnx" if prepared else source_onnx
    host = trtexec_command(host_onnx, model_dir / str(version) / PLAN_FILE, profiles, options)
    inside = f"{CONTAINER_REPOSITORY}/{model_dir.name}"
    container_options = _with_paths(
        options,
        timing_cache=f"{inside}/{BUILD_DIR}/timing.cache" if options.timing_cache is not None else None,
        calibration_cache=f"{inside}/{BUILD_DIR}/calibration.cache"
        if options.calibration_cache is not None
        else None,
    )
    in_container = trtexec_command(
        f"{inside}/{BUILD_DIR}/model.onnx",
        f"{inside}/{version}/{PLAN_FILE}",
        profiles,
        container_options,
        trtexec=TRTEXEC_IN_IMAGE,
    )
    compose = ("docker", "compose", "run", "--rm", COMPOSE_SERVICE, *in_container)
    return TensorRtCommands(trtexec=tuple(host), compose=compose, prepared_onnx=prepared)


def _with_paths(
    options: TensorRtOptions, timing_cache: str | None, calibration_cache: str | None
) -> TensorRtOptions:
    # Paths as seen inside the container; only their text matters for the command.
    return TensorRtOptions(
        precision=options.precision,
        calibration_cache=Path(calibration_cache) if calibration_cache else None,
        calibration_data=options.calibration_data if calibration_cache is None else None,
        keep_fp32_layers=options.keep_fp32_layers,
        opt_batch_size=options.opt_batch_size,
        dims=options.dims,
        workspace_mb=options.workspace_mb,
        timing_cache=Path(timing_cache) if timing_cache else None,
        cuda_graphs=options.cuda_graphs,
        trt_version=options.trt_version,
    )


# --------------------------------------------------------------------------- ONNX preparation


def check_layer_names(onnx_path: Path, layers: tuple[str, ...]) -> None:
    """Check that every kept-FP32 layer is a node of the ONNX graph (TensorRT names layers after nodes).

    Raises:
        ConfigError: a name is not a node of the graph.
    """
    if not layers:
        return
    import onnx

    nodes = {node.name for node in onnx.load(str(onnx_path), load_external_data=False).graph.node}
    missing = [name for name in layers if name not in nodes]
    if missing:
        sample = ", ".join(sorted(n for n in nodes if n)[:5]) or "none (the nodes are unnamed)"
        raise ConfigError(
            f"--keep-fp32 names unknown layer(s): {', '.join(missing)}",
            f"use ONNX node names, e.g. {sample}",
        )


def prepare_onnx(source: Path, build_dir: Path, signature: Signature, options: TensorRtOptions) -> Path:
    """The ONNX model the build reads: the source, or a Q/DQ (INT8) / FP16 rewrite of it in ``build_dir``.

    INT8 calibrates with the same reader and quantizer as ONNX Runtime's static INT8
    (symmetric, as TensorRT wants), so one calibration set and one keep-FP32 list serve both.
    """
    from tritongen.convert.calibration import load_calibration
    from tritongen.convert.quantize import convert_fp16, quantize_static_int8

    if options.precision == "int8" and options.calibration_data is not None:
        calibration = load_calibration(options.calibration_data, signature)
        return quantize_static_int8(
            source,
            build_dir / "model.onnx",
            calibration,
            options.calibration_method,
            options.keep_fp32_layers,
            symmetric=True,
        )
    if options.strongly_typed and options.precision == "fp16":
        return convert_fp16(source, build_dir / "model.onnx", options.keep_fp32_layers)
    return source


# --------------------------------------------------------------------------- builders


def _import_tensorrt() -> Any | None:
    try:
        return importlib.import_module("tensorrt")
    except ImportError:
        return None


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
    log = "\n".join(lines)
    if code != 0:
        tail = " | ".join(line for line in lines[-8:] if line.strip())
        raise ConversionError(f"trtexec failed with exit code {code}: {tail}", "see the trtexec log above")
    return _version_from_log(log)


def build_with_python_api(
    trt: Any, onnx_path: Path, plan_path: Path, profiles: Mapping[str, ShapeProfile], options: TensorRtOptions
) -> str:
    """Build the plan with the ``tensorrt`` Python API and return its version.

    Raises:
        ConversionError: parsing or building fails.
    """
    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    flags = 0
    if options.strongly_typed:
        flags |= 1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED)
    network = builder.create_network(flags)
    parser = trt.OnnxParser(network, logger)
    if not parser.parse_from_file(str(onnx_path)):
        errors = "; ".join(str(parser.get_error(i)) for i in range(parser.num_errors))
        raise ConversionError(
            f"TensorRT cannot parse {onnx_path.name}: {errors}", "simplify or re-export the model"
        )
    config = builder.create_builder_config()
    if options.workspace_mb is not None:
        config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, options.workspace_mb << 20)
    if not options.strongly_typed:
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
    if any(p.dynamic for p in profiles.values()):
        profile = builder.create_optimization_profile()
        for name, shapes in profiles.items():
            if shapes.dynamic:
                profile.set_shape(name, shapes.min, shapes.opt, shapes.max)
        config.add_optimization_profile(profile)
    timing = None
    if options.timing_cache is not None:
        data = options.timing_cache.read_bytes() if options.timing_cache.is_file() else b""
        timing = config.create_timing_cache(data)
        config.set_timing_cache(timing, False)
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


def tensorrt_runner(version_dir: Path, signature: Signature) -> Runner | None:
    """Run ``<version_dir>/model.plan`` in-process (TensorRT + CUDA torch); None where this machine cannot."""
    trt = _import_tensorrt()
    plan = version_dir / PLAN_FILE
    if trt is None or not plan.is_file():
        return None
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    engine = trt.Runtime(trt.Logger(trt.Logger.WARNING)).deserialize_cuda_engine(plan.read_bytes())
    if engine is None:
        return None
    context = engine.create_execution_context()

    def run(inputs: dict[str, Array]) -> list[Array]:
        keep = []
        for spec in signature.inputs:
            tensor = torch.from_numpy(np.ascontiguousarray(inputs[spec.name])).cuda()
            keep.append(tensor)
            context.set_input_shape(spec.name, tuple(tensor.shape))
            context.set_tensor_address(spec.name, tensor.data_ptr())
        outputs = []
        for spec in signature.outputs:
            dtype = torch.from_numpy(np.empty(0, dtype=TRITON_TO_NUMPY[spec.data_type])).dtype
            tensor = torch.empty(tuple(context.get_tensor_shape(spec.name)), dtype=dtype, device="cuda")
            context.set_tensor_address(spec.name, tensor.data_ptr())
            outputs.append(tensor)
        stream = torch.cuda.current_stream()
        if not context.execute_async_v3(stream.cuda_stream):
            raise ConversionError("TensorRT could not run the plan", "check the inputs against the profiles")
        stream.synchronize()
        return [tensor.cpu().numpy() for tensor in outputs]

    return run


# --------------------------------------------------------------------------- artifact


def write_tensorrt_artifact(
    onnx_path: Path,
    signature: Signature,
    model_dir: Path,
    target: Target,
    options: TensorRtOptions,
    max_batch_size: int,
    version: int = 1,
    progress: Progress | None = None,
    *,
    repo_model_dir: Path | None = None,
    prepared_onnx: Path | None = None,
) -> Artifact:
    """Build ``<version>/model.plan`` from ``onnx_path`` with the first TensorRT found.

    ``repo_model_dir`` is where ``model_dir`` ends up once published (for the printed
    commands; defaults to ``model_dir``). ``prepared_onnx`` is a Q/DQ or FP16 rewrite made
    already (by :mod:`tritongen.convert.reduced`); without it the rewrite is made here when
    the options need one. With ``options.dry_run`` nothing is built:
    the build inputs land in ``trt-build/`` and the artifact's ``engine`` facts carry
    the commands that finish the job.

    Raises:
        ConversionError: the target is ``local``, the build fails, or TensorRT is not
            available (:class:`TensorRtUnavailableError`, with the commands).
        ConfigError: the options contradict the model.
    """
    if target == "local":
        raise UnavailableHereError(
            "the embedded server has no TensorRT backend, so a plan cannot be served with --target local",
            "use --target container and serve it with the Triton image on a GPU host",
        )
    check_layer_names(prepared_onnx or onnx_path, options.keep_fp32_layers)
    profiles = shape_profiles(signature, max_batch_size, options, onnx_dim_names(onnx_path))
    commands = tensorrt_commands(
        onnx_path,
        repo_model_dir or model_dir,
        profiles,
        options,
        version,
        prepared=True if prepared_onnx is not None else None,
    )
    facts: dict[str, object] = {
        "format": "tensorrt",
        "precision": options.precision,
        "profiles": {name: {"min": p.min, "opt": p.opt, "max": p.max} for name, p in profiles.items()},
        "strongly_typed": options.strongly_typed,
        "commands": {"trtexec": commands.trtexec_line(), "compose": commands.compose_line()},
    }
    if options.keep_fp32_layers:
        facts["keep_fp32_layers"] = list(options.keep_fp32_layers)
    if options.cuda_graphs:
        facts["cuda_graphs"] = True
    build_dir = model_dir / BUILD_DIR
    plan = model_dir / str(version) / PLAN_FILE

    trt = None if options.dry_run else _import_tensorrt()
    trtexec = None if options.dry_run or trt is not None else shutil.which("trtexec")
    if not options.dry_run and trt is None and trtexec is None:
        raise TensorRtUnavailableError(commands)

    if progress is not None and commands.prepared_onnx:
        progress("rewriting the ONNX model for the TensorRT build (" + options.precision + ")")
    if prepared_onnx is not None:
        build_dir.mkdir(parents=True, exist_ok=True)
        build_onnx = build_dir / "model.onnx"
        shutil.copyfile(prepared_onnx, build_onnx)
    else:
        build_onnx = prepare_onnx(onnx_path, build_dir, signature, options)

    if options.dry_run:
        if build_onnx == onnx_path:
            build_dir.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(onnx_path, build_dir / "model.onnx")
        if options.calibration_cache is not None:
            shutil.copyfile(options.calibration_cache, build_dir / "calibration.cache")
        if options.timing_cache is not None and options.timing_cache.is_file():
            shutil.copyfile(options.timing_cache, build_dir / "timing.cache")
        plan.parent.mkdir(parents=True, exist_ok=True)
        facts.update(builder="none", dry_run=True, tensorrt_version=options.trt_version)
        files = tuple(sorted(str(p.relative_to(model_dir)) for p in build_dir.iterdir()))
        return Artifact(
            format="tensorrt", backend="tensorrt", platform="tensorrt_plan", files=files, engine=facts
        )

    plan.parent.mkdir(parents=True, exist_ok=True)
    if trt is not None:
        if progress is not None:
            progress(f"building {PLAN_FILE} with the tensorrt Python API {trt.__version__}")
        trt_version: str | None = build_with_python_api(trt, build_onnx, plan, profiles, options)
        builder = "python"
    else:
        assert trtexec is not None
        argv = trtexec_command(build_onnx, plan, profiles, options, trtexec=trtexec)
        if progress is not None:
            progress(f"building {PLAN_FILE}: {shlex.join(argv)}")
        trt_version = build_with_trtexec(argv, progress)
        builder = "trtexec"
    if options.trt_version and trt_version and _major_minor(options.trt_version) != _major_minor(trt_version):
        raise ConfigError(
            f"TensorRT {trt_version} built the plan but the target serves TensorRT {options.trt_version}",
            "build inside the serving image with `docker compose run --rm trt-build ...`",
        )
    if build_dir.exists():
        shutil.rmtree(build_dir)
    facts.update(builder=builder, tensorrt_version=trt_version)
    return Artifact(
        format="tensorrt",
        backend="tensorrt",
        platform="tensorrt_plan",
        files=(f"{version}/{PLAN_FILE}",),
        engine=facts,
    )
