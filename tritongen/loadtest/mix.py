"""Several models in one load test: each model takes its share of every level, measured side by side.

One Locust per model runs at the same time, all on the same window grid (one ``t0``).
At concurrency C the shares split the C in-flight streams (each model keeps at least one);
at rate R each model gets its share of R. The measured span, its warm-up and the stability
rule are judged on the union of the models' windows; each model's own figures come from its
own windows over that same span.
"""

from __future__ import annotations

import math
import shutil
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from tritongen.client.endpoint import TritonEndpoint
from tritongen.errors import ConfigError, ServerError
from tritongen.loadtest.locust_process import LocustProcess
from tritongen.loadtest.result import LoadTestReport, RunResult
from tritongen.loadtest.runner import (
    POLL_S,
    ProgressCallback,
    _LevelRun,
    _LoadTest,
    _Watch,
    measure_levels,
    metrics_url_for,
    prepare_requests,
)
from tritongen.loadtest.spec import LoadSpec, Mode
from tritongen.loadtest.windows import Window, WindowLog, is_stable, merge
from tritongen.metrics.composing import ServerModels, server_models
from tritongen.metrics.process_memory import local_server_pid
from tritongen.metrics.prometheus import MetricsSampler
from tritongen.metrics.statistics import PHASES
from tritongen.server.affinity import pinned_server
from tritongen.triton.ensembles import ensemble_tree

MODEL_SEPARATOR = ","
SHARE_SEPARATOR = ":"
_NOT_PER_MODEL = ("mode", "gpu", "cpu", "windows", "round", "status", "reason", "server_models", "models")
"""Run figures that belong to the whole run, not to one model of a mix."""


@dataclass(frozen=True)
class Mix:
    """The models of a mixed load test and each one's share of the load."""

    models: tuple[str, ...]
    shares: tuple[float, ...]

    @classmethod
    def parse(cls, models: str, mix: str | None) -> Mix:
        """``a,b`` and ``3:1`` (equal shares without ``mix``).

        Raises:
            ConfigError: an empty or repeated model name, or shares that are not one
                positive number per model.
        """
        names = tuple(name.strip() for name in models.split(MODEL_SEPARATOR))
        if any(not name for name in names):
            raise ConfigError(f"model list {models!r} has an empty name", "write e.g. mlp_onnx,text_onnx")
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise ConfigError(
                f"model '{repeated[0]}' is named twice in {models!r}",
                "name each model once; --mix sets shares",
            )
        if mix is None:
            return cls(names, (1.0,) * len(names))
        if len(names) < 2:
            raise ConfigError(
                f"--mix needs several models: MODEL a,b (got only '{names[0]}')",
                "name the models of the mix, e.g. loadtest a,b --mix 3:1, or drop --mix",
            )
        return cls(names, parse_shares(mix, len(names)))

    @property
    def mixed(self) -> bool:
        """Whether the load goes to more than one model."""
        return len(self.models) > 1

    def fraction(self, index: int) -> float:
        """The share of model ``index`` as a fraction of the load."""
        return self.shares[index] / sum(self.shares)

    def check(self, mode: Mode, levels: tuple[float, ...]) -> None:
        """Refuse a concurrency too small to give every model one stream.

        Raises:
            ConfigError: a concurrency level below the number of models.
        """
        if mode != "concurrency":
            return
        small = [level for level in levels if level < len(self.models)]
        if small:
            raise ConfigError(
                f"--concurrency {min(small):g} is less than the {len(self.models)} models of the mix",
                f"each model needs a request in flight: use --concurrency {len(self.models)} or more",
            )

    def split(self, mode: Mode, level: float) -> list[float]:
        """Each model's part of ``level``: whole streams (one at least) or a share of the rate."""
        if mode == "rate":
            return [level * self.fraction(i) for i in range(len(self.models))]
        return [float(n) for n in split_streams(int(level), self.shares)]


