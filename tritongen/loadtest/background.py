"""Background traffic: other models kept under load while something else is measured (the interference case).

One Locust per background model is started once and runs until :meth:`BackgroundLoad.stop`
(Locust's own run time is only a backstop; its process group is killed at the end, and it
dies with this process). A watcher checks it every half second: when its Locust exits, the
server or the model stops answering, or more than 1% of a second's requests fail, the load
is marked failed with the reason and the ``stop`` event it was given is set, so whatever was
being measured stops too. Its own figures over the whole time (throughput, latency
percentiles, errors) are read from its windows at the end. What is measured under it starts
once its own measured time has begun (:meth:`BackgroundLoad.wait_until_measured`), so those
figures cover all of it.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tritongen.client.endpoint import TritonEndpoint
from tritongen.errors import ConfigError
from tritongen.loadtest.locust_process import LocustProcess
from tritongen.loadtest.mix import Mix, check_served, prepare_model
from tritongen.loadtest.runner import _LevelRun, _Watch
from tritongen.loadtest.spec import LoadSpec, Mode
from tritongen.loadtest.windows import Window, WindowLog, latency_summary, merge
from tritongen.metrics.prometheus import MetricsSampler

WINDOW_S = 1.0
RUN_CAP_S = 7 * 24 * 3600
"""Locust's own run time: far beyond any tune; the load is stopped when the tune ends."""
CHECK_S = 0.5
MEASURED_WAIT_S = 120.0
"""Longest wait for the background's measured time to begin (its Locusts give up after a minute)."""
ERROR_FRACTION = 0.01
"""A second in which more of the background's requests fail than this ends the load."""


@dataclass(frozen=True)
class BackgroundSpec:
    """Which models carry background traffic and how much: in-flight streams or requests/s in all."""

    models: tuple[str, ...]
    mode: Mode = "concurrency"
    level: float | None = None
    """The whole background load, split equally over the models; ``None``: one stream each."""

    @property
    def total(self) -> float:
        """The whole background level (one stream per model when not given)."""
        return float(len(self.models)) if self.level is None else self.level

    def parts(self) -> list[float]:
        """Each model's streams or rate."""
        return Mix(self.models, (1.0,) * len(self.models)).split(self.mode, self.total)

    def check(self, measured: str) -> None:
        """Refuse a background on the measured model itself, or a level that cannot be split.

        Raises:
            ConfigError: the measured model is a background model, a non-positive or
                fractional concurrency, or fewer streams than models.
        """
        what = "--background-concurrency" if self.mode == "concurrency" else "--background-rate"
        if measured in self.models:
            raise ConfigError(
                f"'{measured}' is the model being tuned: it cannot also be --background",
                "name other models in --background",
            )
        if self.total <= 0 or (self.mode == "concurrency" and self.total != int(self.total)):
            raise ConfigError(f"{what} {self.total:g} must be a positive number", f"e.g. {what} 2")
        if self.mode == "concurrency" and self.total < len(self.models):
            raise ConfigError(
                f"{what} {self.total:g} is less than the {len(self.models)} background models",
                f"give each model a stream: {what} {len(self.models)} or more",
            )

    def to_json(self) -> dict[str, Any]:
        """``{"models", "mode", "level"}`` (the whole level)."""
        return {"models": list(self.models), "mode": self.mode, "level": self.total}


