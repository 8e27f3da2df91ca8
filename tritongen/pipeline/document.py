"""The ``tritongen.convert/1`` document, typed: every model directory a conversion wrote, checked.

:meth:`tritongen.pipeline.request.BuildResult.document` builds it from a finished build and
:meth:`ConvertDocument.from_json` from a file; the tables and the page take it either way,
and its :meth:`ConvertDocument.to_json` is the document ``convert --json`` writes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tritongen import __version__
from tritongen.convert.reduced import PrecisionReport
from tritongen.convert.result_json import read_precision_report, read_verification
from tritongen.convert.verify import Verification

CONVERT_SCHEMA = "tritongen.convert/1"


@dataclass(frozen=True)
class ConvertOutcome:
    """What happened to one (format, precision) asked for: its model directory, check and accuracy."""

    format: str
    variant: str
    """The precision's key (``fp32``, ``int8-dynamic`` …)."""
    label: str
    """The format and, when reduced, the precision: ``onnx``, ``onnx int8 dynamic``."""
    model: str
    """The model directory's (and Triton model's) name."""
    status: str
    """``built``, ``kept`` (failed verification, written anyway), ``failed`` or ``unavailable``."""
    reason: str | None
    seconds: float
    verification: Verification | None
    precision: PrecisionReport | None

    def to_json(self) -> dict[str, Any]:
        """One entry of ``outcomes``."""
        return {
            "format": self.format,
            "variant": self.variant,
            "label": self.label,
            "model": self.model,
            "status": self.status,
            "reason": self.reason,
            "seconds": self.seconds,
            "verification": None if self.verification is None else self.verification.to_json(),
            "precision": None if self.precision is None else self.precision.to_json(),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ConvertOutcome:
        """Read what :meth:`to_json` wrote."""
        fmt = str(data.get("format", ""))
        verification, precision = data.get("verification"), data.get("precision")
        return cls(
            format=fmt,
            variant=str(data.get("variant", "fp32")),
            label=str(data["label"]),
            model=str(data.get("model", "")),
            status=str(data["status"]),
            reason=data.get("reason"),
            seconds=data.get("seconds", 0.0),
            verification=read_verification(verification, fmt) if isinstance(verification, dict) else None,
            precision=read_precision_report(precision) if isinstance(precision, dict) else None,
        )


@dataclass(frozen=True)
class PrecisionSettings:
    """How reduced-precision variants were asked for (the document's ``precision_settings``)."""

    calibration_data: str | None = None
    calibration_method: str | None = None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PrecisionSettings:
        """Read the calibration of a ``precision_settings`` object."""
        return cls(data.get("calibration_data"), data.get("calibration_method"))


@dataclass(frozen=True)
class ConvertDocument:
    """A conversion: the source, where it wrote, and every (format, precision) asked for."""

    source: str
    name: str
    repo: str
    target: str
    signature: str
    """The source's signature in words."""
    precision_settings: dict[str, Any]
    """The reduced-precision options as given (``PrecisionOptions.to_json``)."""
    outcomes: list[ConvertOutcome] = field(default_factory=list)
    tritongen_version: str = __version__

    def precision(self) -> PrecisionSettings:
        """``precision_settings`` read: where the calibration rows came from, and how."""
        return PrecisionSettings.from_json(self.precision_settings)

    def precision_entries(self) -> list[tuple[str, PrecisionReport]]:
        """Each reduced-precision variant's label and report, in the order built."""
        return [(o.label, o.precision) for o in self.outcomes if o.precision is not None]

    def to_json(self) -> dict[str, Any]:
        """The ``tritongen.convert/1`` document."""
        return {
            "schema": CONVERT_SCHEMA,
            "tritongen_version": self.tritongen_version,
            "source": self.source,
            "name": self.name,
            "repo": self.repo,
            "target": self.target,
            "signature": self.signature,
            "precision_settings": self.precision_settings,
            "outcomes": [o.to_json() for o in self.outcomes],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ConvertDocument:
        """Read a ``tritongen.convert/1`` document."""
        return cls(
            source=str(data.get("source")),
            name=str(data.get("name")),
            repo=str(data.get("repo")),
            target=str(data.get("target")),
            signature=str(data.get("signature")),
            precision_settings=dict(data.get("precision_settings") or {}),
            outcomes=[ConvertOutcome.from_json(o) for o in data.get("outcomes") or ()],
            tritongen_version=str(data.get("tritongen_version", __version__)),
        )
