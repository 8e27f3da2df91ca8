"""Runs whose requests all fail: named at once with the server's first message, not measured for minutes.

A level none of whose requests has succeeded, once its warm-up is over, has nothing to
measure: every request the model gets fails (a model that raises, inputs it refuses). A
request that timed out has waited the whole ``--request-timeout`` already: a model that never
answers is named as soon as its first requests time out. The load generator sends the first
message of each error kind (:class:`~.windows.Window` ``messages``); the reason quotes it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from tritongen.loadtest.windows import Window

TIMEOUT_KINDS = ("timeout", "grpc_deadline_exceeded")
"""Error kinds of a request without its (final) response within the request timeout."""


def first_messages(windows: Mapping[int, Window]) -> dict[str, str]:
    """The first message of each error kind over ``windows``, the earliest window's first."""
    found: dict[str, str] = {}
    for index in sorted(windows):
        for kind, text in windows[index].messages.items():
            found.setdefault(kind, text)
    return found


@dataclass(frozen=True)
class Failing:
    """The requests of a run so far when none has succeeded: the failures by kind, their first messages."""

    errors: dict[str, int]
    messages: dict[str, str]

    @classmethod
    def of(cls, windows: Mapping[int, Window]) -> Failing | None:
        """The failures over ``windows`` when some request failed and none succeeded, else None."""
        errors: dict[str, int] = {}
        for window in windows.values():
            if window.ok:
                return None
            for kind, count in window.errors.items():
                errors[kind] = errors.get(kind, 0) + count
        return cls(errors, first_messages(windows)) if errors else None

    @property
    def count(self) -> int:
        """Failed requests."""
        return sum(self.errors.values())

    @property
    def timed_out(self) -> int:
        """Requests that had no response within the request timeout."""
        return sum(n for kind, n in self.errors.items() if kind in TIMEOUT_KINDS)

    def main_kind(self) -> str:
        """The kind most requests failed with (the first by name among equals)."""
        return min(self.errors, key=lambda kind: (-self.errors[kind], kind))

    def text(self) -> str:
        """``every request failed (12 of 12; http_500: 12): <the first message of the main kind>``."""
        kind = self.main_kind()
        kinds = ", ".join(f"{k}: {n}" for k, n in sorted(self.errors.items()))
        message = self.messages.get(kind)
        said = f": {message}" if message and message != kind else ""
        return f"every request failed ({self.count} of {self.count}; {kinds}){said}"

    def hung_text(self, model: str, timeout_s: float) -> str:
        """A model that answered nothing within the timeout, while the server and the model are up."""
        return (
            f"model '{model}' did not answer within --request-timeout {timeout_s:g} s: "
            f"{self.timed_out} request(s) timed out and none succeeded, while the server is live "
            "and the model ready (the model is hung or slower than the timeout)"
        )
