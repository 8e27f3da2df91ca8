"""What compare knows of each engine before measuring it: how it was built, its precision, its error.

From the conversion compare ran, or, for models that exist, from each model's metadata
(``tritongen.json`` beside its ``config.pbtxt``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tritongen.compare.result import CompareReport, EngineResult, build_note
from tritongen.convert.result_json import read_precision_report
from tritongen.pipeline.request import BuildResult, FormatOutcome
from tritongen.triton.repository import METADATA_FILE


def apply_build(report: CompareReport, build: BuildResult) -> None:
    """Status, precision and verification error of each engine from the conversion."""
    for outcome in build.outcomes:
        try:
            engine = report.engine(outcome.name)
        except KeyError:
            continue  # a combination no format takes: already listed as unavailable
        engine.convert_s = round(outcome.seconds, 3)
        if outcome.model is not None:
            engine.build = build_note(outcome.format, outcome.model.engine)
        _apply_verification(engine, outcome)
        if outcome.precision is not None:
            engine.apply_precision(outcome.precision)
        if outcome.status == "built":
            engine.precision = outcome.variant.key
        elif outcome.status == "unavailable":
            engine.status, engine.reason = "unavailable", outcome.reason
        else:
            engine.status, engine.reason = "failed", outcome.reason


def _apply_verification(engine: EngineResult, outcome: FormatOutcome) -> None:
    check = outcome.verification
    if check is None or not check.outputs:
        return
    engine.max_abs_err = max(o.max_abs for o in check.outputs)
    engine.max_rel_err = max(o.max_rel for o in check.outputs)
    engine.tolerance = check.tolerance.to_json()


def _precision(facts: dict[str, Any]) -> str:
    precision = facts.get("precision")
    return str(precision) if precision else "fp32"


def apply_metadata(report: CompareReport, repo: Path) -> None:
    """Precision and verification error from each model's metadata in an existing repository."""
    for engine in report.engines:
        model_dir = repo / engine.model
        if not model_dir.is_dir():
            engine.status = "unavailable"
            engine.reason = f"no model directory {engine.model} in {repo}"
            continue
        try:
            meta = json.loads((model_dir / METADATA_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue  # built elsewhere: measured, but precision and error are unknown
        facts = meta.get("engine") if isinstance(meta.get("engine"), dict) else {}
        engine.precision = _precision(facts)
        engine.build = build_note(engine.format, facts)
        if isinstance(meta.get("precision"), dict):
            engine.apply_precision(read_precision_report(meta["precision"]))
        verification = meta.get("verification")
        if isinstance(verification, dict) and verification.get("outputs"):
            outputs = verification["outputs"]
            engine.max_abs_err = max(float(o["max_abs_err"]) for o in outputs)
            engine.max_rel_err = max(float(o["max_rel_err"]) for o in outputs)
            engine.tolerance = {"atol": float(verification["atol"]), "rtol": float(verification["rtol"])}
            if not verification.get("passed", True):
                engine.status = "failed"
                engine.reason = "its verification against the source failed when it was built"
