"""The search space of ``tritongen tune``: candidate configs, their legality and the baseline.

A :class:`Candidate` is one config to measure with dynamic batching on. The reference
point every result is compared against is :class:`Current`: the config the model has
now, rendered unchanged. It is not part of the search (a strategy never proposes it), but
it is always a contender for the best config: a finalist replaces it only when it beats
it beyond the noise.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from tritongen.errors import ConfigError
from tritongen.triton.batching import BatchingOptions, preferred_sizes_refused
from tritongen.triton.model_config import ModelConfig

PreferredSizes = tuple[int, ...] | None
"""One set of preferred batch sizes; ``None`` lets Triton decide."""

_AUTO_WORDS = ("none", "auto")


@dataclass(frozen=True, order=True)
class Candidate:
    """One config to measure: dynamic batching on with these knobs.

    ``preferred_batch_sizes`` ``None`` (or an empty tuple, stored as ``None``) lets Triton
    pick the batch sizes. Candidates sort by max batch size, preferred sizes (auto first),
    queue delay and instance count.
    """

    _sort_key: tuple[int, tuple[int, ...], int, int] = field(init=False, repr=False)
    max_batch_size: int
    preferred_batch_sizes: tuple[int, ...] | None
    max_queue_delay_us: int
    instances: int

    def __post_init__(self) -> None:
        sizes = tuple(self.preferred_batch_sizes) if self.preferred_batch_sizes else None
        object.__setattr__(self, "preferred_batch_sizes", sizes)
        key = (self.max_batch_size, sizes or (), self.max_queue_delay_us, self.instances)
        object.__setattr__(self, "_sort_key", key)

    @property
    def key(self) -> str:
        """A short stable id, usable as a directory name, e.g. ``mb16-pb4.8-qd500-i2``."""
        return _knobs_key(
            self.max_batch_size, self.preferred_batch_sizes, self.max_queue_delay_us, self.instances
        )

    def to_json(self) -> dict[str, Any]:
        """The candidate as JSON data (preferred sizes a list, or null for auto)."""
        sizes = self.preferred_batch_sizes
        return {
            "max_batch_size": self.max_batch_size,
            "preferred_batch_sizes": None if sizes is None else list(sizes),
            "max_queue_delay_us": self.max_queue_delay_us,
            "instances": self.instances,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Candidate:
        """Read what :meth:`to_json` wrote.

        Raises:
            ConfigError: a key is missing or a value is not an integer (list).
        """
        try:
            sizes = data["preferred_batch_sizes"]
            return cls(
                max_batch_size=_int(data["max_batch_size"]),
                preferred_batch_sizes=None if sizes is None else tuple(_int(s) for s in sizes),
                max_queue_delay_us=_int(data["max_queue_delay_us"]),
                instances=_int(data["instances"]),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise ConfigError(f"not a tune candidate: {data!r}", "write it with Candidate.to_json") from e

    def to_options(self) -> BatchingOptions:
        """The batching options that render this candidate (auto preferred sizes clear any set ones)."""
        if self.max_batch_size == 0:
            return BatchingOptions(max_batch_size=0, dynamic_batching=False, instances=self.instances)
        return BatchingOptions(
            max_batch_size=self.max_batch_size,
            dynamic_batching=True,
            preferred_batch_sizes=self.preferred_batch_sizes or (),
            max_queue_delay_us=self.max_queue_delay_us,
            instances=self.instances,
        )


@dataclass(frozen=True)
class Current:
    """The baseline: the config the model has now (its ``config.pbtxt``), rendered unchanged.

    It is measured first, confirmed against the finalists, and stays unless a finalist
    beats it significantly. Its fields only describe it (for the key and the JSON); a
    runner renders the model's own config for it (:meth:`to_options` changes nothing).
    """

    max_batch_size: int
    dynamic_batching: bool
    preferred_batch_sizes: tuple[int, ...] | None = None
    max_queue_delay_us: int = 0
    instances: int = 1

    @classmethod
    def of(cls, config: ModelConfig) -> Current:
        """Describe ``config``'s batching and instances."""
        batching = config.dynamic_batching
        return cls(
            max_batch_size=config.max_batch_size,
            dynamic_batching=batching is not None,
            preferred_batch_sizes=(tuple(batching.preferred_batch_size) or None) if batching else None,
            max_queue_delay_us=batching.max_queue_delay_microseconds if batching else 0,
            instances=sum(g.count for g in config.instance_group) or 1,
        )

    @property
    def key(self) -> str:
        """A short stable id: ``current-mb16-nodb-i1`` (dynamic batching off), ``current-mb16-pb8-qd0-i1``."""
        if not self.dynamic_batching:
            return f"current-mb{self.max_batch_size}-nodb-i{self.instances}"
        knobs = _knobs_key(
            self.max_batch_size, self.preferred_batch_sizes, self.max_queue_delay_us, self.instances
        )
        return f"current-{knobs}"

    def to_json(self) -> dict[str, Any]:
        """The current config's knobs as JSON data, marked ``"current": true``."""
        sizes = self.preferred_batch_sizes
        return {
            "current": True,
            "max_batch_size": self.max_batch_size,
            "dynamic_batching": self.dynamic_batching,
            "preferred_batch_sizes": None if sizes is None else list(sizes),
            "max_queue_delay_us": self.max_queue_delay_us,
            "instances": self.instances,
        }

    def to_options(self) -> BatchingOptions:
        """No change: the current config renders as it is."""
        return BatchingOptions()


