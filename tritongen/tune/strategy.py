"""Search strategies of ``tritongen tune`` behind one interface, chosen by name with :func:`make_strategy`.

A strategy derives its next proposal from the trials measured so far and nothing else,
so a resumed tune passes the history it already has and carries on where it stopped.
"""

from __future__ import annotations

import itertools
import math
import random
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from typing import ClassVar, Literal

from tritongen.errors import ConfigError
from tritongen.tune.objective import Measurement, objective
from tritongen.tune.space import Candidate, PreferredSizes, SearchSpace

StrategyName = Literal["grid", "adaptive"]
History = Sequence[tuple[Candidate, Measurement]]

ADAPTIVE_SHARE = 0.3
"""The share of the grid the adaptive strategy measures when no budget is given."""
ADAPTIVE_MIN_TRIALS = 6
"""The adaptive strategy's smallest default budget (or the whole grid, when smaller)."""
ADAPTIVE_NEAR_BEST = 0.9
"""Once the best point's neighbourhood is measured, the neighbours of points this close to it follow."""

Coords = tuple[int, int, int, int]
"""A candidate as indices into (sorted max batches, preferred sets, sorted delays, sorted instances)."""
_ORDINAL = (0, 2, 3)
_PREFERRED = 1


class SearchStrategy(ABC):
    """Proposes candidates one at a time from the trials measured so far."""

    name: ClassVar[str]

    def __init__(self, space: SearchSpace, max_trials: int) -> None:
        self.space = space
        self.max_trials = max_trials

    @abstractmethod
    def next_candidate(self, history: History) -> Candidate | None:
        """The next legal, not yet measured candidate, or ``None`` when the search is done."""


class GridSearch(SearchStrategy):
    """Every legal candidate in grid order, up to ``max_trials``."""

    name = "grid"

    def __init__(self, space: SearchSpace, max_trials: int | None = None) -> None:
        self._order = space.candidates()
        size = len(self._order)
        super().__init__(space, size if max_trials is None else min(max_trials, size))

    def next_candidate(self, history: History) -> Candidate | None:
        """The first candidate of the grid not measured yet, until the budget is spent."""
        if len(history) >= self.max_trials:
            return None
        tried = {c for c, _ in history}
        return next((c for c in self._order if c not in tried), None)


