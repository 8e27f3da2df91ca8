"""The tables of ``tritongen convert``: verification against the source, accuracy against FP32."""

from __future__ import annotations

from typing import Any

from tritongen.convert.accuracy import task_figure
from tritongen.report.table_data import TableData


def verification_table(outcomes: list[dict[str, Any]]) -> TableData:
    """Each model directory of a ``tritongen.convert/1`` document against the source."""
    rows: list[tuple[str, ...]] = []
    styles: list[str | None] = []
    for outcome in outcomes:
        check = outcome.get("verification") or {}
        outputs = check.get("outputs") or []
        tolerance = (
            f"rel RMS ≤ {check['rms']:g}"
            if check.get("rms") is not None
            else f"{check.get('atol', 0):g} + {check.get('rtol', 0):g}·|ref|"
            if check
            else ""
        )
        style = {"built": None, "kept": "bad", "failed": "bad"}.get(outcome["status"], "muted")
        if not outputs:
            rows.append((str(outcome["label"]), str(outcome["status"]), "–", "–", "–", "–", ""))
            styles.append(style)
        for i, output in enumerate(outputs):
            rows.append(
                (
                    str(outcome["label"]) if i == 0 else "",
                    str(outcome["status"]) if i == 0 else "",
                    str(output["name"]),
                    f"{output['max_abs_err']:.2e}",
                    f"{output['max_rel_err']:.2e}",
                    f"{output.get('rel_rms_err', 0.0):.2e}",
                    tolerance if i == 0 else "",
                )
            )
            styles.append(style)
    return TableData(
        title="verification against the source",
        headers=("model", "status", "output", "max abs err", "max rel err", "rel RMS", "tolerance"),
        rows=rows,
        right=(False, False, False, True, True, True, False),
        styles=styles,
    )


def accuracy_table(entries: list[tuple[str, dict[str, Any]]]) -> TableData:
    """Drift of reduced-precision variants from FP32: ``(label, precision report JSON)`` each."""
    rows: list[tuple[str, ...]] = []
    notes: list[str] = []
    for label, report in entries:
        accuracy = report.get("accuracy") or {}
        calibration = report.get("calibration") or {}
        kept = report.get("kept_fp32") or []
        calibrated = (
            f"{calibration.get('samples')} ({report.get('calibration_method')})"
            + (", random" if calibration.get("random") else "")
            if calibration
            else "–"
        )
        outputs = accuracy.get("outputs") or []
        if not outputs:
            rows.append((label, "–", "–", "–", "–", "–", calibrated, str(len(kept))))
        for i, output in enumerate(outputs):
            rows.append(
                (
                    label if i == 0 else "",
                    str(output["name"]),
                    task_figure(output),
                    f"{output['rel_rms_err']:.2e}",
                    f"{output['max_abs_err']:.2e}",
                    str(accuracy.get("samples", "–")) if i == 0 else "",
                    calibrated if i == 0 else "",
                    str(len(kept)) if i == 0 else "",
                )
            )
        if report.get("accuracy_data"):
            of = report.get("accuracy_of")
            where = f" ({of})" if of and of != "the artifact" else ""
            notes.append(f"{label}: measured on {report['accuracy_data']}{where}")
        if calibration.get("random"):
            notes.append(
                f"{label}: calibrated on random noise, not on real inputs; expect drift on real data"
            )
        if kept:
            shown = ", ".join(kept[:6]) + (f" and {len(kept) - 6} more" if len(kept) > 6 else "")
            notes.append(f"{label}: kept in FP32: {shown}")
    return TableData(
        title="accuracy against FP32",
        headers=(
            "variant",
            "output",
            "task figure",
            "rel RMS",
            "max abs",
            "samples",
            "calibrated on",
            "FP32 nodes",
        ),
        rows=rows,
        right=(False, False, False, True, True, True, False, True),
        notes=notes,
    )


def mixed_precision_table(label: str, mixed: dict[str, Any]) -> TableData:
    """The steps of the mixed-precision search: nodes kept in FP32, error and latency at each."""
    rows: list[tuple[str, ...]] = []
    styles: list[str | None] = []
    budget = float(mixed.get("max_error") or 0.0)
    for index, step in enumerate(mixed.get("steps") or []):
        rows.append(
            (
                str(index),
                str(step.get("added") or "(all reduced)"),
                str(len(step.get("kept") or [])),
                f"{float(step['error']):.3g}",
                f"{float(step['latency_ms']):.3f}",
            )
        )
        styles.append("good" if float(step["error"]) <= budget else None)
    return TableData(
        title=f"{label}: mixed precision, budget {mixed.get('metric')} ≤ {budget:g} "
        f"({mixed.get('candidates')} candidate nodes)",
        headers=("step", "node kept in FP32", "FP32 nodes", "error", "latency ms"),
        rows=rows,
        right=(True, False, True, True, True),
        styles=styles,
    )


def precision_tables(entries: list[tuple[str, dict[str, Any]]]) -> list[TableData]:
    """The accuracy table of reduced variants, then each mixed-precision search: ``(label, report)`` each."""
    if not entries:
        return []
    tables = [accuracy_table(entries)]
    for label, report in entries:
        mixed = report.get("auto_mixed_precision")
        if isinstance(mixed, dict):
            tables.append(mixed_precision_table(label, mixed))
    return tables