def parse_preferred_sets(text: str) -> tuple[PreferredSizes, ...]:
    """Parse ``"4,8;8,16;none"``: sets split by ``;``, sizes by ``,``, ``none``/``auto`` for Triton's choice.

    Raises:
        ConfigError: an empty set, a size that is not a positive integer, or a repeated set.
    """
    sets: list[PreferredSizes] = []
    for part in text.split(";"):
        item = part.strip()
        if not item:
            raise ConfigError(
                f"preferred batch sizes {text!r} has an empty set", "write sets like 4,8;8,16;none"
            )
        if item.lower() in _AUTO_WORDS:
            parsed: PreferredSizes = None
        else:
            try:
                parsed = tuple(int(size) for size in item.split(","))
            except ValueError as e:
                raise ConfigError(
                    f"preferred batch sizes {item!r} is not a list of integers",
                    "write sets like 4,8;8,16;none",
                ) from e
            if any(size < 1 for size in parsed):
                raise ConfigError(f"preferred batch sizes {item!r} has a size below 1", "use positive sizes")
        if parsed in sets:
            raise ConfigError(f"preferred batch sizes {item!r} is given twice", "list each set once")
        sets.append(parsed)
    return tuple(sets)


@dataclass(frozen=True)
class SearchSpace:
    """The values to try for each knob; the grid is their product, less the illegal combinations."""

    max_batch_sizes: tuple[int, ...]
    """Empty until :meth:`around` fills in the model's own."""
    preferred_batch_sizes: tuple[PreferredSizes, ...]
    max_queue_delays_us: tuple[int, ...]
    instance_counts: tuple[int, ...]
    preferred_refused: str | None = None
    """Why the model's scheduler takes no preferred batch sizes (a direct sequence batcher), if so:
    candidates with preferred sizes are then skipped with this reason."""

    def around(self, base: ModelConfig) -> SearchSpace:
        """The space around ``base``, the model's config: its max batch size unless others are given; checked.

        Raises:
            ConfigError: an empty or illegal space.
        """
        space = replace(
            self,
            max_batch_sizes=self.max_batch_sizes or (base.max_batch_size,),
            preferred_refused=preferred_sizes_refused(base),
        )
        space.check()
        return space

    def check(self) -> None:
        """Reject values that are wrong whatever they are combined with.

        Raises:
            ConfigError: an empty or repeating list, a negative value, a preferred set that
                is not strictly increasing, or a space with no legal candidate at all.
        """
        lists: list[tuple[str, tuple[Any, ...]]] = [
            ("--max-batch-size", self.max_batch_sizes),
            ("--preferred-batch-sizes", tuple(s or None for s in self.preferred_batch_sizes)),
            ("--max-queue-delay-us", self.max_queue_delays_us),
            ("--instances", self.instance_counts),
        ]
        for option, values in lists:
            if not values:
                raise ConfigError(f"{option} has no values", f"give at least one value to {option}")
            if len(set(values)) != len(values):
                raise ConfigError(f"{option} repeats a value", "list each value once")
        _at_least(self.max_batch_sizes, 0, "--max-batch-size")
        _at_least(self.max_queue_delays_us, 0, "--max-queue-delay-us")
        _at_least(self.instance_counts, 1, "--instances")
        for sizes in self.preferred_batch_sizes:
            if not sizes:
                continue
            _at_least(sizes, 1, "--preferred-batch-sizes")
            if any(a >= b for a, b in itertools.pairwise(sizes)):
                raise ConfigError(
                    f"preferred batch sizes {_csv(sizes)} are not strictly increasing",
                    f"write them in increasing order: {_csv(tuple(sorted(set(sizes))))}",
                )
        if not self.candidates():
            _, reason = self.skipped()[0]
            hint = (
                "add none to --preferred-batch-sizes"
                if reason == self.preferred_refused
                else "widen --max-batch-size"
            )
            raise ConfigError(f"no legal combination to tune: {reason}", hint)

    def _grid(self) -> list[Candidate]:
        return [
            Candidate(mb, sizes, delay, count)
            for mb, sizes, delay, count in itertools.product(
                self.max_batch_sizes,
                self.preferred_batch_sizes,
                self.max_queue_delays_us,
                self.instance_counts,
            )
        ]

    def candidates(self) -> list[Candidate]:
        """The legal candidates in grid order (max batch, preferred set, delay, instances; as listed)."""
        return [c for c in self._grid() if self.legal(c) is None]

    def skipped(self) -> list[tuple[Candidate, str]]:
        """The illegal combinations of the grid, each with why it is never sent to a server."""
        out: list[tuple[Candidate, str]] = []
        for c in self._grid():
            reason = self.legal(c)
            if reason is not None:
                out.append((c, reason))
        return out

    @property
    def size(self) -> int:
        """How many legal candidates the grid holds."""
        return len(self.candidates())

    def legal(self, candidate: Candidate) -> str | None:
        """Why ``candidate`` cannot be rendered, or ``None`` when it can."""
        mb, sizes = candidate.max_batch_size, candidate.preferred_batch_sizes
        if mb < 0:
            return f"max_batch_size {mb} is negative"
        if candidate.max_queue_delay_us < 0:
            return f"max_queue_delay_us {candidate.max_queue_delay_us} is negative"
        if candidate.instances < 1:
            return f"instances {candidate.instances} is below 1"
        if mb == 0 and sizes is not None:
            return "preferred batch sizes need max_batch_size above 0"
        if mb == 0 and candidate.max_queue_delay_us > 0:
            return "a queue delay needs max_batch_size above 0"
        if sizes is None:
            return None
        if self.preferred_refused is not None:
            return self.preferred_refused
        if any(s < 1 for s in sizes):
            return f"preferred batch sizes {_csv(sizes)} have a size below 1"
        if len(set(sizes)) != len(sizes):
            return f"preferred batch sizes {_csv(sizes)} repeat a size"
        if any(a > b for a, b in itertools.pairwise(sizes)):
            return f"preferred batch sizes {_csv(sizes)} are not increasing"
        too_big = [s for s in sizes if s > mb]
        if too_big:
            return f"preferred batch sizes {_csv(tuple(too_big))} exceed max_batch_size {mb}"
        return None


def _knobs_key(max_batch_size: int, sizes: PreferredSizes, max_queue_delay_us: int, instances: int) -> str:
    """The knobs as a short stable id, ``mb16-pb4.8-qd500-i2`` (``pbauto``: Triton picks the sizes)."""
    preferred = "auto" if sizes is None else ".".join(str(s) for s in sizes)
    return f"mb{max_batch_size}-pb{preferred}-qd{max_queue_delay_us}-i{instances}"


def _int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{value!r} is not an integer")
    return value


def _at_least(values: tuple[int, ...], low: int, option: str) -> None:
    bad = [v for v in values if v < low]
    if bad:
        raise ConfigError(f"{option} {_csv(tuple(bad))} is below {low}", f"use {low} or more")


def _csv(values: tuple[int, ...]) -> str:
    return ",".join(str(v) for v in values)