class AdaptiveSearch(SearchStrategy):
    """Greedy coordinate search: climb to a better neighbour, one knob (then two) at a time.

    It starts from the largest max batch, preferred sizes left to Triton, the middle
    queue delay and the fewest instances. Neighbours are the adjacent values of one
    ordered knob (max batch, delay, instances) or any other preferred set; the centre is
    always the best point measured, so the first neighbour that beats it becomes the new
    centre. A move that improved is tried again first; feasible points try larger values
    first, points over the limits smaller ones (cutting the max batch last). Once no
    one-knob neighbour of the centre is left, moves along two knobs at once follow,
    trades (one up, one down) first, in an order shuffled by ``seed``; then the
    neighbours of the other points within 90 % of the best (of every point while none is
    feasible). Configs at least as large (max batch and instances) as one that failed
    come last; failed trials score below everything. The search stops when nothing is
    left to try or ``max_trials`` trials have been measured.
    """

    name = "adaptive"

    def __init__(
        self,
        space: SearchSpace,
        max_trials: int | None = None,
        seed: int = 0,
        slo_p99_ms: float | None = None,
        max_memory_mb: float | None = None,
    ) -> None:
        legal = space.candidates()
        size = len(legal)
        if max_trials is None:
            max_trials = max(math.floor(ADAPTIVE_SHARE * size), min(size, ADAPTIVE_MIN_TRIALS))
        super().__init__(space, min(max_trials, size))
        self.seed = seed
        self.slo_p99_ms = slo_p99_ms
        self.max_memory_mb = max_memory_mb
        self._legal = set(legal)
        self._rank = {c: i for i, c in enumerate(legal)}
        self._batches = sorted(set(space.max_batch_sizes))
        self._sets: list[PreferredSizes] = list(dict.fromkeys(s or None for s in space.preferred_batch_sizes))
        self._delays = sorted(set(space.max_queue_delays_us))
        self._counts = sorted(set(space.instance_counts))
        self._start = self._nearest(self._ideal_start(), legal) if legal else None

    def next_candidate(self, history: History) -> Candidate | None:
        """The next neighbour of the best point measured so far, or ``None`` when done."""
        if len(history) >= self.max_trials or self._start is None:
            return None
        tried = {c for c, _ in history}
        scored: dict[Candidate, float] = {}
        records: list[Candidate] = []
        for c, m in history:
            if c not in self._legal:
                continue
            scored[c] = objective(m, self.slo_p99_ms, self.max_memory_mb)
            if not records or scored[c] > scored[records[-1]]:
                records.append(c)
        if not records:
            return self._start if self._start not in tried else None
        current = records[-1]
        previous = records[-2] if len(records) > 1 else None
        runners_up = self._runners_up(scored, current)
        order = itertools.chain(
            self._neighbours(current, previous, scored[current] >= 0.0),
            *(self._singles(self._coords(c), scored[c] >= 0.0) for c in runners_up),
            *(self._pairs(c, scored[c] >= 0.0) for c in runners_up),
        )
        failed = {(c.max_batch_size, c.instances) for c, score in scored.items() if score == -math.inf}
        risky: list[Candidate] = []
        for neighbour in order:
            if neighbour in tried:
                continue
            if any(neighbour.max_batch_size >= mb and neighbour.instances >= n for mb, n in failed):
                risky.append(neighbour)
                continue
            return neighbour
        return risky[0] if risky else None

    def _runners_up(self, scored: dict[Candidate, float], current: Candidate) -> list[Candidate]:
        """The other points worth a look around, best first: near the best, or all while none is feasible."""
        top = scored[current]
        floor = ADAPTIVE_NEAR_BEST * top if top > 0.0 else -math.inf
        near = [c for c, score in scored.items() if c != current and score >= floor and score > -math.inf]
        return sorted(near, key=lambda c: -scored[c])

    def _ideal_start(self) -> Coords:
        preferred = self._sets.index(None) if None in self._sets else 0
        return (len(self._batches) - 1, preferred, (len(self._delays) - 1) // 2, 0)

    def _nearest(self, target: Coords, legal: list[Candidate]) -> Candidate:
        def distance(c: Candidate) -> tuple[int, int]:
            at = self._coords(c)
            steps = sum(abs(at[k] - target[k]) for k in _ORDINAL) + (at[_PREFERRED] != target[_PREFERRED])
            return steps, self._rank[c]

        return min(legal, key=distance)

    def _coords(self, c: Candidate) -> Coords:
        return (
            self._batches.index(c.max_batch_size),
            self._sets.index(c.preferred_batch_sizes),
            self._delays.index(c.max_queue_delay_us),
            self._counts.index(c.instances),
        )

    def _candidate(self, at: Coords) -> Candidate | None:
        c = Candidate(self._batches[at[0]], self._sets[at[1]], self._delays[at[2]], self._counts[at[3]])
        return c if c in self._legal else None

    def _steps(self, at: Coords, knob: int, upward: bool) -> list[int]:
        """The indices one move along ``knob`` reaches from ``at``, the likelier improvement first."""
        if knob == _PREFERRED:
            return [i for i in range(len(self._sets)) if i != at[knob]]
        limit = len((self._batches, self._sets, self._delays, self._counts)[knob])
        order = (at[knob] + 1, at[knob] - 1) if upward else (at[knob] - 1, at[knob] + 1)
        return [i for i in order if 0 <= i < limit]

    def _singles(self, at: Coords, upward: bool) -> Iterator[Candidate]:
        singles: list[Coords] = []
        # Over the SLO, cutting the max batch costs most throughput: it is tried last.
        for knob in (2, 0, 3, _PREFERRED) if upward else (2, 3, _PREFERRED, 0):
            singles.extend(_replace(at, knob, i) for i in self._steps(at, knob, upward))
        return self._legal_at(singles)

    def _neighbours(
        self, current: Candidate, previous: Candidate | None, upward: bool
    ) -> Iterator[Candidate]:
        at = self._coords(current)
        if previous is not None:
            momentum = self._momentum(self._coords(previous), at)
            if momentum is not None:
                yield from self._legal_at([momentum])
        yield from self._singles(at, upward)
        yield from self._pairs(current, upward)

    def _pairs(self, current: Candidate, upward: bool) -> Iterator[Candidate]:
        at = self._coords(current)
        pairs: list[tuple[int, Coords]] = []
        for first in range(4):
            for second in range(first + 1, 4):
                for i in self._steps(at, first, upward):
                    for j in self._steps(at, second, upward):
                        moved = _replace(_replace(at, first, i), second, j)
                        pairs.append((self._pair_rank(at, first, i, second, j), moved))
        random.Random(f"{self.seed}:{current.key}").shuffle(pairs)
        pairs.sort(key=lambda p: p[0])
        return self._legal_at([p for _, p in pairs])

    @staticmethod
    def _pair_rank(at: Coords, first: int, i: int, second: int, j: int) -> int:
        """Trades (one ordered knob up, another down) first, then a preferred set with a step, then the rest.

        A point no single step improves usually sits on the SLO (or memory) boundary, where
        giving up some of one knob to gain on another is what can still pay.
        """
        if _PREFERRED in (first, second):
            return 1
        return 0 if (i - at[first]) * (j - at[second]) < 0 else 2

    def _momentum(self, before: Coords, after: Coords) -> Coords | None:
        """The last move again (a step per changed ordered knob), unless it changed the preferred set."""
        if before[_PREFERRED] != after[_PREFERRED]:
            return None
        again = list(after)
        for knob in _ORDINAL:
            delta = after[knob] - before[knob]
            again[knob] += (delta > 0) - (delta < 0)
        limits = (len(self._batches), len(self._sets), len(self._delays), len(self._counts))
        if tuple(again) == after or any(not 0 <= again[k] < limits[k] for k in range(4)):
            return None
        return (again[0], again[1], again[2], again[3])

    def _legal_at(self, points: list[Coords]) -> Iterator[Candidate]:
        for at in points:
            c = self._candidate(at)
            if c is not None:
                yield c


def _replace(at: Coords, knob: int, index: int) -> Coords:
    values = list(at)
    values[knob] = index
    return (values[0], values[1], values[2], values[3])


def make_strategy(
    name: str,
    space: SearchSpace,
    max_trials: int | None = None,
    seed: int = 0,
    *,
    slo_p99_ms: float | None = None,
    max_memory_mb: float | None = None,
) -> SearchStrategy:
    """Build the strategy called ``name`` (``grid`` or ``adaptive``) over ``space``.

    ``max_trials`` ``None`` means the whole grid for ``grid`` and 30 % of it (at least a
    few trials) for ``adaptive``; the SLO and memory cap shape the adaptive objective.

    Raises:
        ConfigError: an unknown name or a budget below one trial.
    """
    if max_trials is not None and max_trials < 1:
        raise ConfigError(f"--max-trials {max_trials} is below 1", "use 1 or more")
    if name == "grid":
        return GridSearch(space, max_trials)
    if name == "adaptive":
        return AdaptiveSearch(space, max_trials, seed, slo_p99_ms, max_memory_mb)
    raise ConfigError(f"unknown search strategy {name!r}", "use grid or adaptive")