class BackgroundLoad:
    """A background load running on a server: start once, watch, stop, read its figures."""

    def __init__(self, spec: BackgroundSpec, load: LoadSpec) -> None:
        """``load`` gives the server, protocol and request settings (its model and levels are not used)."""
        self.spec = spec
        # Background traffic carries its tensors in the requests (its Locusts do not clean up regions).
        self.load = replace(load, window_s=WINDOW_S, warmup_s=0.0, rounds=1, shared_memory="none")
        self.failure: str | None = None
        self._runs: list[_LevelRun] = []
        self._watches: list[_Watch] = []
        self._locusts: list[LocustProcess] = []
        self._done = threading.Event()
        self._thread: threading.Thread | None = None
        self._workdir = Path(tempfile.mkdtemp(prefix="tritongen-background-"))
        self._endpoint = TritonEndpoint(self.load.url, self.load.protocol, timeout_s=10)
        self._t0 = 0.0
        self._stopped_at: float | None = None

    def start(self, stop: threading.Event) -> None:
        """Start every model's Locust and the watcher that sets ``stop`` if the load fails.

        A start that fails stops what it started and removes the working files.

        Raises:
            TritongenError: a background model is not ready, its load does not fit it (its
                scheduler, batch size or inputs), or its inputs cannot be built.
        """
        try:
            check_served(self._endpoint, self.spec.models, what="the background load")
            sampler = MetricsSampler(self.load.metrics_url or "")  # never started: no figures asked of it
            for index, (model, part) in enumerate(zip(self.spec.models, self.spec.parts(), strict=True)):
                spec = replace(self.load, model=model, mode=self.spec.mode, levels=(part,))
                test = prepare_model(spec, self._endpoint, sampler, self._workdir / f"m{index}")
                self._runs.append(_LevelRun(test, part))
            self._t0 = time.time()
            for run in self._runs:
                args = replace(run._locust_args(self._t0), run_time_s=RUN_CAP_S)
                self._locusts.append(LocustProcess(args, run.log_path))
                self._watches.append(
                    _Watch(log=WindowLog(run.results), t0=self._t0, started=time.monotonic())
                )
        except BaseException:
            self.close()
            raise
        self._thread = threading.Thread(target=self._watch, args=(stop,), name="background-load", daemon=True)
        self._thread.start()

    def _watch(self, stop: threading.Event) -> None:
        """Check the load every ``CHECK_S`` until stopped; on a failure keep the reason and set ``stop``."""
        checked = [0] * len(self._runs)
        while not self._done.wait(CHECK_S):
            for i, (run, locust, watch) in enumerate(
                zip(self._runs, self._locusts, self._watches, strict=True)
            ):
                watch.log.poll()
                reason = run._exit_reason(locust, watch) or run._health_reason(watch)
                if reason is None and watch.measure_start is None:
                    reason = run._find_start(watch)
                if reason is None and watch.measure_start is not None:
                    reason, checked[i] = _failing_window(watch, max(checked[i], watch.measure_start))
                if reason is not None:
                    model = run.spec.model
                    self.failure = reason if f"'{model}'" in reason else f"'{model}': {reason}"
                    stop.set()
                    return

    def wait_until_measured(self, stop: threading.Event) -> None:
        """Return once every model's measured time has begun, so all that is measured next runs under it.

        Returns early when ``stop`` is set: the load failed, and :attr:`failure` says why.
        """
        deadline = time.monotonic() + MEASURED_WAIT_S
        while not stop.is_set() and time.monotonic() < deadline:
            starts = [watch.measure_start for watch in self._watches]
            if all(start is not None for start in starts):
                begins = self._t0 + max(s for s in starts if s is not None) * WINDOW_S
                if time.time() >= begins:
                    return
            stop.wait(0.05)

    def stop(self) -> None:
        """Stop the watcher and every Locust (their process groups are killed); idempotent."""
        self._done.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=10)
        if self._stopped_at is not None:
            return
        self._stopped_at = time.time()
        for locust in self._locusts:
            locust.stop(timeout_s=2.0)
        for run in self._runs:
            run.health.close()
        self._endpoint.close()

    def figures(self) -> dict[str, Any]:
        """The background's own figures over its whole run, per model and in all (call after :meth:`stop`)."""
        per_model: dict[str, dict[str, Any]] = {}
        spans: list[list[Window]] = []
        end_time = self._stopped_at or time.time()
        for run, watch, part in zip(self._runs, self._watches, self.spec.parts(), strict=True):
            watch.log.poll()
            start = watch.measure_start
            end = int((end_time - self._t0) // WINDOW_S)  # the windows over before the stop
            span = watch.log.span(start, end) if start is not None and end > start else []
            spans.append(span)
            level = {"concurrency": int(part)} if self.spec.mode == "concurrency" else {"target_rate": part}
            per_model[run.spec.model] = {**level, **_summary(span)}
        length = min((len(span) for span in spans), default=0)
        union = [merge([span[i] for span in spans]) for i in range(length)]
        return {
            **self.spec.to_json(),
            "status": "failed" if self.failure else "ok",
            "reason": self.failure,
            "window_s": WINDOW_S,
            **_summary(union),
            "models": per_model,
        }

    def close(self) -> None:
        """Stop, and remove the working files."""
        self.stop()
        shutil.rmtree(self._workdir, ignore_errors=True)


def _failing_window(watch: _Watch, start: int) -> tuple[str | None, int]:
    """Why the load fails when a window over since the last check lost more than 1% of its requests."""
    over = int((time.time() - watch.t0) // WINDOW_S) - 1  # windows before this one: reported or empty
    for index in range(start, over):
        window = watch.log.windows.get(index)
        if window is None:
            continue
        done = window.ok + window.error_count
        if window.error_count and window.error_count > ERROR_FRACTION * done:
            kinds = ", ".join(f"{kind}: {n}" for kind, n in sorted(window.errors.items()))
            return f"{window.error_count} of {done} background requests failed in one second ({kinds})", over
    return None, max(start, over)


def _summary(windows: list[Window]) -> dict[str, Any]:
    """Requests, errors, throughput and latency over ``windows``."""
    total = merge(windows) if windows else Window(0)
    seconds = len(windows) * WINDOW_S
    return {
        "duration_s": seconds,
        "requests": total.ok + total.error_count,
        "errors": total.error_count,
        "errors_by_kind": dict(sorted(total.errors.items())),
        "qps": total.ok / seconds if seconds else 0.0,
        "latency_us": latency_summary(total.histogram) if total.ok else None,
    }
