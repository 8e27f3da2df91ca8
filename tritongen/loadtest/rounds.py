"""Contenders measured in interleaved rounds on one server, each round starting one contender on.

Every figure that decides something is a sample of rounds, and contenders that are
compared are measured round-robin, so slow drift of the machine (another process, heat,
the page cache) hits every contender alike and ratios can be taken per round (paired;
see :mod:`tritongen.intervals`). A contender is one load level of one model; ``prepare``
runs before each of its measurements (tune reloads the model with the contender's config
there).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from tritongen.errors import ServerError
from tritongen.loadtest.load_processes import load_processes
from tritongen.loadtest.result import RunResult
from tritongen.loadtest.runner import ProgressCallback, run_load_test
from tritongen.loadtest.spec import LoadSpec


@dataclass(frozen=True)
class Contender:
    """One thing to measure each round: a one-level load spec and what to do before it."""

    name: str
    spec: LoadSpec
    prepare: Callable[[], None] | None = None


@dataclass
class Rounds:
    """The runs of every contender, in round order; ``status`` as for a load test."""

    runs: dict[str, list[RunResult]] = field(default_factory=dict)
    status: str = "ok"
    """``ok``, ``aborted`` (the server went away) or ``interrupted`` (Ctrl-C)."""
    reason: str | None = None
    completed: int = 0
    """Rounds in which every contender still measured (see ``keep``) was measured."""
    stopped_by: str | None = None
    """Why the rounds ended before the count asked for: ``decided`` or ``max-minutes``."""
    repeated: list[dict[str, Any]] = field(default_factory=list)
    """Rounds measured again because a run was flagged busy: ``round``, the ``busy`` contenders
    and the most cores other processes used (``other_cpu``); their runs are not kept."""

    def figures(self, name: str, figure: Callable[[RunResult], float | None]) -> list[float | None]:
        """One figure of ``name``'s runs, round by round (``None`` where a run has none)."""
        return [figure(run) if run.status == "ok" else None for run in self.runs.get(name, [])]


def rotated(contenders: Sequence[Contender], shift: int) -> list[Contender]:
    """``contenders`` in the order of round ``shift + 1``: started ``shift`` places further on."""
    if not contenders:
        return []
    start = shift % len(contenders)
    return [*contenders[start:], *contenders[:start]]


RoundStarted = Callable[[int, int, str], None]
"""Called with (round number from 1, rounds, contender name) before each measurement."""


def measure_rounds(
    contenders: Sequence[Contender],
    rounds: int,
    progress: ProgressCallback | None = None,
    stop: threading.Event | None = None,
    on_start: RoundStarted | None = None,
    on_round: Callable[[Rounds], None] | None = None,
    until: Callable[[Rounds], bool] | None = None,
    max_s: float | None = None,
    busy_repeats: int = 0,
    keep: Callable[[Rounds], Collection[str]] | None = None,
) -> Rounds:
    """Measure every contender once per round, ``rounds`` times, the order rotating (A B C, B C A, …).

    Each contender takes each place in turn, so an effect of the place in a round (the first
    run of a round finding a cooler machine, what one contender leaves behind for the next)
    falls on every contender alike and cancels out of the paired ratios. A stop, or a server
    that goes away (during a run or between two), ends the rounds with what was measured.
    ``until`` is asked after each whole round whether the answer is known (``--rounds auto``),
    and no round starts once ``max_s`` seconds have passed. A round with a run flagged busy
    (other processes used the CPU) is measured again instead of counted, ``busy_repeats``
    times at most in all; ``Rounds.repeated`` says which. ``keep``, asked after each whole round,
    names the contenders the next rounds still measure (a contender whose question is answered
    is dropped; its runs so far stand, paired with the others' by round).

    Raises:
        TritongenError: a contender's model or settings are unusable.
    """
    with load_processes():  # one set of Locust processes for every run of the rounds
        told = (progress, stop, on_start)
        asked = _Asked(on_round, until, keep)
        return _measure_rounds(contenders, rounds, told, asked, max_s, busy_repeats)


@dataclass(frozen=True)
class _Asked:
    """What :func:`measure_rounds` asks after each whole round."""

    on_round: Callable[[Rounds], None] | None
    until: Callable[[Rounds], bool] | None
    keep: Callable[[Rounds], Collection[str]] | None


def _measure_rounds(
    contenders: Sequence[Contender],
    rounds: int,
    told: _Told,
    asked: _Asked,
    max_s: float | None,
    busy_repeats: int,
) -> Rounds:
    """The rounds of :func:`measure_rounds`, in the Locust processes it holds."""
    result = Rounds(runs={c.name: [] for c in contenders})
    started = time.monotonic()
    number = 1
    while number <= rounds:
        if number > 1 and max_s is not None and time.monotonic() - started >= max_s:
            result.stopped_by = "max-minutes"
            return result
        measured = _one_round(contenders, number, rounds, result, told)
        if measured is None:
            return result
        busy = {name: runs for name, runs in measured.items() if any(run.busy for run in runs)}
        if busy and len(result.repeated) < busy_repeats:
            result.repeated.append(_busy_record(number, busy))
            continue
        for name, runs in measured.items():
            result.runs[name].extend(runs)
        result.completed = number
        if asked.on_round is not None:
            asked.on_round(result)
        if asked.until is not None and number < rounds and asked.until(result):
            result.stopped_by = "decided"
            return result
        if asked.keep is not None:
            kept = asked.keep(result)
            contenders = [c for c in contenders if c.name in kept]
        number += 1
    return result


_Told = tuple[ProgressCallback | None, threading.Event | None, RoundStarted | None]


def _one_round(
    contenders: Sequence[Contender], number: int, rounds: int, result: Rounds, told: _Told
) -> dict[str, list[RunResult]] | None:
    """Round ``number``'s runs by contender; None when it ended the rounds (its runs then in ``result``)."""
    progress, stop, on_start = told
    measured: dict[str, list[RunResult]] = {}
    for contender in rotated(contenders, number - 1):
        if stop is not None and stop.is_set():
            result.status, result.reason = "interrupted", "interrupted by the user"
            _keep(result, measured)
            return None
        if on_start is not None:
            on_start(number, rounds, contender.name)
        try:
            if contender.prepare is not None:
                contender.prepare()
            report = run_load_test(replace(contender.spec, rounds=1), progress=progress, stop=stop)
        except ServerError as e:  # gone between two runs: the rounds so far stand
            result.status, result.reason = "aborted", e.one_line()
            _keep(result, measured)
            return None
        for run in report.runs:
            run.round = number
        measured[contender.name] = report.runs
        if report.status != "ok":  # the failed run is kept: it says what happened
            result.status = report.status
            result.reason = next((r.reason for r in report.runs if r.reason), None)
            _keep(result, measured)
            return None
    return measured


def _keep(result: Rounds, measured: dict[str, list[RunResult]]) -> None:
    """A round that ended the rounds: what it measured stands in ``result``."""
    for name, runs in measured.items():
        result.runs[name].extend(runs)


def _busy_record(number: int, busy: dict[str, list[RunResult]]) -> dict[str, Any]:
    """What ``Rounds.repeated`` keeps of a round measured again: which contenders were busy, how busy."""
    cores = [run.other_cpu for runs in busy.values() for run in runs if run.other_cpu is not None]
    return {"round": number, "busy": sorted(busy), "other_cpu": max(cores) if cores else None}
