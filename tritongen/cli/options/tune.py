"""``tune``'s option groups: the configs it may try, the server it tunes on, its trials, what --apply does."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Annotated

import typer

from tritongen.cli.config_change import ShowDiff
from tritongen.cli.options.groups import reworded
from tritongen.cli.options.load import (
    Cpus,
    LoadFlags,
    MaxDuration,
    MeasurementWindow,
    OtherCpuLimit,
    RequestTimeout,
    RunFlags,
)
from tritongen.cli.options.parsing import parse_int_list
from tritongen.cli.options.settings import settings
from tritongen.cli.options.shape import ShapeFlags
from tritongen.cli.options.shared import AdminKey, Arrival, FindMax, LoadTimeout, SkipFailed, Url, WorkDir
from tritongen.errors import ConfigError
from tritongen.loadtest.arrivals import parse_arrival
from tritongen.loadtest.background import BackgroundSpec
from tritongen.loadtest.mix import Mix
from tritongen.loadtest.shapes.base import LoadShape
from tritongen.tune.confirm import DEFAULT_FINALISTS
from tritongen.tune.space import SearchSpace, parse_preferred_sets


@dataclass(frozen=True)
class SearchFlags:
    """The configs ``tune`` may try, and how many."""

    # --max-batch-size, --preferred-batch-sizes, --max-queue-delay-us and --instances are not
    # the batching options of convert and render (cli/options/batching.py): each takes the
    # values to try (a list, or sets of lists) where those take the one value to write.
    max_batch_size: Annotated[
        str | None,
        typer.Option(
            "--max-batch-size",
            help="Max batch sizes to try, e.g. 8,16,32 (default: the model's).",
        ),
    ] = None
    preferred: Annotated[
        str, typer.Option("--preferred-batch-sizes", help="Sets of preferred sizes, e.g. '4,8;8,16;none'.")
    ] = "none"
    delays: Annotated[
        str, typer.Option("--max-queue-delay-us", help="Queue delays to try in µs, e.g. 0,100,500,1000,2000.")
    ] = "0,100,500,1000,2000"
    instances: Annotated[str, typer.Option("--instances", help="Instance counts to try, e.g. 1,2.")] = "1,2"
    strategy: Annotated[str, typer.Option("--strategy", help="grid (every legal config) or adaptive.")] = (
        "adaptive"
    )
    max_trials: Annotated[
        int | None,
        typer.Option(
            "--max-trials",
            help="Trials at most (default: grid all, adaptive 30%).",
            min=1,
        ),
    ] = None
    max_memory_mb: Annotated[
        float | None,
        typer.Option(
            "--max-memory-mb",
            help="GPU memory cap of a feasible config (where the server reports GPU memory).",
        ),
    ] = None
    composing: Annotated[
        str | None,
        typer.Option(
            "--composing",
            help="Tune this composing model (an ensemble step, or a model MODEL calls through BLS) "
            "while the load goes to MODEL.",
        ),
    ] = None

    def space(self) -> SearchSpace:
        """The values to try (no ``--max-batch-size``: the model's own, filled in from its config).

        Raises:
            typer.BadParameter: a list that is not of integers.
            ConfigError: a malformed set of preferred sizes.
        """
        return SearchSpace(
            max_batch_sizes=parse_int_list(self.max_batch_size, "--max-batch-size") or (),
            preferred_batch_sizes=parse_preferred_sets(self.preferred),
            max_queue_delays_us=parse_int_list(self.delays, "--max-queue-delay-us") or (0,),
            instance_counts=parse_int_list(self.instances, "--instances") or (1,),
        )


@dataclass(frozen=True)
class ServerFlags:
    """Which server the trials run on, and what other traffic it carries meanwhile."""

    url: Annotated[
        str | None,
        reworded(
            Url,
            "A running server in explicit model-control mode (HTTP host:port) "
            "instead of the embedded one; with --protocol grpc the load goes to its host's port 8001.",
        ),
    ] = None
    # Not the --serve of infer and loadtest, which names the repository to serve: the
    # repository is --repo, and this flag only says the embedded server is wanted.
    serve: Annotated[
        bool, typer.Option("--serve", help="Tune on the embedded server started on --repo (the default).")
    ] = False
    admin_key: AdminKey = None
    skip_failed: Annotated[
        bool,
        reworded(
            SkipFailed,
            "On the embedded server: serve the whole repository, leaving out (one line each) the "
            "models that fail to load; the tuned model, the model under load and --background must "
            "load (default: only those models).",
        ),
    ] = False
    load_timeout_s: LoadTimeout = None
    background: Annotated[
        str | None,
        typer.Option(
            "--background",
            help="Keep these models (OTHER[,OTHER2]) under load for the whole tune: tune under interference.",
        ),
    ] = None
    background_concurrency: Annotated[
        int | None,
        typer.Option(
            "--background-concurrency",
            help="In-flight requests of the background load in all, split over its models (default 1 each).",
        ),
    ] = None
    background_rate: Annotated[
        float | None,
        typer.Option(
            "--background-rate",
            help="Requests/s of the background load in all (open loop), split over its models.",
        ),
    ] = None

    def background_spec(self) -> BackgroundSpec | None:
        """The background load asked for, or ``None``.

        Raises:
            ConfigError: a background level without --background, both levels, or a
                malformed model list.
        """
        level_given = self.background_concurrency is not None or self.background_rate is not None
        if self.background is None:
            if level_given:
                raise ConfigError(
                    "--background-concurrency and --background-rate need --background",
                    "name the models to keep under load, e.g. --background other_model",
                )
            return None
        if self.background_concurrency is not None and self.background_rate is not None:
            raise ConfigError(
                "--background-concurrency and --background-rate exclude each other",
                "use one: closed or open loop",
            )
        models = Mix.parse(self.background, mix=None).models
        if self.background_rate is not None:
            return BackgroundSpec(models, mode="rate", level=self.background_rate)
        return BackgroundSpec(models, level=self.background_concurrency)


@dataclass(frozen=True)
class TrialFlags:
    """Where the trials are kept, how each one's requests are judged, and how the best are confirmed."""

    out: WorkDir = None
    resume: Annotated[
        Path | None,
        typer.Option(
            "--resume",
            help="Continue a tune in this directory, skipping finished trials.",
        ),
    ] = None
    finalists: Annotated[
        int,
        typer.Option(
            "--finalists", help="Best search configs confirmed against the current config, in rounds."
        ),
    ] = DEFAULT_FINALISTS
    request_timeout: RequestTimeout = "60s"
    other_cpu_limit: OtherCpuLimit = "25%"
    max_duration: Annotated[
        str | None,
        reworded(MaxDuration, "Cap of each run while it waits for stability (default 3 × duration)."),
    ] = None
    window: Annotated[
        str | None, reworded(MeasurementWindow, "Measurement window of each run (default duration/6, 1-5 s).")
    ] = None

    cpus: Cpus = None
    arrival: Annotated[
        str,
        reworded(
            Arrival,
            "Open-loop arrivals of each trial's --rate or --stages: constant, poisson or gamma:CV "
            "(CV above 1: bursts), seeded by --seed.",
        ),
    ] = "constant"
    find_max: Annotated[
        bool,
        reworded(
            FindMax,
            "Each trial searches for its most load within --slo-p99-ms from the one --concurrency or --rate "
            "given (doubling, then bisecting); its score is the throughput there.",
        ),
    ] = False

    def run_flags(self) -> RunFlags:
        """How each run of a trial is judged: its request timeout, window, stability cap, other CPU, cores."""
        return settings(RunFlags, self)


SHAPE_FIELDS = tuple(f.name for f in fields(ShapeFlags))


@dataclass(frozen=True)
class TuneTrialFlags(TrialFlags, ShapeFlags):
    """The trials, and the shape of their load: a trace replayed or stages, judged then by the lower P99."""

    def load_shape_of(self, load: LoadFlags, model: str, default_duration: str) -> LoadShape | None:
        """The shape every trial replays (None: the load's own levels).

        ``default_duration``: tune's own default ``--duration``, which is not a length asked of a
        trace (a trace then plays once) nor refused beside stages.

        Raises:
            ConfigError: a malformed shape or one that excludes the options given, or with --find-max.
        """
        if load.duration == default_duration:
            own = next(f.default for f in fields(LoadFlags) if f.name == "duration")
            load = replace(load, duration=str(own))
        shape = self.load_shape(load, model, parse_arrival(self.arrival))
        if shape is not None and self.find_max:
            raise ConfigError(
                f"--find-max searches the load's level: {shape.option} sets its own rate", "drop one of them"
            )
        return shape


@dataclass(frozen=True)
class ApplyFlags:
    """Whether the winner goes into the repository, or is only shown."""

    apply: Annotated[
        bool,
        typer.Option(
            "--apply",
            help="Write the best config into the repository (.bak kept), only if it beat the current "
            "config significantly; a hand-written config keeps its comments and layout.",
        ),
    ] = False
    diff: Annotated[
        bool,
        reworded(
            ShowDiff, "With --apply: print the change to config.pbtxt as a unified diff and write nothing."
        ),
    ] = False
