"""TVM options, the target the library is compiled for, and whether TVM imports here."""

from __future__ import annotations

import copy
import json
import os
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from tritongen.convert.tvm.cross import host_arch, is_cross, target_arch
from tritongen.errors import ConversionError, MissingDependencyError


@dataclass(frozen=True)
class TvmOptions:
    """How to compile (and optionally tune) a model with TVM."""

    target: str | None = None
    """``None`` or ``llvm``: this host's CPU; ``cuda``; an edge preset of :data:`TARGET_PRESETS`
    (cross-compiled: ``aarch64``, ``rpi4``, ``rk3588``); or a TVM target as JSON dict text."""
    tune_trials: int = 0
    """MetaSchedule measurement trials over all tasks; 0 with no ``tune_minutes`` skips tuning."""
    tune_minutes: float | None = None
    """Wall-clock budget for tuning; tuning stops at whichever budget ends first."""
    buckets: str | None = None
    """Shape buckets, ``batch=1,8,32;seq=64,128`` (see :mod:`.buckets`); ``None``: the defaults
    when tuning, else the symbolic library only."""
    pads: tuple[str, ...] = ()
    """Dims that may be padded, each ``[ALIAS=]INPUT:AXIS`` (the input masks padding with 0)."""
    strict_buckets: bool = False
    """Refuse requests no bucket holds instead of running them on the symbolic library."""
    preferred_batch_sizes: tuple[int, ...] = ()
    """The model's preferred batch sizes: default batch buckets."""
    fast_math: bool = True
    """Replace ``erf``, ``exp`` and ``softmax`` by TVM's fast approximations before compiling."""
    dim_values: dict[str, int] = field(default_factory=dict)
    """Default values of non-batch dynamic dims in buckets, by ONNX dim name; default 128 each."""
    cache_dir: Path | None = None
    """Tuning-record cache; default ``$TRITONGEN_CACHE_DIR`` or ``~/.cache/tritongen/tvm``."""

    @property
    def tunes(self) -> bool:
        """Whether these options ask for MetaSchedule tuning."""
        return self.tune_trials > 0 or (self.tune_minutes is not None and self.tune_minutes > 0)

    @property
    def bucketed(self) -> bool:
        """Whether static bucket libraries are built (asked for, or implied by tuning)."""
        return self.buckets is not None or self.tunes or self.strict_buckets or bool(self.pads)


@dataclass(frozen=True)
class CompileTarget:
    """Where the library runs: the target as a dict (as recorded) and as a TVM ``Target``."""

    spec: dict[str, Any]
    tvm: Any

    @property
    def on_cuda(self) -> bool:
        """Whether the target is a CUDA GPU (else a CPU)."""
        return bool(self.spec["kind"] == "cuda")


def tvm_unavailable_reason() -> str | None:
    """Say why TVM cannot be used here, or ``None`` when ``tvm`` and its Relax frontend import."""
    try:
        import tvm  # noqa: F401
        from tvm import relax  # noqa: F401
        from tvm.relax.frontend.onnx import from_onnx  # noqa: F401
    except Exception as e:  # a broken install raises more than ImportError
        return f"apache-tvm does not import ({type(e).__name__}: {first_line(str(e))})"
    return None


def tvm_requirements() -> tuple[str, ...]:
    """Pinned packages the wrapper needs: the installed TVM and TVM FFI, and numpy<2."""
    return (
        f"apache-tvm=={metadata.version('apache-tvm')}",
        f"apache-tvm-ffi=={metadata.version('apache-tvm-ffi')}",
        "numpy<2",
    )


_AARCH64: dict[str, Any] = {"kind": "llvm", "mtriple": "aarch64-linux-gnu", "mattr": ["+neon"]}

TARGET_PRESETS: dict[str, tuple[str, dict[str, Any]]] = {
    "aarch64": ("any 64-bit Arm Linux board with NEON (generic core)", _AARCH64),
    "rpi4": ("Raspberry Pi 4 (Cortex-A72)", {**_AARCH64, "mcpu": "cortex-a72"}),
    "rk3588": ("Rockchip RK3588 boards, e.g. Orange Pi 5 (Cortex-A76)", {**_AARCH64, "mcpu": "cortex-a76"}),
}
"""Edge targets by name: a one-line description and the TVM target dict (cross-compiled here)."""


def resolve_target(text: str | None) -> dict[str, Any]:
    """Turn ``TvmOptions.target`` into a TVM target dict.

    Raises:
        ConversionError: the text is neither ``llvm``, ``cuda``, a preset nor a JSON object with a ``kind``.
    """
    spec = (text or "llvm").strip()
    if spec == "llvm":
        import tvm

        cpu = str(tvm.target.codegen.llvm_get_system_cpu())
        return {"kind": "llvm", "mcpu": cpu, "num-cores": usable_cores()}
    if spec == "cuda":
        return {"kind": "cuda"}
    if spec in TARGET_PRESETS:
        return copy.deepcopy(TARGET_PRESETS[spec][1])  # callers may change theirs
    try:
        parsed = json.loads(spec)
    except json.JSONDecodeError:
        parsed = None
    if not isinstance(parsed, dict) or not isinstance(parsed.get("kind"), str):
        raise ConversionError(
            f"unknown TVM target {spec!r}",
            f"use llvm (this CPU), cuda, {', '.join(TARGET_PRESETS)} "
            'or a JSON target such as {"kind": "llvm", "mcpu": "znver3"}',
        )
    return parsed


def make_target(spec: dict[str, Any]) -> Any:
    """The TVM ``Target`` for a target dict.

    Raises:
        ConversionError: TVM rejects the dict.
    """
    import tvm

    try:
        return tvm.target.Target(spec)
    except Exception as e:
        raise ConversionError(
            f"TVM rejects target {json.dumps(spec)}: {first_line(str(e))}",
            "check the target's kind and attributes",
        ) from e


def check_options(options: TvmOptions) -> None:
    """Refuse out-of-range options, and tuning without xgboost.

    Raises:
        ConversionError: a count, budget or dim value is out of range.
        MissingDependencyError: the options ask for tuning and xgboost is not installed.
    """
    if options.tune_trials < 0:
        raise ConversionError(f"tune_trials must be >= 0, not {options.tune_trials}")
    if options.tune_minutes is not None and options.tune_minutes < 0:
        raise ConversionError(f"tune_minutes must be >= 0, not {options.tune_minutes}")
    bad = {k: v for k, v in options.dim_values.items() if v < 1}
    if bad:
        raise ConversionError(f"dim_values must be >= 1: {bad}")
    if options.tunes and is_cross(spec := resolve_target(options.target)):
        raise ConversionError(
            f"TVM cannot tune for {target_arch(spec)} on this {host_arch()} machine: tuning measures"
            " kernels where it runs, so it needs the board itself",
            "build without --tvm-tune-trials/--tvm-tune-minutes, or convert on the board with tuning",
        )
    if options.tunes:
        try:
            import xgboost  # noqa: F401
        except ImportError as e:
            raise MissingDependencyError(
                "TVM tuning needs xgboost (MetaSchedule's cost model)", "pip install xgboost-cpu"
            ) from e


def usable_cores() -> int:
    """How many CPU cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def first_line(text: str) -> str:
    """The first non-blank line of ``text``, stripped; empty when there is none."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[0] if lines else ""
