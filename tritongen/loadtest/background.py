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
from tritongen.loadtest.level import FollowHooks, LevelRun
from tritongen.loadtest.mix import Mix
from tritongen.loadtest.model_run import Launch, ModelRun
from tritongen.loadtest.prepared import prepare_test
from tritongen.loadtest.spec import LoadSpec, Mode
from tritongen.loadtest.windows import Window, latency_summary, merge
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
        self._level: LevelRun | None = None
        self._done = threading.Event()
        self._thread: threading.Thread | None = None
        self._workdir = Path(tempfile.mkdtemp(prefix="tritongen-background-"))
        self._endpoint = TritonEndpoint.at(self.load.address, timeout_s=10)
        self._stopped_at: float | None = None

    def start(self, stop: threading.Event) -> None:
        """Start every model's Locust and the watcher that sets ``stop`` if the load fails.

        A start that fails stops what it started and removes the working files.

        Raises:
            TritongenError: a background model is not ready, its load does not fit it (its
                scheduler, batch size or inputs), or its inputs cannot be built.
        """
        try:
            self._endpoint.require_ready(self.spec.models, "the background load")
            sampler = MetricsSampler(self.load.address.metrics_url)  # never started: no figures asked of it
            parts = []
            for index, (model, part) in enumerate(zip(self.spec.models, self.spec.parts(), strict=True)):
                spec = replace(self.load, model=model, mode=self.spec.mode, levels=(part,))
                test = prepare_test(spec, self._endpoint, self._workdir / f"m{index}", sampler=sampler)
                parts.append(ModelRun(test, part))
            self._level = LevelRun(parts, "background", name_parts=True)
            self._level.launch(Launch(shared=False, other_cpu=False, run_time_s=RUN_CAP_S))
        except BaseException:
            self.close()
            raise
        self._thread = threading.Thread(target=self._watch, args=(stop,), name="background-load", daemon=True)
        self._thread.start()

    def _watch(self, stop: threading.Event) -> None:
        """Follow the load every ``CHECK_S`` until stopped; on a failure keep the reason and set ``stop``."""
        assert self._level is not None
        hooks = FollowHooks(stop=self._done, poll_s=CHECK_S, rules=(FailingWindows(),))
        status, reason = self._level.follow(hooks)
        if status == "aborted":
            self.failure = reason
            stop.set()

    def wait_until_measured(self, stop: threading.Event) -> None:
        """Return once every model's measured time has begun, so all that is measured next runs under it.

        Returns early when ``stop`` is set: the load failed, and :attr:`failure` says why.
        """
        deadline = time.monotonic() + MEASURED_WAIT_S
        while self._level is not None and not stop.is_set() and time.monotonic() < deadline:
            start = self._level.start
            if start is not None and time.time() >= self._level.t0 + start * WINDOW_S:
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
        if self._level is not None:
            self._level.stop("ok", timeout_s=2.0)
        self._endpoint.close()

    def figures(self) -> dict[str, Any]:
        """The background's own figures over its whole run, per model and in all (call after :meth:`stop`)."""
        per_model: dict[str, dict[str, Any]] = {}
        spans: list[list[Window]] = []
        end_time = self._stopped_at or time.time()
        parts = self._level.parts if self._level is not None else []
        for run, part in zip(parts, self.spec.parts(), strict=True):
            watch = run.watch
            watch.log.poll()
            start = watch.measure_start
            end = int((end_time - watch.t0) // WINDOW_S)  # the windows over before the stop
            span = watch.log.span(start, end) if start is not None and end > start else []
            spans.append(span)
            level = {"concurrency": int(part)} if self.spec.mode == "concurrency" else {"target_rate": part}
            per_model[run.model] = {**level, **_summary(span)}
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


class FailingWindows:
    """A background load fails when more than 1% of a second's requests failed, in any model's windows."""

    def __init__(self) -> None:
        self.checked: dict[int, int] = {}
        """Each run's next window to look at, by the run's id."""

    def __call__(self, run: ModelRun, now: float) -> str | None:
        """Why the load fails when a window over since the last check lost more than 1% of its requests."""
        watch = run.watch
        if watch.measure_start is None:
            return None
        start = max(self.checked.get(id(run), 0), watch.measure_start)
        over = int((now - watch.t0) // WINDOW_S) - 1  # windows before this one: reported or empty
        self.checked[id(run)] = max(start, over)
        for index in range(start, over):
            window = watch.log.windows.get(index)
            if window is None:
                continue
            done = window.ok + window.error_count
            if window.error_count and window.error_count > ERROR_FRACTION * done:
                kinds = ", ".join(f"{kind}: {n}" for kind, n in sorted(window.errors.items()))
                return f"{window.error_count} of {done} background requests failed in one second ({kinds})"
        return None


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