def parse_shares(text: str, count: int) -> tuple[float, ...]:
    """``3:1`` → ``(3.0, 1.0)``, one positive share per model.

    Raises:
        ConfigError: not numbers, not positive, or not one per model.
    """
    parts = [part.strip() for part in text.split(SHARE_SEPARATOR)]
    try:
        shares = tuple(float(part) for part in parts)
    except ValueError as e:
        raise ConfigError(
            f"--mix {text!r} is not a list of numbers", "write one share per model, e.g. 3:1"
        ) from e
    if len(shares) != count:
        raise ConfigError(
            f"--mix {text!r} gives {len(shares)} share(s) for {count} model(s)",
            f"give one share per model, e.g. --mix {SHARE_SEPARATOR.join(['1'] * count)}",
        )
    if any(not math.isfinite(share) or share <= 0 for share in shares):
        raise ConfigError(f"--mix {text!r} has a share that is not positive", "every share must be above 0")
    return shares


def split_streams(total: int, shares: tuple[float, ...]) -> list[int]:
    """``total`` streams split by ``shares``: one each, then each next one to the model furthest behind."""
    weight = sum(shares)
    ideal = [total * share / weight for share in shares]
    counts = [1] * len(shares)
    for _ in range(total - len(shares)):
        behind = max(range(len(shares)), key=lambda i: (ideal[i] - counts[i], -i))
        counts[behind] += 1
    return counts


def check_served(endpoint: TritonEndpoint, models: tuple[str, ...], what: str = "the mix") -> None:
    """Refuse a model the server does not have ready, naming the ones it has (``what``: whose model it is).

    Raises:
        ServerError: a model is not ready (or the server does not answer).
    """
    for model in models:
        if endpoint.is_model_ready(model):
            continue
        if not endpoint.is_live():
            raise ServerError(
                f"cannot reach Triton at {endpoint.url} ({endpoint.protocol})",
                "start it with `tritongen serve REPO` or pass --url",
            )
        ready = ready_models(endpoint)
        listed = ", ".join(ready) if ready else "none"
        raise ServerError(
            f"model '{model}' of {what} is not ready on {endpoint.url} (ready: {listed})",
            "load it, or name only models the server has ready",
        )


def ready_models(endpoint: TritonEndpoint) -> list[str]:
    """The names of the models the server has ready (empty when its repository index is closed)."""
    try:
        return endpoint.ready_models()
    except ServerError:
        return []


def run_mix_test(
    spec: LoadSpec, mix: Mix, progress: ProgressCallback | None = None, stop: threading.Event | None = None
) -> LoadTestReport:
    """Run every level of ``spec`` with its load split over ``mix``'s models (partial report when stopped).

    ``spec.model`` is ignored: the models are ``mix.models``. Each run holds the union's
    figures; ``RunResult.models`` holds each model's.

    Raises:
        TritongenError: illegal settings, or a model the server does not have ready.
    """
    spec.check()
    mix.check(spec.mode, spec.levels)
    if spec.shared_memory != "none":
        raise ConfigError("--shared-memory system loads one model at a time", "drop --mix or --shared-memory")
    endpoint = TritonEndpoint(spec.url, spec.protocol, timeout_s=10)
    report = LoadTestReport(
        model=MODEL_SEPARATOR.join(mix.models), protocol=spec.protocol, url=spec.url, rounds=spec.rounds
    )
    workdir = Path(tempfile.mkdtemp(prefix="tritongen-mix-"))
    metrics_url = spec.metrics_url or metrics_url_for(spec.url)
    server_pid = local_server_pid(spec.url)
    sampler = MetricsSampler(metrics_url, server_pid=server_pid)
    report.cpus = spec.cpus.to_json() if spec.cpus else None
    try:
        check_served(endpoint, mix.models)
        specs = _model_specs(spec, mix, endpoint)
        tests = [prepare_model(s, endpoint, sampler, workdir / f"m{i}") for i, s in enumerate(specs)]
        sampler.start()
        told = (progress, stop)
        with pinned_server(server_pid, spec.cpus):
            measure_levels(spec, report, lambda level, n: _MixLevel(mix, tests, level, n, told).execute())
    finally:
        sampler.stop()
        endpoint.close()
        shutil.rmtree(workdir, ignore_errors=True)
    return report


