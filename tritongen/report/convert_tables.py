"""The tables of ``tritongen convert``: verification against the source, accuracy against FP32."""

from __future__ import annotations

from tritongen.convert.accuracy import task_figure
from tritongen.convert.mixed_precision import MixedResult
from tritongen.convert.reduced import PrecisionReport
from tritongen.convert.result_json import CalibrationFacts
from tritongen.pipeline.document import ConvertOutcome
from tritongen.report.table_data import TableData


def verification_table(outcomes: list[ConvertOutcome]) -> TableData:
    """Each model directory of a conversion against the source."""
    rows: list[tuple[str, ...]] = []
    styles: list[str | None] = []
    for outcome in outcomes:
        check = outcome.verification
        outputs = check.outputs if check is not None else ()
        tolerance = check.tolerance.describe() if check is not None else ""
        style = {"built": None, "kept": "bad", "failed": "bad"}.get(outcome.status, "muted")
        if not outputs:
            rows.append((outcome.label, outcome.status, "–", "–", "–", "–", ""))
            styles.append(style)
        for i, output in enumerate(outputs):
            first = i == 0
            rows.append(
                (outcome.label if first else "", outcome.status if first else "", output.name,
                 f"{output.max_abs:.2e}", f"{output.max_rel:.2e}", f"{output.rel_rms:.2e}",
                 tolerance if first else "")
            )  # fmt: skip
            styles.append(style)
    return TableData(
        title="verification against the source",
        headers=("model", "status", "output", "max abs err", "max rel err", "rel RMS", "tolerance"),
        rows=rows,
        right=(False, False, False, True, True, True, False),
        styles=styles,
    )


ACCURACY_HEADERS = ("variant", "output", "task figure", "rel RMS", "max abs", "samples", "calibrated on",
                    "FP32 nodes")  # fmt: skip


def accuracy_table(entries: list[tuple[str, PrecisionReport]]) -> TableData:
    """Drift of reduced-precision variants from FP32: ``(label, precision report)`` each."""
    rows: list[tuple[str, ...]] = []
    notes: list[str] = []
    for label, report in entries:
        calibration = CalibrationFacts.from_json(report.calibration) if report.calibration else None
        kept = report.kept_fp32
        calibrated = "–"
        if calibration is not None:
            calibrated = f"{calibration.samples} ({report.calibration_method})"
            calibrated += ", random" if calibration.random else ""
        outputs = report.accuracy.outputs if report.accuracy is not None else ()
        if not outputs:
            rows.append((label, "–", "–", "–", "–", "–", calibrated, str(len(kept))))
        for i, output in enumerate(outputs):
            first = i == 0
            samples = str(report.accuracy.samples) if report.accuracy is not None and first else ""
            rows.append(
                (label if first else "", output.name, task_figure(output), f"{output.rel_rms_err:.2e}",
                 f"{output.max_abs_err:.2e}", samples, calibrated if first else "",
                 str(len(kept)) if first else "")
            )  # fmt: skip
        notes += _accuracy_notes(label, report, calibration)
    return TableData(
        title="accuracy against FP32",
        headers=ACCURACY_HEADERS,
        rows=rows,
        right=(False, False, False, True, True, True, False, True),
        notes=notes,
    )


def _accuracy_notes(label: str, report: PrecisionReport, calibration: CalibrationFacts | None) -> list[str]:
    """What a variant's accuracy was measured on, a calibration on noise, the nodes kept in FP32."""
    notes = []
    if report.accuracy_data:
        of = report.accuracy_of
        where = f" ({of})" if of and of != "the artifact" else ""
        notes.append(f"{label}: measured on {report.accuracy_data}{where}")
    if calibration is not None and calibration.random:
        notes.append(f"{label}: calibrated on random noise, not on real inputs; expect drift on real data")
    kept = report.kept_fp32
    if kept:
        shown = ", ".join(kept[:6]) + (f" and {len(kept) - 6} more" if len(kept) > 6 else "")
        notes.append(f"{label}: kept in FP32: {shown}")
    return notes


def mixed_precision_table(label: str, mixed: MixedResult) -> TableData:
    """The steps of the mixed-precision search: nodes kept in FP32, error and latency at each."""
    rows: list[tuple[str, ...]] = []
    styles: list[str | None] = []
    budget = float(mixed.max_error or 0.0)
    for index, step in enumerate(mixed.steps):
        rows.append(
            (
                str(index),
                str(step.added or "(all reduced)"),
                str(len(step.kept)),
                f"{float(step.error):.3g}",
                f"{float(step.latency_ms):.3f}",
            )
        )
        styles.append("good" if float(step.error) <= budget else None)
    return TableData(
        title=f"{label}: mixed precision, budget {mixed.metric} ≤ {budget:g} "
        f"({mixed.candidates} candidate nodes)",
        headers=("step", "node kept in FP32", "FP32 nodes", "error", "latency ms"),
        rows=rows,
        right=(True, False, True, True, True),
        styles=styles,
    )


def precision_tables(entries: list[tuple[str, PrecisionReport]]) -> list[TableData]:
    """The accuracy table of reduced variants, then each mixed-precision search: ``(label, report)`` each."""
    if not entries:
        return []
    tables = [accuracy_table(entries)]
    tables += [mixed_precision_table(label, r.mixed) for label, r in entries if r.mixed is not None]
    return tables
