"""The rounds options of ``loadtest``, ``compare`` and ``tune``: how often each measurement is repeated.

``compare`` and tune's confirmation also take ``--rounds auto``: rounds until each pair is
decided, within caps and a margin of equivalence.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import typer

from tritongen.errors import ConfigError
from tritongen.intervals import DEFAULT_CONFIDENCE, DEFAULT_ROUNDS
from tritongen.stopping import (
    BUSY_REPEATS,
    DEFAULT_EQUIVALENCE,
    DEFAULT_MAX_MINUTES,
    DEFAULT_MAX_ROUNDS,
    StopRule,
    parse_margin,
    parse_rounds,
)

Rounds = Annotated[
    str | None,
    typer.Option(
        "--rounds",
        help="Repeat each measurement this many times, contenders interleaved; figures get a median, "
        "an interval and a CV (1 = one quick look, no interval). compare and tune's confirmation: "
        "auto (their default) adds rounds until every pair (engines; each finalist and the current "
        "config) differs or is equivalent within --equivalence.",
    ),
]
MaxRounds = Annotated[
    int,
    typer.Option("--max-rounds", help="--rounds auto: the most rounds before a pair is called undecided."),
]
MaxMinutes = Annotated[
    float | None,
    typer.Option(
        "--max-minutes",
        help="--rounds auto: start no round after this many minutes of rounds.",
    ),
]
Equivalence = Annotated[
    str,
    typer.Option(
        "--equivalence",
        help="--rounds auto: a pair whose interval lies within this of 1 is called equivalent, e.g. 5%.",
    ),
]
BusyRepeats = Annotated[
    int,
    typer.Option(
        "--busy-repeats",
        help="--rounds auto: a round with a run flagged busy (other processes' CPU) is measured again "
        "instead of counted, this many times at most (0: busy rounds count, flagged).",
    ),
]

Confidence = Annotated[
    float,
    typer.Option("--confidence", help="Confidence level of the intervals, between 0 and 1."),
]


@dataclass(frozen=True)
class RoundsFlags:
    """How often each measurement is repeated, and the confidence of the intervals."""

    rounds: Rounds = None
    confidence: Confidence = DEFAULT_CONFIDENCE

    def count(self, default: int) -> int:
        """``--rounds``, or ``default`` when not given (checked where the rounds are used).

        Raises:
            ConfigError: ``--rounds auto`` where a number is wanted, or neither.
        """
        given = parse_rounds(self.rounds)
        if given == "auto":
            raise ConfigError(
                "--rounds auto is compare's and tune's; this command takes a number of rounds",
                "e.g. --rounds 3",
            )
        return default if given is None else given


@dataclass(frozen=True)
class AutoRoundsFlags(RoundsFlags):
    """The rounds of compare and of tune's confirmation: a number, or ``auto`` with its caps and margin."""

    max_rounds: MaxRounds = DEFAULT_MAX_ROUNDS
    max_minutes: MaxMinutes = DEFAULT_MAX_MINUTES
    busy_repeats: BusyRepeats = BUSY_REPEATS
    equivalence: Equivalence = f"{DEFAULT_EQUIVALENCE:.0%}"

    def rule(self, default_auto: bool) -> tuple[int, StopRule | None]:
        """Rounds to run at most, and the stopping rule when they are ``auto`` (checked).

        Raises:
            ConfigError: a cap or margin that leaves nothing to decide.
        """
        given = parse_rounds(self.rounds)
        if given == "auto" or (given is None and default_auto):
            margin = parse_margin(self.equivalence)
            rule = StopRule(self.max_rounds, self.max_minutes, margin, busy_repeats=self.busy_repeats)
            rule.check()
            return rule.max_rounds, rule
        return (DEFAULT_ROUNDS if given is None else given), None
