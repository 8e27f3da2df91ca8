"""The optimization profile of a plan: the min/opt/max shape of every input."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from tritongen.convert.onnx import graph_inputs
from tritongen.convert.tensorrt.options import TensorRtOptions
from tritongen.errors import ConfigError
from tritongen.sources.signature import Signature, TensorSpec

DEFAULT_DYNAMIC_DIM: tuple[int, int, int] = (1, 128, 512)
"""min/opt/max of a dynamic non-batch dim (e.g. sequence length) that has no override."""

DimRange = tuple[int, int, int]


class ShapeProfile(NamedTuple):
    """The min/opt/max shapes of one input (batch dim included when batched)."""

    min: tuple[int, ...]
    opt: tuple[int, ...]
    max: tuple[int, ...]
    dynamic: bool
    """Whether the network input has a dynamic dim (only those take explicit shapes)."""


@dataclass(frozen=True)
class _BatchDim:
    """The batch dim's settings: whether there is one, and its largest and optimal size."""

    batched: bool
    max_batch_size: int
    opt_batch_size: int | None

    def default_range(self) -> DimRange:
        """The batch range without an override: 1..max (opt: ``opt_batch_size`` or max), or 1 at 0."""
        if self.max_batch_size == 0:
            return (1, 1, 1)
        return (1, self.opt_batch_size or self.max_batch_size, self.max_batch_size)


def onnx_dim_names(onnx_path: Path) -> dict[str, tuple[str | None, ...]]:
    """The symbolic dim names (``dim_param``) of each graph input; None for fixed dims."""
    import onnx

    model = onnx.load(str(onnx_path), load_external_data=False)
    return {
        value.name: tuple(d.dim_param or None for d in value.type.tensor_type.shape.dim)
        for value in graph_inputs(model)
    }


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
    batch = _BatchDim(signature.batched, max_batch_size, options.opt_batch_size)
    _check_batch(batch)
    names = dim_names or {}
    used: set[str] = set()
    profiles = {
        spec.name: _input_profile(spec, names.get(spec.name, ()), batch, options.dims, used)
        for spec in signature.inputs
    }
    unused = sorted(set(options.dims) - used)
    if unused:
        raise ConfigError(
            f"dim override {unused[0]} names no input dim", "key it INPUT:AXIS or by the ONNX dim name"
        )
    return profiles


def _check_batch(batch: _BatchDim) -> None:
    """Refuse batch options that contradict the signature or each other."""
    max_batch_size, opt_batch_size = batch.max_batch_size, batch.opt_batch_size
    if max_batch_size < 0:
        raise ConfigError(f"max_batch_size must be >= 0, not {max_batch_size}")
    if max_batch_size > 0 and not batch.batched:
        raise ConfigError(
            "the model has no batch dim, so max_batch_size must be 0", "pass --max-batch-size 0"
        )
    if opt_batch_size is not None:
        if max_batch_size == 0:
            raise ConfigError("--opt-batch-size needs a max_batch_size above 0")
        if opt_batch_size > max_batch_size:
            raise ConfigError(
                f"--opt-batch-size {opt_batch_size} exceeds max_batch_size {max_batch_size}",
                f"pass a value between 1 and {max_batch_size}",
            )


def _input_profile(
    spec: TensorSpec,
    symbolic: tuple[str | None, ...],
    batch: _BatchDim,
    overrides: Mapping[str, DimRange],
    used: set[str],
) -> ShapeProfile:
    """One input's profile; the override keys it matches are added to ``used``."""
    full = ((-1,) if batch.batched else ()) + spec.dims
    ranges: list[DimRange] = []
    for axis, dim in enumerate(full):
        keys = [f"{spec.name}:{axis}"]
        if axis < len(symbolic) and symbolic[axis]:
            keys.append(str(symbolic[axis]))
        matched = [k for k in keys if k in overrides]
        used.update(matched)
        override = overrides[matched[0]] if matched else None
        ranges.append(_axis_range(dim, keys[0], override, batch if batch.batched and axis == 0 else None))
    return ShapeProfile(
        tuple(r[0] for r in ranges),
        tuple(r[1] for r in ranges),
        tuple(r[2] for r in ranges),
        dynamic=-1 in full,
    )


def _axis_range(dim: int, key: str, override: DimRange | None, batch: _BatchDim | None) -> DimRange:
    """The range of one axis (``batch`` given only for the batch axis).

    Raises:
        ConfigError: a fixed dim is overridden, or a batch override exceeds the max batch size.
    """
    if dim != -1:
        if override is not None:
            raise ConfigError(f"dim {key} is fixed at {dim} and takes no range")
        return (dim, dim, dim)
    if override is not None:
        if batch is not None and batch.max_batch_size and override[2] > batch.max_batch_size:
            raise ConfigError(f"batch range {override} exceeds max_batch_size {batch.max_batch_size}")
        return override
    return batch.default_range() if batch is not None else DEFAULT_DYNAMIC_DIM
