"""One level of a load test: its Locust runs, followed by one loop until a hook says it is done.

A level runs one Locust per model it loads (:class:`~.model_run.ModelRun`): one for a plain
load test, one per model of a mix or of a background load, all on one window grid. The level
is followed by :meth:`LevelRun.follow`, the one polling loop of every load: at each poll every
run is checked (Locust, the server, the model, the workers, the start of its measurement),
then the hooks are asked, :class:`FollowHooks`:

- ``stop``: an event that ends the loop (Ctrl-C, a background load's end): ``interrupted``;
- ``rules``: asked of each run at each poll; a reason ends the level ``aborted``;
- ``measure``: asked at each poll whether the measurement is done (``ok``). :class:`Measurement`
  takes every run's complete windows over one span, judges the union's stability, reports
  progress and reads the server's counters at the span's edges. Without it the loop follows
  the runs until stopped or aborted (a background load).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tritongen.loadtest.model_run import Launch, ModelRun, judge_stability
from tritongen.loadtest.progress import Progress, ProgressCallback
from tritongen.loadtest.server_counters import ServerCounters
from tritongen.loadtest.spec import LoadSpec
from tritongen.loadtest.windows import Window, merge

POLL_S = 0.05

PartRule = Callable[[ModelRun, float], str | None]
"""A rule asked of each run at each poll (with the time): why the level must stop, or None."""
Outcome = tuple[str, str | None]
"""How a level ended: ``ok``, ``aborted`` or ``interrupted``, and why (None when ``ok``)."""


@dataclass(frozen=True)
class FollowHooks:
    """What following a level is told: when to stop, what to ask of each run, when it is done."""

    stop: threading.Event | None = None
    """Set: the loop ends ``interrupted``."""
    poll_s: float = POLL_S
    rules: tuple[PartRule, ...] = ()
    measure: Callable[[float], bool] | None = None
    """Asked at each poll (with the time) whether the measurement is done (None: never)."""


class LevelRun:
    """The Locust runs of one level, followed together, on one window grid."""

    def __init__(self, parts: Sequence[ModelRun], label: str, name_parts: bool = False) -> None:
        self.parts = list(parts)
        self.label = label
        self.name_parts = name_parts
        """Whether a reason to stop names its model (several models under load)."""
        self.t0 = 0.0

    @property
    def start(self) -> int | None:
        """The first measured window: the latest of the runs' (None until every run has one)."""
        starts = [part.watch.measure_start for part in self.parts]
        return None if any(s is None for s in starts) else max(s for s in starts if s is not None)

    def union(self) -> list[Window]:
        """The runs' measured windows added up, index by index (the spans have one length)."""
        spans = [part.watch.measured for part in self.parts]
        if len(spans) == 1:
            return spans[0]
        length = min((len(span) for span in spans), default=0)
        return [merge([span[i] for span in spans]) for i in range(length)]

    def launch(self, launch: Launch, t0: float | None = None) -> None:
        """Start every run's Locust on one grid (``t0``: now); what started is stopped if one fails.

        Raises:
            ServerError: a Locust could not be started, or did not take its run.
        """
        try:
            for part in self.parts:
                part.start(time.time() if t0 is None else t0, launch)
        except BaseException:
            self.stop("aborted")
            raise
        self.t0 = self.parts[0].watch.t0

    def execute(self, launch: Launch, hooks: FollowHooks) -> Outcome:
        """Start, follow until done, stopped or aborted, stop; the measured windows then settled.

        Raises:
            ServerError: a Locust could not be started, or did not take its run.
        """
        self.launch(launch, t0=time.time())
        status, reason = "ok", None
        try:
            status, reason = self.follow(hooks)
        except KeyboardInterrupt:
            status, reason = "interrupted", "interrupted by the user"
        finally:
            stopped_at = time.time()
            self.stop(status)
        self.settle(status, stopped_at)
        return status, reason

    def follow(self, hooks: FollowHooks) -> Outcome:
        """Poll until the measurement is done (``ok``), a run must stop (``aborted``) or ``stop`` is set."""
        while True:
            if hooks.stop is None:
                time.sleep(hooks.poll_s)
            elif hooks.stop.wait(hooks.poll_s):
                return "interrupted", "interrupted by the user"
            now = time.time()
            for part in self.parts:
                reason = part.check()
                for rule in hooks.rules:
                    reason = reason or rule(part, now)
                if reason is not None:
                    return "aborted", self._named(part, reason)
            if hooks.measure is not None and hooks.measure(now):
                return "ok", None

    def _named(self, part: ModelRun, reason: str) -> str:
        """``reason``, naming the run's model when the level loads several."""
        if not self.name_parts or f"'{part.model}'" in reason:
            return reason
        return f"'{part.model}': {reason}"

    def stop(self, status: str, timeout_s: float | None = None) -> None:
        """Stop every run's Locust (a finished measurement does not wait for their shutdown)."""
        for part in self.parts:
            part.stop(status, timeout_s)

    def settle(self, status: str, stopped_at: float) -> None:
        """The measured windows once the runs have ended.

        After a stop, every run's windows over the span that was over in any run's. A run in a
        process that stays up flushed every window as it ended: its span is read again.
        """
        start = self.start
        if start is None:
            return
        if status != "ok":
            end = start + max(len(part.measured_before(start, stopped_at)) for part in self.parts)
            for part in self.parts:
                part.watch.measured = part.watch.log.span(start, end)
            return
        for part in self.parts:
            if part.kept:
                part.watch.log.poll()
                part.watch.measured = part.watch.log.span(start, start + len(part.watch.measured))


