"""The notes of ``--rounds auto``: why the rounds stopped and each pair's verdict (compare and tune)."""

from __future__ import annotations

from typing import Any

from tritongen.intervals import DEFAULT_CONFIDENCE


def stopping_notes(stopping: Any, confidence: float) -> list[str]:
    """``--rounds auto``: why the rounds stopped, and each pair's verdict at the rule's level."""
    if not isinstance(stopping, dict) or "pairs" not in stopping:
        return []
    level = float(stopping.get("confidence") or DEFAULT_CONFIDENCE)
    notes = [
        f"--rounds auto: {stopping.get('rounds')} round(s), {stopping.get('stopped')}; "
        f"pairs judged at {level:.2%} (spent at that look: stopping early keeps {confidence:.0%})"
    ]
    notes += [f"{pair['pair']}: {pair['text']}" for pair in stopping["pairs"]]
    on = " and ".join(stopping.get("decided_on") or [])
    notes += [
        f"{pair['pair']}: {pair['text']} (not a stopping figure: the rounds stop on {on})"
        for pair in stopping.get("other_pairs") or []
    ]
    notes += [_repeated_note(entry) for entry in stopping.get("busy_rounds_repeated") or []]
    return notes


def _repeated_note(entry: dict[str, Any]) -> str:
    """``round 2 measured again: a run of mlp_onnx was flagged busy (other processes used 1.20 cores)``."""
    cores = entry.get("other_cpu")
    used = f" (other processes used up to {cores:.2f} cores)" if cores is not None else ""
    return (
        f"round {entry.get('round')} measured again, not counted: a run of "
        f"{', '.join(entry.get('busy') or [])} was flagged busy{used}"
    )