def _model_specs(spec: LoadSpec, mix: Mix, endpoint: TritonEndpoint) -> list[LoadSpec]:
    """Each model's load: its part of each level, and the ``--shape`` and ``--input-value`` of its inputs.

    Raises:
        ConfigError: a ``--shape`` or ``--input-value`` names an input no model of the mix has.
    """
    inputs = [{i.name for i in endpoint.interface(model).inputs} for model in mix.models]
    known = set().union(*inputs)
    for option, names in (("--shape", spec.shapes), ("--input-value", spec.input_values)):
        unknown = sorted(set(names) - known)
        if unknown:
            raise ConfigError(
                f"no model of the mix has an input '{unknown[0]}' ({option})",
                f"name an input of one of the models in {option}",
            )
    return [
        replace(
            spec,
            model=model,
            levels=tuple(mix.split(spec.mode, level)[i] for level in spec.levels),
            shapes={k: v for k, v in spec.shapes.items() if k in names},
            input_values={k: v for k, v in spec.input_values.items() if k in names},
        )
        for i, (model, names) in enumerate(zip(mix.models, inputs, strict=True))
    ]


def prepare_model(
    spec: LoadSpec, endpoint: TritonEndpoint, sampler: MetricsSampler, workdir: Path
) -> _LoadTest:
    """What every level shares for one model of the mix: its requests, built from its own metadata.

    Raises:
        ConfigError: the load does not fit the model (its batch size, scheduler or inputs).
        SourceError: the data file is unreadable, or its data does not fit the model.
    """
    workdir.mkdir(parents=True)
    inputs = workdir / "inputs.npz"
    requests = prepare_requests(spec, endpoint, inputs)
    return _LoadTest(
        spec,
        requests.rows,
        endpoint,
        sampler,
        inputs,
        workdir,
        progress=None,
        stop=None,
        streaming=requests.streaming,
        sequence_length=requests.sequence_length,
    )