class Measurement:
    """A measured level's ``measure`` hook: its span, its stability, its progress, the server's counters."""

    def __init__(
        self,
        level: LevelRun,
        spec: LoadSpec,
        progress: ProgressCallback | None = None,
        counters: ServerCounters | None = None,
    ) -> None:
        self.level = level
        self.spec = spec
        self.progress = progress
        self.counters = counters
        self.window_s = spec.effective_window_s
        self._judged: tuple[int, int, bool] | None = None
        """The span last judged (start, end) and whether it ended the measurement."""

    def __call__(self, now: float) -> bool:
        """Take every run's complete windows from the start; whether the measurement is done."""
        level, spec = self.level, self.spec
        if self.counters is not None:  # at each window from the first: the span's edges are among them
            self.counters.take(int((now - level.t0) // self.window_s))
        start = level.start
        if start is None:
            return False
        end = min(part.complete_end(start, now) for part in level.parts)
        if self._judged is not None and self._judged[:2] == (start, end):  # no new window: same answer
            return self._judged[2]
        for part in level.parts:
            part.watch.measured = part.watch.log.span(start, end)
        union = level.union()
        elapsed = len(union) * self.window_s
        stable, judged = judge_stability(spec, union, self.window_s)
        self._report(union, elapsed, stable)
        if spec.count_window_requests:  # count windows: as many as it takes, up to the max trials
            done = stable or judged >= spec.max_count_windows or elapsed >= spec.effective_max_duration_s
        else:
            done = elapsed >= spec.duration_s and (stable or elapsed >= spec.effective_max_duration_s)
        self._judged = (start, end, done)
        return done

    def _report(self, measured: list[Window], elapsed: float, stable: bool) -> None:
        if self.progress is None:
            return
        last = measured[-1] if measured else None
        self.progress(
            Progress(
                label=self.level.label,
                phase="measuring" if measured else "warm-up",
                measured_s=elapsed,
                target_s=self.spec.duration_s,
                qps=last.ok / self.window_s if last else None,
                p99_us=last.p99_us() if last else None,
                errors=sum(w.error_count for w in measured),
                stable=stable,
            )
        )
