"""Responses checked against the data's expected outputs: what a load test refuses, and its figures.

The load generator compares every response with its step's expected outputs
(``tritonload/validation.py``) and reports, per window, the responses that matched
(``validation_matched``), the ``validation`` errors, each output's mismatches
(``mismatched/OUTPUT``) and its first one. A run's figures count every response of the run,
warm-up included: an answer that is wrong at any time fails the run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

from tritongen.client.validation_data import ExpectedOutputs
from tritongen.errors import ConfigError, ValidationError
from tritongen.io.loadgen_shared import MATCHED_COUNT, MISMATCHED_PREFIX, VALIDATION_ERROR
from tritongen.loadtest.windows import Window


class Checked(Protocol):
    """What :func:`validation_failure` reads of a run (``tritongen.loadtest.result.RunResult``)."""

    validation: dict[str, Any] | None
    errors_by_kind: dict[str, int]
    requests: int


Run = TypeVar("Run", bound=Checked)


def check_validation(model: str, shared_memory: str, streaming: bool) -> None:
    """Refuse a load whose responses cannot be checked: outputs in shared memory, or streamed.

    Raises:
        ConfigError: ``--shared-memory system`` or a decoupled model, with expected outputs.
    """
    if shared_memory != "none":
        raise ConfigError(
            "the input data has expected outputs, but with --shared-memory system the outputs land in "
            "shared memory, where responses are not checked",
            "use --shared-memory none to check the responses, or give data without validation_data",
        )
    if streaming:
        raise ConfigError(
            f"the input data has expected outputs, but '{model}' is decoupled (streaming): checking its "
            "responses is not supported",
            "give data without validation_data for a streaming model",
        )


def validation_figures(total: Window, expected: ExpectedOutputs) -> dict[str, Any]:
    """A run's ``validation``: ``validated``, ``matched``, ``mismatched`` and per output its count and first.

    ``total`` merges every window of the run; ``first`` is the earliest mismatch of the output:
    ``entry`` (where in the data file), ``element`` (row-major within the entry; -1 when the
    element counts differ), ``expected`` and ``received``.
    """
    matched = int(total.counts.get(MATCHED_COUNT, 0))
    mismatched = int(total.errors.get(VALIDATION_ERROR, 0))
    outputs: dict[str, Any] = {}
    for name in expected.outputs:
        first = total.mismatches.get(name)
        outputs[name] = {
            "mismatched": int(total.counts.get(MISMATCHED_PREFIX + name, 0)),
            "first": None
            if first is None
            else {
                "entry": _label(expected.labels, int(first["entry"])),
                "element": int(first["element"]),
                "expected": str(first["expected"]),
                "received": str(first["received"]),
            },
        }
    validated = matched + mismatched
    return {"validated": validated, "matched": matched, "mismatched": mismatched, "outputs": outputs}


def _label(labels: list[str], entry: int) -> str:
    return labels[entry] if 0 <= entry < len(labels) else f"entry {entry}"


def validation_lines(validation: dict[str, Any] | None) -> list[str]:
    """What a run's validation says: ``validated 12,408 responses: all match``, or the mismatches."""
    if not validation:
        return []
    validated, mismatched = int(validation["validated"]), int(validation["mismatched"])
    if not mismatched:
        return [f"validated {validated:,} responses: all match"]
    lines = [f"validated {validated:,} responses: {mismatched:,} did not match the expected outputs"]
    for name, figures in validation["outputs"].items():
        first = figures.get("first")
        if not figures["mismatched"] or first is None:
            continue
        where = f"element {first['element']}" if first["element"] >= 0 else "element count"
        lines.append(
            f"output '{name}': {figures['mismatched']:,} mismatched; first at {first['entry']}, {where}: "
            f"expected {first['expected']}, received {first['received']}"
        )
    return lines


def first_mismatch_text(validation: dict[str, Any] | None) -> str:
    """One cell: the first mismatch of the first output that had one (empty when all matched)."""
    lines = validation_lines(validation)
    return lines[1] if len(lines) > 1 else ""


def validation_failure(runs: Sequence[Run], level: Callable[[Run], str]) -> ValidationError | None:
    """The error of the first run some response of which differed from its expected outputs, if any.

    A run without ``validation`` figures (one model of a mix) counts its ``validation`` errors.
    """
    wrong = [
        r for r in runs if (r.validation or {}).get("mismatched") or r.errors_by_kind.get(VALIDATION_ERROR)
    ]
    if not wrong:
        return None
    run = wrong[0]
    figures = run.validation or {
        "mismatched": run.errors_by_kind[VALIDATION_ERROR],
        "validated": run.requests,
    }
    lines = validation_lines(run.validation)
    return ValidationError(
        f"{level(run)}: {figures['mismatched']:,} of {figures['validated']:,} responses did not "
        f"match the expected outputs ({lines[1] if len(lines) > 1 else 'see the JSON'})",
        "results were written; the model answers differently from validation_data (or loosen --atol/--rtol)",
    )