class _MixLevel:
    """One level of a mix: a Locust per model on one window grid, judged on the union."""

    def __init__(
        self,
        mix: Mix,
        tests: list[_LoadTest],
        level: float,
        round_number: int,
        told: tuple[ProgressCallback | None, threading.Event | None],
    ) -> None:
        self.mix = mix
        self.spec = tests[0].spec
        self.parts = mix.split(self.spec.mode, level)
        self.runs = [_LevelRun(t, part, round_number) for t, part in zip(tests, self.parts, strict=True)]
        # The whole level: what the union is judged and reported as (it runs no Locust itself);
        # its streaming figures only mean something when every model streams.
        streaming = all(t.streaming for t in tests)
        self.lead = _LevelRun(replace(tests[0], progress=told[0], streaming=streaming), level, round_number)
        shown = " + ".join(f"{m} {p:g}" for m, p in zip(mix.models, self.parts, strict=True))
        self.lead.label += f" ({shown})"
        self.stop_event = told[1]
        self.window_s = self.lead.window_s
        self.start: int | None = None
        self.t0 = 0.0

    def execute(self) -> RunResult:
        """Run every model's Locust until the union's measurement is done, a run fails or the user stops."""
        self.t0 = time.time()
        started = time.monotonic()
        watches = [_Watch(log=WindowLog(run.results), t0=self.t0, started=started) for run in self.runs]
        for watch in watches:
            watch.next_health = started + 1.0
        locusts: list[LocustProcess] = []
        status, reason = "ok", None
        try:
            for run in self.runs:
                locusts.append(LocustProcess(run._locust_args(self.t0), run.log_path))
            status, reason = self._follow(locusts, watches)
        except KeyboardInterrupt:
            status, reason = "interrupted", "interrupted by the user"
        finally:
            stopped_at = time.time()
            for locust in locusts:
                locust.stop(timeout_s=0.0 if status == "ok" else 10.0)
            for run in (*self.runs, self.lead):
                run.health.close()
        if self.start is not None and status != "ok":
            self._cut(watches, self.start, stopped_at)
        return self._result(watches, status, reason)

    def _follow(self, locusts: list[LocustProcess], watches: list[_Watch]) -> tuple[str, str | None]:
        """Poll until the union's measurement is done (``ok``) or a model's run must stop (``aborted``).

        Raises:
            KeyboardInterrupt: the stop event was set.
        """
        while True:
            if self.stop_event is not None and self.stop_event.is_set():
                raise KeyboardInterrupt
            time.sleep(POLL_S)
            for run, locust, watch in zip(self.runs, locusts, watches, strict=True):
                watch.log.poll()
                reason = run._exit_reason(locust, watch) or run._health_reason(watch)
                if reason is None and watch.measure_start is None:
                    reason = run._find_start(watch)
                if reason is not None:
                    model = run.spec.model
                    return "aborted", reason if f"'{model}'" in reason else f"'{model}': {reason}"
            starts = [w.measure_start for w in watches]
            if all(s is not None for s in starts):
                self.start = max(s for s in starts if s is not None)
                if self._measure(watches, self.start, time.time()):
                    return "ok", None

    def _measure(self, watches: list[_Watch], start: int, now: float) -> bool:
        """Take the windows every model has complete from ``start``; whether the union's figures are done."""
        index = int((now - self.t0) // self.window_s)
        self.lead._snapshot(index, self.t0)  # every model's counters: one statistics call
        end = min(
            run._complete_end(watch.log, start, now, self.t0)
            for run, watch in zip(self.runs, watches, strict=True)
        )
        for watch in watches:
            watch.measured = watch.log.span(start, end)
        union = _union(watches)
        elapsed = len(union) * self.window_s
        stable = is_stable(union, self.window_s)
        self.lead._report(union, elapsed, stable, phase="warm-up" if not union else "measuring")
        spec = self.spec
        return elapsed >= spec.duration_s and (stable or elapsed >= spec.effective_max_duration_s)

    def _cut(self, watches: list[_Watch], start: int, stopped_at: float) -> None:
        """After a stop: every model's windows over the span that was over in any model's."""
        spans = [
            run._measured_before(w, start, stopped_at) for run, w in zip(self.runs, watches, strict=True)
        ]
        end = start + max((len(span) for span in spans), default=0)
        for watch in watches:
            watch.measured = watch.log.span(start, end)

    def _result(self, watches: list[_Watch], status: str, reason: str | None) -> RunResult:
        """The union's figures as the run, each model's under ``models``."""
        per_model = [
            run._result(w.measured, self.start, self.t0, status, reason)
            for run, w in zip(self.runs, watches, strict=True)
        ]
        total = self.lead._result(_union(watches), self.start, self.t0, status, reason)
        total.processes = sum(r.processes for r in per_model)
        total.infer_per_s = sum(r.infer_per_s for r in per_model)
        total.server_us, total.avg_batch = None, None  # the server's figures are per model
        if len({r.batch_size for r in per_model}) > 1:
            total.batch_size = 0  # rows differ per model: see each model's
        total.server_models = self._server_models(len(total.windows)) if total.windows else {}
        total.models = {
            model: _model_entry(result, self.mix.fraction(i), total.server_models.get(model))
            for i, (model, result) in enumerate(zip(self.mix.models, per_model, strict=True))
        }
        return total

    def _server_models(self, length: int) -> ServerModels:
        """The server's figures side by side: each model of the mix a root, its ensemble steps under it."""
        start = self.start if self.start is not None else 0
        before, after = self.lead.snapshots.get(start), self.lead.snapshots.get(start + length)
        if before is None or after is None:
            return {}
        forest: ServerModels = {}
        for model in self.mix.models:
            steps = ensemble_tree(model, self.lead.configs)
            tree = server_models(before[1], after[1], model, self.lead.configs)
            for name, entry in tree.items():
                if name == model or (name in steps and name not in self.mix.models):
                    forest.setdefault(name, entry)
        return forest


def _union(watches: list[_Watch]) -> list[Window]:
    """The models' windows added up, index by index (the spans have one length)."""
    spans = [watch.measured for watch in watches]
    length = min((len(span) for span in spans), default=0)
    return [merge([span[i] for span in spans]) for i in range(length)]


def _model_entry(
    result: RunResult, fraction: float, server: dict[str, float | int | str | None] | None
) -> dict[str, Any]:
    """One model's figures in a mixed run: its share, level, counts, rates, latency and server figures."""
    entry = {k: v for k, v in asdict(result).items() if k not in _NOT_PER_MODEL}
    entry["warnings"] = [w for w in result.warnings if not w.startswith("not stable")]
    if server is not None:
        entry["server_us"] = {phase: server.get(f"{phase}_us") for phase in PHASES}
        entry["avg_batch"] = server.get("avg_batch")
    return {"share": fraction, **entry}
