"""Several models in one load test: each model takes its share of every level, measured side by side.

One Locust per model runs at the same time, all on the same window grid (one ``t0``).
At concurrency C the shares split the C in-flight streams (each model keeps at least one);
at rate R each model gets its share of R. The measured span, its warm-up and the stability
rule are judged on the union of the models' windows; each model's own figures come from its
own windows over that same span.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import Any

from tritongen.client.endpoint import TritonEndpoint
from tritongen.errors import ConfigError
from tritongen.loadtest.kinds.base import LoadKind
from tritongen.loadtest.level import FollowHooks, LevelRun, Measurement
from tritongen.loadtest.model_run import Launch, ModelRun
from tritongen.loadtest.prepared import LoadTest
from tritongen.loadtest.progress import ProgressCallback
from tritongen.loadtest.result import LoadTestReport, RunResult
from tritongen.loadtest.run_figures import run_result
from tritongen.loadtest.runner import LoadPlan, Told, level_label, run_plan
from tritongen.loadtest.server_counters import ServerCounters
from tritongen.loadtest.spec import LoadSpec, Mode
from tritongen.metrics.composing import ServerModels
from tritongen.metrics.statistics import PHASES
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


def run_mix_test(
    spec: LoadSpec,
    mix: Mix,
    progress: ProgressCallback | None = None,
    stop: threading.Event | None = None,
    on_run: Callable[[RunResult], None] | None = None,
) -> LoadTestReport:
    """Run every level of ``spec`` with its load split over ``mix``'s models (partial report when stopped).

    ``spec.model`` is ignored: the models are ``mix.models``. Each run holds the union's
    figures; ``RunResult.models`` holds each model's.

    Raises:
        TritongenError: illegal settings, or a model the server does not have ready.
    """
    mix.check(spec.mode, spec.levels)
    if spec.shared_memory != "none":
        raise ConfigError("--shared-memory system loads one model at a time", "drop --mix or --shared-memory")

    def specs(endpoint: TritonEndpoint) -> list[LoadSpec]:
        endpoint.require_ready(mix.models, "the mix")
        return model_specs(spec, mix, endpoint)

    plan = LoadPlan(
        model=MODEL_SEPARATOR.join(mix.models),
        specs=specs,
        level=lambda tests, level, number, told: MixLevel(mix, tests, level, number).run(told),
    )
    return run_plan(spec, plan, Told(progress, stop, on_run))


def model_specs(spec: LoadSpec, mix: Mix, endpoint: TritonEndpoint) -> list[LoadSpec]:
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


class MixLevel:
    """One level of a mix: a Locust per model on one window grid, judged on the union."""

    def __init__(self, mix: Mix, tests: list[LoadTest], level: float, number: int) -> None:
        self.mix = mix
        self.tests = tests
        self.spec = tests[0].spec
        self.parts = [
            ModelRun(t, part, number) for t, part in zip(tests, mix.split(self.spec.mode, level), strict=True)
        ]
        # The whole level: what the union is reported as (it runs no Locust itself); its kind's
        # figures (streams, sequences) only mean something when every model is of that kind.
        kinds = {test.kind.name for test in tests}
        common = tests[0].kind if len(kinds) == 1 else LoadKind()
        self.lead = ModelRun(replace(tests[0], kind=common), level, number)
        shown = " + ".join(f"{p.model} {p.level:g}" for p in self.parts)
        self.level_run = LevelRun(
            self.parts, f"{level_label(tests[0], level, number)} ({shown})", name_parts=True
        )

    def run(self, told: Told) -> RunResult:
        """Run every model's Locust until the union's measurement is done, a run fails or the user stops."""
        counters = ServerCounters(self.tests[0].endpoint)
        measure = Measurement(self.level_run, self.spec, told.progress, counters)
        try:
            outcome = self.level_run.execute(
                Launch(shared=False, other_cpu=False), FollowHooks(told.stop, measure=measure)
            )
        finally:
            self.lead.health.close()
        return self._result(outcome, counters)

    def _result(self, outcome: tuple[str, str | None], counters: ServerCounters) -> RunResult:
        """The union's figures as the run, each model's under ``models``."""
        run = self.level_run
        per_model = [
            run_result(p, p.watch.measured, run.start, run.t0, outcome, counters) for p in self.parts
        ]
        total = run_result(self.lead, run.union(), run.start, run.t0, outcome, counters)
        total.processes = sum(r.processes for r in per_model)
        total.infer_per_s = sum(r.infer_per_s for r in per_model)
        total.server_us, total.avg_batch = None, None  # the server's figures are per model
        if len({r.batch_size for r in per_model}) > 1:
            total.batch_size = 0  # rows differ per model: see each model's
        total.server_models = self._server_models(counters, len(total.windows)) if total.windows else {}
        total.models = {
            model: _model_entry(result, self.mix.fraction(i), total.server_models.get(model))
            for i, (model, result) in enumerate(zip(self.mix.models, per_model, strict=True))
        }
        return total

    def _server_models(self, counters: ServerCounters, length: int) -> ServerModels:
        """The server's figures side by side: each model of the mix a root, its ensemble steps under it."""
        start = self.level_run.start or 0
        forest: ServerModels = {}
        for model in self.mix.models:
            steps = ensemble_tree(model, counters.configs)
            tree = counters.models(model, start, start + length)
            for name, entry in tree.items():
                if name == model or (name in steps and name not in self.mix.models):
                    forest.setdefault(name, entry)
        return forest


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
