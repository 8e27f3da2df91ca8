"""What a command printed, as the tests read it: the one error line of a refusal."""

from __future__ import annotations


def error_line(stderr: str) -> str:
    """The single non-blank line of ``stderr``, which must be an ``error: …`` line."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, f"expected one error line, got: {stderr!r}"
    assert lines[0].startswith("error: "), lines[0]
    return lines[0]
