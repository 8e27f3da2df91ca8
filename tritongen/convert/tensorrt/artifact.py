"""The TensorRT artifact: ``<version>/model.plan`` built here, or its build inputs and commands."""

from __future__ import annotations

import shlex
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tritongen.convert.artifact import Artifact, OnnxBuild, Progress
from tritongen.convert.tensorrt.builder import (
    UNAVAILABLE,
    Builders,
    build_with_python_api,
    build_with_trtexec,
    find_builders,
)
from tritongen.convert.tensorrt.commands import (
    BUILD_DIR,
    PLAN_FILE,
    TensorRtCommands,
    tensorrt_commands,
    trtexec_command,
)
from tritongen.convert.tensorrt.options import TensorRtOptions
from tritongen.convert.tensorrt.prepare import check_layer_names, prepare_onnx
from tritongen.convert.tensorrt.profiles import ShapeProfile, onnx_dim_names, shape_profiles
from tritongen.convert.tensorrt.versions import check_built_version
from tritongen.errors import UnavailableHereError


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
        super().__init__(UNAVAILABLE, hint)


EngineUnavailableError = UnavailableHereError
"""What the repository builder catches to report an ``unavailable`` outcome."""


def write_tensorrt_artifact(
    build: OnnxBuild,
    options: TensorRtOptions,
    *,
    progress: Progress | None = None,
    repo_model_dir: Path | None = None,
    prepared_onnx: Path | None = None,
) -> Artifact:
    """Build ``<version>/model.plan`` from ``build.onnx_path`` with the first TensorRT found.

    ``repo_model_dir`` is where ``build.model_dir`` ends up once published (for the printed
    commands; defaults to ``build.model_dir``). ``prepared_onnx`` is a Q/DQ or FP16 rewrite
    made already (by :mod:`tritongen.convert.reduced`); without it the rewrite is made here
    when the options need one. With ``options.dry_run`` nothing is built:
    the build inputs land in ``trt-build/`` and the artifact's ``engine`` facts carry
    the commands that finish the job.

    Raises:
        ConversionError: the target is ``local``, the build fails, or TensorRT is not
            available (:class:`TensorRtUnavailableError`, with the commands).
        ConfigError: the options contradict the model.
    """
    if build.target == "local":
        raise UnavailableHereError(
            "the embedded server has no TensorRT backend, so a plan cannot be served with --target local",
            "use --target container and serve it with the Triton image on a GPU host",
        )
    check_layer_names(prepared_onnx or build.onnx_path, options.keep_fp32_layers)
    profiles = shape_profiles(build.signature, build.max_batch_size, options, onnx_dim_names(build.onnx_path))
    commands = tensorrt_commands(
        build.onnx_path,
        repo_model_dir or build.model_dir,
        profiles,
        options,
        version=build.version,
        prepared=True if prepared_onnx is not None else None,
    )
    facts = _facts(options, profiles, commands)
    builders = Builders(trt=None, trtexec=None) if options.dry_run else find_builders()
    if not options.dry_run and builders.trt is None and builders.trtexec is None:
        raise TensorRtUnavailableError(commands)

    if progress is not None and commands.prepared_onnx:
        progress("rewriting the ONNX model for the TensorRT build (" + options.precision + ")")
    build_onnx = _build_onnx(build, options, prepared_onnx)
    if options.dry_run:
        return _write_build_inputs(build, options, build_onnx, facts)

    plan = build.version_dir / PLAN_FILE
    plan.parent.mkdir(parents=True, exist_ok=True)
    trt_version, builder = _build_plan(builders, build_onnx, plan, profiles, options, progress)
    check_built_version(trt_version, options.trt_version)
    build_dir = build.model_dir / BUILD_DIR
    if build_dir.exists():
        shutil.rmtree(build_dir)
    facts.update(builder=builder, tensorrt_version=trt_version)
    return _plan_artifact((f"{build.version}/{PLAN_FILE}",), facts)


def _facts(
    options: TensorRtOptions, profiles: Mapping[str, ShapeProfile], commands: TensorRtCommands
) -> dict[str, object]:
    """The engine facts known before the build: precision, profiles and the commands."""
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
    return facts


def _build_onnx(build: OnnxBuild, options: TensorRtOptions, prepared_onnx: Path | None) -> Path:
    """The ONNX model the build reads: a copy of ``prepared_onnx`` in the build folder, or one made here."""
    build_dir = build.model_dir / BUILD_DIR
    if prepared_onnx is None:
        return prepare_onnx(build.onnx_path, build_dir, build.signature, options)
    build_dir.mkdir(parents=True, exist_ok=True)
    build_onnx = build_dir / "model.onnx"
    shutil.copyfile(prepared_onnx, build_onnx)
    return build_onnx


def _write_build_inputs(
    build: OnnxBuild, options: TensorRtOptions, build_onnx: Path, facts: dict[str, object]
) -> Artifact:
    """The dry run: the model and caches the commands read, copied into the build folder."""
    build_dir = build.model_dir / BUILD_DIR
    if build_onnx == build.onnx_path:
        build_dir.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(build.onnx_path, build_dir / "model.onnx")
    if options.calibration_cache is not None:
        shutil.copyfile(options.calibration_cache, build_dir / "calibration.cache")
    if options.timing_cache is not None and options.timing_cache.is_file():
        shutil.copyfile(options.timing_cache, build_dir / "timing.cache")
    build.version_dir.mkdir(parents=True, exist_ok=True)
    facts.update(builder="none", dry_run=True, tensorrt_version=options.trt_version)
    files = tuple(sorted(str(p.relative_to(build.model_dir)) for p in build_dir.iterdir()))
    return _plan_artifact(files, facts)


def _build_plan(
    builders: Builders,
    build_onnx: Path,
    plan: Path,
    profiles: Mapping[str, ShapeProfile],
    options: TensorRtOptions,
    progress: Progress | None,
) -> tuple[str | None, str]:
    """Build ``plan`` with the Python API, else ``trtexec``; the TensorRT version and the builder used."""
    trt: Any = builders.trt
    if trt is not None:
        if progress is not None:
            progress(f"building {PLAN_FILE} with the tensorrt Python API {trt.__version__}")
        return build_with_python_api(trt, build_onnx, plan, profiles, options), "python"
    assert builders.trtexec is not None
    argv = trtexec_command(build_onnx, plan, profiles, options, trtexec=builders.trtexec)
    if progress is not None:
        progress(f"building {PLAN_FILE}: {shlex.join(argv)}")
    return build_with_trtexec(argv, progress), "trtexec"


def _plan_artifact(files: tuple[str, ...], facts: dict[str, object]) -> Artifact:
    """A ``tensorrt_plan`` artifact of ``files`` with the engine ``facts``."""
    return Artifact(
        format="tensorrt", backend="tensorrt", platform="tensorrt_plan", files=files, engine=facts
    )
