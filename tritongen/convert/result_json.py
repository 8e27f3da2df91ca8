"""Reading back what a conversion records: a variant's precision report and a model's verification.

Both are written into a model's metadata and into the ``tritongen.convert/1`` and
``tritongen.compare/1`` documents by their classes' ``to_json``; these readers give the same
classes back, so that what reads a document (the report, compare on an existing repository)
works with the typed results, and ``to_json`` of what was read gives the document's object back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tritongen.convert.accuracy import AccuracyFigures, OutputAccuracy
from tritongen.convert.mixed_precision import MixedResult, MixedStep
from tritongen.convert.reduced import PrecisionReport
from tritongen.convert.verify import OutputCheck, Tolerance, Verification


@dataclass(frozen=True)
class CalibrationFacts:
    """What a precision report records of its calibration rows (:meth:`CalibrationSet.to_json`)."""

    source: str | None = None
    random: bool = False
    samples: int | None = None
    held_out_samples: int | None = None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CalibrationFacts:
        """Read a precision report's ``calibration`` object."""
        return cls(
            source=data.get("source"),
            random=bool(data.get("random")),
            samples=data.get("samples"),
            held_out_samples=data.get("held_out_samples"),
        )


def read_output_accuracy(data: dict[str, Any]) -> OutputAccuracy:
    """One output's drift, as :meth:`OutputAccuracy.to_json` wrote it."""
    task = data.get("task", "other")
    return OutputAccuracy(
        name=str(data["name"]),
        task=task if task in ("embedding", "classifier") else "other",
        max_abs_err=float(data.get("max_abs_err", 0.0)),
        max_rel_err=float(data.get("max_rel_err", 0.0)),
        rel_rms_err=float(data.get("rel_rms_err", 0.0)),
        cosine_min=data.get("cosine_min"),
        cosine_mean=data.get("cosine_mean"),
        top1_agreement=data.get("top1_agreement"),
    )


def read_accuracy(data: dict[str, Any]) -> AccuracyFigures:
    """Every output's drift on one evaluation set, as :meth:`AccuracyFigures.to_json` wrote it."""
    return AccuracyFigures(
        outputs=tuple(read_output_accuracy(o) for o in data.get("outputs") or ()),
        samples=int(data.get("samples", 0)),
    )


def read_mixed(data: dict[str, Any]) -> MixedResult:
    """A mixed-precision search, as :meth:`MixedResult.to_json` wrote it."""
    return MixedResult(
        max_error=float(data["max_error"]),
        metric=str(data["metric"]),
        kept=tuple(str(k) for k in data.get("kept") or ()),
        steps=[
            MixedStep(
                kept=tuple(str(k) for k in step.get("kept") or ()),
                error=float(step["error"]),
                latency_ms=float(step["latency_ms"]),
                added=step.get("added"),
            )
            for step in data.get("steps") or ()
        ],
        sensitivity=[(str(s["node"]), float(s["error_removed"])) for s in data.get("sensitivity") or ()],
        candidates=int(data.get("candidates", 0)),
        met=bool(data.get("met", True)),
    )


def read_precision_report(data: dict[str, Any]) -> PrecisionReport:
    """A reduced-precision variant's report, as :meth:`PrecisionReport.to_json` wrote it."""
    mixed, accuracy = data.get("auto_mixed_precision"), data.get("accuracy")
    return PrecisionReport(
        variant=str(data.get("variant", "")),
        flavour=str(data.get("flavour", "")),
        calibration=data.get("calibration"),
        calibration_method=data.get("calibration_method"),
        kept_fp32=[str(k) for k in data.get("kept_fp32") or ()],
        mixed=read_mixed(mixed) if isinstance(mixed, dict) else None,
        accuracy=read_accuracy(accuracy) if isinstance(accuracy, dict) else None,
        accuracy_data=str(data.get("accuracy_data", "")),
        accuracy_of=str(data.get("accuracy_of", "the artifact")),
    )


def read_verification(data: dict[str, Any], fmt: str) -> Verification:
    """A model's verification against its source, as :meth:`Verification.to_json` wrote it.

    The JSON does not name the format: ``fmt`` is the model's.
    """
    return Verification(
        format=fmt,
        reference=str(data.get("reference", "")),
        batches=int(data.get("batches", 0)),
        samples=int(data.get("samples", 0)),
        tolerance=Tolerance(atol=float(data["atol"]), rtol=float(data["rtol"]), rms=data.get("rms")),
        outputs=tuple(
            OutputCheck(
                name=str(o["name"]),
                max_abs=float(o["max_abs_err"]),
                max_rel=float(o["max_rel_err"]),
                passed=bool(o.get("passed", True)),
                rel_rms=float(o.get("rel_rms_err", 0.0)),
            )
            for o in data.get("outputs") or ()
        ),
        error=data.get("error"),
        device=str(data.get("device", "cpu")),
    )
