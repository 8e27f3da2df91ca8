"""``--trace FILE``: recorded requests sent at their recorded times, each with its own shapes or lengths.

The trace's times are divided by ``--trace-speed`` (2: twice as fast). The measured span is the
trace's length (from its first request to one mean gap past its last), or ``--duration``: shorter
cuts the trace, longer plays it again from its start. The warm-up before the span plays the
trace's end, as if it had been looping, so the measured span starts on a server already at the
trace's load. Each request sends its own: a tensor request its shapes and batch size (one
prepared request per distinct set, :meth:`TraceReplay.tensor_variants`), a data entry of
``--input-data``, or a prompt of its own lengths (an LLM trace: one prepared request per entry).
"""

from __future__ import annotations

import math

import numpy as np

from tritongen.errors import ConfigError
from tritongen.loadtest.shapes.base import STEP_IN_TURN, LoadShape, Schedule, Stage
from tritongen.loadtest.traces.entries import Trace, TraceEntry, trace_error

MAX_SENDS = 5_000_000
"""A replay that asks more sends than this is refused (its schedule would not fit in memory)."""
THIN_WARMUP_EXPECTED = 4.0
THIN_WARMUP_SHARE = 0.25
"""A warm-up in which the trace averages at least 4 requests but that sends under a quarter of them
is noted as thin."""


class TraceReplay(LoadShape):
    """A trace's requests at their recorded times, scaled, cut or looped to the measured span."""

    option = "--trace"

    def __init__(self, trace: Trace, speed: float = 1.0, duration_s: float | None = None) -> None:
        if not (speed > 0 and math.isfinite(speed)):
            raise ConfigError(
                f"--trace-speed {speed:g} is not above 0", "e.g. --trace-speed 2 (twice as fast)"
            )
        self.trace = trace
        self.speed = speed
        entries = trace.entries
        gap = trace.span_s / (len(entries) - 1) if len(entries) > 1 else 1.0
        self.period_s = (trace.span_s + gap) / speed
        """One pass of the trace, in replay time: its span and one mean gap (the next pass starts there)."""
        whole = duration_s if duration_s is not None else math.floor(self.period_s * 1000) / 1000
        self._duration_s = round(whole, 3)
        if self._duration_s <= 0:
            raise ConfigError("--duration must be positive", "e.g. --duration 60s")
        self.times = np.asarray([entry.time_s for entry in entries], dtype=np.float64) / speed
        self.steps = np.asarray(self._steps(), dtype=np.int64)
        sends = len(entries) * math.ceil(self._duration_s / self.period_s)
        if sends > MAX_SENDS:
            raise ConfigError(
                f"--trace replays {sends:,} requests: more than one schedule holds ({MAX_SENDS:,})",
                "give a shorter --duration, or a lower --trace-speed",
            )

    @property
    def duration_s(self) -> float:
        """``--duration``, else one pass of the trace."""
        return self._duration_s

    @property
    def mean_rate(self) -> float:
        """The requests of the measured span, per second."""
        return max(1e-9, self.schedule(0.0, 0).measured_sends / self._duration_s)

    def stages(self) -> tuple[Stage, ...]:
        """None: the trace's own ups and downs show in ``--timeslice``."""
        return ()

    def describe(self) -> str:
        """``trace FILE (FORMAT): N requests over S s, at speed X; looped/cut``."""
        trace = self.trace
        text = f"trace {trace.path.name} ({trace.format}): {len(trace.entries)} requests"
        text += f" over {self.period_s:.3g} s"
        if self.speed != 1:
            text += f" at {self.speed:g}x"
        if self._duration_s > self.period_s + 1e-3:
            text += f", played {self._duration_s / self.period_s:.3g} times over {self._duration_s:g} s"
        elif self._duration_s < self.period_s - 1e-3:
            text += f", cut at {self._duration_s:g} s"
        return text

    def schedule(self, warmup_s: float, seed: int) -> Schedule:
        """The trace's passes over ``[-warmup_s, duration)``: the warm-up plays the trace's end."""
        del seed  # the times are the trace's own
        first = math.floor(-warmup_s / self.period_s)
        last = math.ceil(self._duration_s / self.period_s)
        times = np.concatenate([self.times + k * self.period_s for k in range(first, last)])
        steps = np.concatenate([self.steps for _ in range(first, last)])
        keep = (times >= -warmup_s) & (times < self._duration_s)
        return Schedule(warmup_s, times[keep], steps[keep])

    def notes(self, warmup_s: float = 0.0) -> tuple[str, ...]:
        """The trace's notes (requests to other models left out, no tensors in a Triton trace)...

        ...and a warm-up of ``warmup_s`` that holds far fewer of the trace's requests than the
        trace sends in that time on average (its end is quiet): it hardly warms the model.
        """
        expected = self.mean_rate * warmup_s
        if expected < THIN_WARMUP_EXPECTED:
            return self.trace.notes
        schedule = self.schedule(warmup_s, 0)
        warm = len(schedule.times_s) - schedule.measured_sends
        if warm >= expected * THIN_WARMUP_SHARE:
            return self.trace.notes
        thin = (
            f"the warm-up ({warmup_s:g} s of the trace's end) sends {warm} request(s) where the trace "
            f"averages {expected:.0f} in that time: a longer --warmup warms the model with its traffic "
            "(a model just loaded, or a tune's reloaded config, runs its first batches slower)"
        )
        return (*self.trace.notes, thin)

    def rows_per_request(self, rows: int, batched: bool) -> float:
        """The trace's mean batch size (a whole shape's first dim where it gives none), else ``rows``."""
        sizes = [_rows(entry, rows, batched) for entry in self.trace.entries]
        return sum(sizes) / len(sizes)

    def tensor_variants(self) -> list[TraceEntry]:
        """The first entry of each distinct (batch size, shapes), in the order their steps are written."""
        seen: dict[tuple[object, ...], TraceEntry] = {}
        for entry in self.trace.entries:
            key = entry.variant
            if key is not None and key not in seen:
                seen[key] = entry
        return list(seen.values())

    def _steps(self) -> list[int]:
        """Each entry's request: its prompt (LLM), its data entry, its shapes' variant, or in turn."""
        entries = self.trace.entries
        if self.trace.llm:
            return list(range(len(entries)))
        if any(entry.data is not None for entry in entries):
            if any(entry.data is None for entry in entries):
                line = next(entry.line for entry in entries if entry.data is None)
                raise trace_error(
                    self.trace.path,
                    line,
                    "no data entry, where others name one",
                    "give every line a data entry, or none",
                )
            return [int(entry.data or 0) for entry in entries]
        variants = {
            key: index for index, key in enumerate(dict.fromkeys(e.variant for e in entries if e.variant))
        }
        return [variants[entry.variant] if entry.variant else STEP_IN_TURN for entry in entries]


def _rows(entry: TraceEntry, rows: int, batched: bool) -> int:
    """An entry's batch size: given, else its whole shapes' first dim (on a model that batches), else rows."""
    if entry.batch_size is not None:
        return entry.batch_size
    firsts = {dims[0] for dims in (entry.shapes or {}).values() if dims}
    return firsts.pop() if batched and len(firsts) == 1 else rows
