"""What a build is asked for and what it made: requests, outcomes, the ``tritongen.convert/1`` document."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from tritongen.convert.artifact import Target
from tritongen.convert.precision import FP32, PrecisionOptions, Variant, variant_unavailable_reason
from tritongen.convert.reduced import PrecisionReport
from tritongen.convert.tensorrt import TensorRtOptions
from tritongen.convert.torch_export import TorchScriptMode
from tritongen.convert.tvm import TvmOptions
from tritongen.convert.verify import (
    TOLERANCES,
    Tolerance,
    Verification,
)
from tritongen.errors import ConfigError
from tritongen.pipeline.document import CONVERT_SCHEMA as CONVERT_SCHEMA
from tritongen.pipeline.document import ConvertDocument, ConvertOutcome
from tritongen.sources.signature import Signature
from tritongen.triton.batching import BatchingOptions
from tritongen.triton.model_config import (
    ModelConfig,
)

Progress = Callable[[str], None]


OutcomeStatus = Literal["built", "kept", "failed", "unavailable"]
"""``kept``: failed verification but written anyway (``--keep-failed``)."""


@dataclass(frozen=True)
class VerifyOptions:
    """How artifacts are checked against the source before they enter the repository."""

    data: Path | None = None
    atol: float | None = None
    rtol: float | None = None
    keep_failed: bool = False
    skip: bool = False

    def tolerance(self, precision: str = "fp32") -> Tolerance:
        """The tolerance for ``precision``: the default, or the user's element-wise one.

        ``--atol``/``--rtol`` replace the default, INT8's relative RMS test included.
        """
        base = TOLERANCES.get(precision, TOLERANCES["fp32"])
        if self.atol is None and self.rtol is None:
            return base
        return Tolerance(
            atol=base.atol if self.atol is None else self.atol,
            rtol=base.rtol if self.rtol is None else self.rtol,
        )


@dataclass(frozen=True)
class BuildRequest:
    """Everything ``tritongen convert`` needs."""

    source: Path | str
    name: str
    repo: Path
    target: Target = "local"
    formats: tuple[str, ...] = ("onnx",)
    options: BatchingOptions = field(default_factory=BatchingOptions)
    force: bool = False
    templates_dir: Path | None = None
    input_specs: tuple[str, ...] = ()
    output_names: tuple[str, ...] = ()
    torchscript_mode: TorchScriptMode = "trace"
    tvm: TvmOptions = field(default_factory=TvmOptions)
    tensorrt: TensorRtOptions = field(default_factory=TensorRtOptions)
    verify: VerifyOptions = field(default_factory=VerifyOptions)
    precisions: tuple[Variant, ...] = (FP32,)
    """Every format is built in each of these precisions it takes (one model directory each)."""
    precision: PrecisionOptions = field(default_factory=PrecisionOptions)
    list_unsupported_precisions: bool = True
    """Report (format, precision) pairs no format takes as ``unavailable``; off for ``--formats all``."""


@dataclass(frozen=True)
class BuiltModel:
    """One model directory written into the repository."""

    name: str
    format: str
    path: Path
    files: tuple[str, ...]
    """Paths written, relative to the model directory."""
    config: ModelConfig
    engine: dict[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class FormatOutcome:
    """What happened to one requested format."""

    format: str
    name: str
    status: OutcomeStatus
    variant: Variant = FP32
    reason: str | None = None
    hint: str | None = None
    model: BuiltModel | None = None
    verification: Verification | None = None
    seconds: float = 0.0
    warnings: tuple[str, ...] = ()
    """Lint warnings on the written config: legal, but probably not what was meant."""
    precision: PrecisionReport | None = None
    """How a reduced-precision variant was made and how far it drifts from FP32."""

    @property
    def label(self) -> str:
        """The format and, when reduced, the precision: ``onnx``, ``onnx int8 dynamic``."""
        return self.variant.of(self.format)


@dataclass(frozen=True)
class BuildResult:
    """What a build wrote, and the source signature it was built from."""

    source: Path | str
    signature: Signature
    outcomes: tuple[FormatOutcome, ...]
    source_kind: str = "onnx"

    @property
    def models(self) -> tuple[BuiltModel, ...]:
        """The model directories written (built or kept)."""
        return tuple(o.model for o in self.outcomes if o.model is not None)

    @property
    def failures(self) -> tuple[FormatOutcome, ...]:
        """Formats that were asked for and did not make it into the repository clean."""
        return tuple(o for o in self.outcomes if o.status != "built")

    def document(self, request: BuildRequest) -> ConvertDocument:
        """The ``tritongen.convert/1`` document, typed: each model directory, its check and accuracy."""
        return ConvertDocument(
            source=str(self.source),
            name=request.name,
            repo=str(request.repo),
            target=request.target,
            signature=self.signature.describe(),
            precision_settings=request.precision.to_json(),
            outcomes=[
                ConvertOutcome(
                    format=o.format,
                    variant=o.variant.key,
                    label=o.label,
                    model=o.name,
                    status=o.status,
                    reason=o.reason,
                    seconds=round(o.seconds, 3),
                    verification=o.verification,
                    precision=o.precision,
                )
                for o in self.outcomes
            ],
        )

    def to_json(self, request: BuildRequest) -> dict[str, Any]:
        """The ``tritongen.convert/1`` document: every model directory, its verification and accuracy."""
        return self.document(request).to_json()


def model_dir_name(name: str, fmt: str, variant: Variant = FP32) -> str:
    """Directory (and Triton model) name of one format of a model, e.g. ``bert_onnx``, ``bert_onnx_int8``."""
    return f"{name}_{fmt}{variant.suffix}"


def build_plan(
    formats: tuple[str, ...], variants: tuple[Variant, ...]
) -> tuple[list[tuple[str, Variant]], list[tuple[str, Variant, str]]]:
    """The (format, precision) pairs to build, and those no format here takes (with why).

    Raises:
        ConfigError: no requested format takes any requested precision.
    """
    planned: list[tuple[str, Variant]] = []
    skipped: list[tuple[str, Variant, str]] = []
    for fmt in formats:
        for variant in variants:
            reason = variant_unavailable_reason(fmt, variant)
            if reason is None:
                planned.append((fmt, variant))
            else:
                skipped.append((fmt, variant, reason))
    if not planned:
        raise ConfigError(skipped[0][2], "add --formats onnx, or choose --precision fp32")
    return planned, skipped
