"""No option silently ignored: an option a build would not use is refused in one line, with what to do.

Each rule names the option, tells whether the request sets it (away from its default), and
why it would do nothing for this request (the formats, the source's kind, ``--no-verify``, the
precisions asked for); ``None`` when it acts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields

from tritongen.convert.tensorrt import TensorRtOptions
from tritongen.convert.tvm import TvmOptions
from tritongen.errors import ConfigError
from tritongen.pipeline.request import BuildRequest

Why = Callable[[BuildRequest, str], str | None]
"""Why the option does nothing for this request and source kind; ``None`` when it acts."""


@dataclass(frozen=True)
class Rule:
    """One option: whether it is set, why it would do nothing, and what to do instead."""

    flag: str
    given: Callable[[BuildRequest], bool]
    idle: Why
    hint: str


def _format_only(fmt: str) -> Why:
    def why(request: BuildRequest, _kind: str) -> str | None:
        if fmt in request.formats:
            return None
        return f"it applies to the {fmt} format, and --formats is {','.join(request.formats)}"

    return why


def _verifying(request: BuildRequest, _kind: str) -> str | None:
    return "--no-verify skips verification" if request.verify.skip else None


def _script_idle(request: BuildRequest, kind: str) -> str | None:
    if kind != "pytorch":
        what = "a TorchScript file is served as it is" if kind == "torchscript" else "the source is ONNX"
        return f"--script makes TorchScript from a PyTorch factory, and {what}"
    return _format_only("torchscript")(request, kind)


def _shape_idle(request: BuildRequest, _kind: str) -> str | None:
    if request.fixed_shape or not request.verify.skip or "tvm" in request.formats:
        return None
    if request.precision.calibration == "random":
        return None
    return "with --no-verify nothing draws random inputs (no verification, TVM buckets or random calibration)"


def _calibrated(request: BuildRequest, _kind: str) -> str | None:
    if any(v.calibrated for v in request.precisions):
        return None
    return "only static INT8 is calibrated, and --precision asks for none"


def _calibration_data(request: BuildRequest, _kind: str) -> str | None:
    return (
        None if request.precision.calibration is not None else "there is no --calibration-data to draw from"
    )


def _auto_mixed(request: BuildRequest, _kind: str) -> str | None:
    return None if request.precision.auto_mixed else "it is the measure of --auto-mixed-precision"


def _changed(group: str, name: str, default: object = None) -> Callable[[BuildRequest], bool]:
    def given(request: BuildRequest) -> bool:
        return bool(getattr(getattr(request, group), name) != default)

    return given


_TVM_FLAGS = {
    "target": "--tvm-target",
    "tune_trials": "--tvm-tune-trials",
    "tune_minutes": "--tvm-tune-minutes",
    "buckets": "--tvm-buckets",
    "pads": "--tvm-pad",
    "strict_buckets": "--tvm-strict-buckets",
    "fast_math": "--tvm-exact-math",
}
_TENSORRT_FLAGS = {
    "opt_batch_size": "--opt-batch-size",
    "dims": "--dims",
    "workspace_mb": "--workspace-mb",
    "timing_cache": "--timing-cache",
    "cuda_graphs": "--cuda-graphs",
    "trt_version": "--tensorrt-version",
    "dry_run": "--dry-run",
}


def _engine_rules() -> list[Rule]:
    """The TVM and TensorRT options: each applies to its own format only."""
    rules = []
    for group, flags, defaults, fmt in (
        ("tvm", _TVM_FLAGS, TvmOptions(), "tvm"),
        ("tensorrt", _TENSORRT_FLAGS, TensorRtOptions(), "tensorrt"),
    ):
        names = {f.name for f in fields(defaults)}
        for name, flag in flags.items():
            if name not in names:  # pragma: no cover - a renamed option field
                raise TypeError(f"{group} options have no field {name}")
            given = _changed(group, name, getattr(defaults, name))
            rules.append(Rule(flag, given, _format_only(fmt), f"add {fmt} to --formats, or drop {flag}"))
    return rules


RULES: tuple[Rule, ...] = (
    *_engine_rules(),
    Rule("--script", lambda r: r.torchscript_mode == "script", _script_idle, "drop --script"),
    Rule(
        "--verify-data", lambda r: r.verify.data is not None, _verifying, "drop --no-verify or --verify-data"
    ),
    Rule("--atol", lambda r: r.verify.atol is not None, _verifying, "drop --no-verify or --atol"),
    Rule("--rtol", lambda r: r.verify.rtol is not None, _verifying, "drop --no-verify or --rtol"),
    Rule("--keep-failed", lambda r: r.verify.keep_failed, _verifying, "drop --no-verify or --keep-failed"),
    Rule(
        "--shape",
        lambda r: bool(r.shapes),
        _shape_idle,
        "drop --no-verify, add --fixed-shape, or drop --shape",
    ),
    Rule(
        "--calibration-method",
        _changed("precision", "calibration_method", "minmax"),
        _calibrated,
        "add --precision int8 (static), or drop --calibration-method",
    ),
    Rule(
        "--calibration-samples",
        _changed("precision", "calibration_samples"),
        _calibration_data,
        "add --calibration-data, or drop --calibration-samples",
    ),
    Rule(
        "--error-metric",
        _changed("precision", "error_metric", "max-abs"),
        _auto_mixed,
        "add --auto-mixed-precision --max-error X, or drop --error-metric",
    ),
)


def check_applicable(request: BuildRequest, source_kind: str) -> None:
    """Refuse the first option the request sets that would do nothing.

    Raises:
        ConfigError: one line naming the option, why it does nothing, and what to do.
    """
    if request.fixed_shape and not request.shapes:
        raise ConfigError(
            "--fixed-shape fixes the dims given with --shape, and none is given", "add --shape NAME=DIMS"
        )
    for rule in RULES:
        if not rule.given(request):
            continue
        why = rule.idle(request, source_kind)
        if why is not None:
            raise ConfigError(f"{rule.flag} would do nothing: {why}", rule.hint)
