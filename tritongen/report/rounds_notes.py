"""The notes of ``--rounds auto``: why the rounds stopped and each pair's verdict (compare and tune)."""

from __future__ import annotations

from tritongen.stopping import RepeatedRound, StoppingRecord


def stopping_notes(stopping: StoppingRecord | None, confidence: float) -> list[str]:
    """``--rounds auto``: why the rounds stopped, and each pair's verdict at the rule's level."""
    if stopping is None:
        return []
    notes = [
        f"--rounds auto: {stopping.rounds} round(s), {stopping.stopped}; pairs judged at "
        f"{stopping.confidence:.2%} (spent at that look: stopping early keeps {confidence:.0%})"
    ]
    notes += [f"{pair.pair}: {pair.text}" for pair in stopping.pairs]
    on = " and ".join(stopping.decided_on or ())
    notes += [
        f"{pair.pair}: {pair.text} (not a stopping figure: the rounds stop on {on})"
        for pair in stopping.other_pairs or ()
    ]
    notes += [_repeated_note(entry) for entry in stopping.busy_rounds_repeated]
    return notes


def _repeated_note(entry: RepeatedRound) -> str:
    """``round 2 measured again: a run of mlp_onnx was flagged busy (other processes used 1.20 cores)``."""
    cores = entry.other_cpu
    used = f" (other processes used up to {cores:.2f} cores)" if cores is not None else ""
    return (
        f"round {entry.round} measured again, not counted: a run of "
        f"{', '.join(entry.busy)} was flagged busy{used}"
    )
