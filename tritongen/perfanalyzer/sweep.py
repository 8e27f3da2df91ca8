"""A perf_analyzer sweep over tritongen's load test: one load test of every level, perf_analyzer's rules.

The sweep is one load test (one endpoint, one input file, one metrics sampler), each level a
run whose windows are perf_analyzer's measurement windows
(``-p`` ms, or ``--measurement-mode count_windows`` of ``--measurement-request-count``
requests each): it is measured until the last three agree within ``-s`` percent on
throughput and on latency (the average, or ``--percentile``), up to ``-r`` windows. There is
no warm-up beyond the first, partial window, as in perf_analyzer. ``-l`` ends the sweep after
the first level whose latency is above it, and a level that does not stabilise ends it too
(perf_analyzer then exits 1): both are rules that end the load test's sweep. With
``--binary-search`` the levels are bisected instead (:class:`~tritongen.loadtest.sweep_rules.Bisection`),
each judged by the ``-l`` rule. With a request rate, synchronous calls (perf_analyzer's default)
keep at most ``--max-threads`` requests in flight, from one load process; ``--async`` lifts that.
"""

from __future__ import annotations

import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tritongen.client.endpoint import TritonEndpoint
from tritongen.client.inputs import ModelInterface, numpy_dtype
from tritongen.errors import ConfigError
from tritongen.io.loadgen_shared import STABILITY_WINDOWS
from tritongen.loadtest.result import LoadTestReport, RunResult
from tritongen.loadtest.runner import ProgressCallback, run_load_test
from tritongen.loadtest.sequences import is_sequence_model
from tritongen.loadtest.spec import LoadSpec
from tritongen.loadtest.streaming import is_decoupled
from tritongen.loadtest.sweep_rules import Bisection, FirstOf, LatencyLimit, StableOnly
from tritongen.perfanalyzer.options import PaOptions

COUNT_GRID_S = 0.5
"""With count windows: the time windows they are built from."""
COUNT_CAP_S = 300.0
"""With count windows: the longest a level is measured while it is not stable."""


@dataclass(frozen=True)
class ModelFacts:
    """What the sweep needs to know of the model before it sends anything."""

    interface: ModelInterface
    sequence: bool
    decoupled: bool


@dataclass
class Sweep:
    """The levels measured, in order, and how the sweep ended."""

    options: PaOptions
    facts: ModelFacts
    report: LoadTestReport
    over_threshold: RunResult | None = None
    """The level whose latency went over ``-l`` (the sweep stopped after it)."""
    unstable: RunResult | None = None
    """The level that did not stabilise within ``-r`` windows (the sweep stopped after it, as
    perf_analyzer stops)."""
    notes: list[str] = field(default_factory=list)
    best: float | None = None
    """``--binary-search``: the highest level whose latency was within ``-l`` (None: not even the start)."""


def model_facts(options: PaOptions, endpoint: TritonEndpoint) -> ModelFacts:
    """The model's inputs, scheduler and transaction policy, with the options checked against them.

    Raises:
        ConfigError: ``-x`` names a version the server does not have ready, ``--streaming``
            on a model that does not stream, a request rate on a sequence model.
        ServerError: the server or the model cannot be reached.
    """
    interface = endpoint.interface(options.model)
    config = endpoint.model_config(options.model)
    facts = ModelFacts(interface, is_sequence_model(config), is_decoupled(config))
    if options.version:
        _check_version(options, endpoint)
    if options.streaming and not facts.decoupled:
        raise ConfigError(
            f"--streaming: '{options.model}' is not decoupled, and tritongen streams only decoupled models",
            "drop --streaming (its requests go as plain calls)",
        )
    if not facts.sequence and (options.sequence_length is not None or options.sequence_id_range is not None):
        raise ConfigError(
            f"--sequence-length and --sequence-id-range: '{options.model}' is not a sequence model",
            "drop them (they apply to models with sequence_batching)",
        )
    if facts.sequence and options.request_rate is not None:
        raise ConfigError(
            f"--request-rate-range with the sequence model '{options.model}': tritongen drives sequences "
            "in a closed loop (N in flight)",
            "give --concurrency-range (sequences in flight)",
        )
    return facts


def _check_version(options: PaOptions, endpoint: TritonEndpoint) -> None:
    versions = sorted(endpoint.ready_versions(options.model), key=lambda v: (len(v), v))
    if options.version not in versions:
        raise ConfigError(
            f"-x {options.version}: '{options.model}' has no version {options.version} ready "
            f"(ready: {', '.join(versions) or 'none'})",
            "give one of the ready versions, or serve that one (version_policy in config.pbtxt)",
        )


def sweep_spec(options: PaOptions, facts: ModelFacts, input_data: Path | str) -> LoadSpec:
    """The load test of the whole sweep, perf_analyzer's measurement in tritongen's terms.

    Every level in order; ``-l`` and perf_analyzer's stop at a level that is not stable are
    rules that end the sweep (:mod:`tritongen.loadtest.sweep_rules`).
    """
    count = options.count_windows
    window_s = COUNT_GRID_S if count else options.measurement_ms / 1000
    values = {}
    if options.string_data is not None:
        values = {s.name: options.string_data for s in facts.interface.inputs if s.datatype == "BYTES"}
    limit = (LatencyLimit(options.latency_threshold_ms),) if options.latency_threshold_ms else ()
    bounded = options.mode == "rate" and not options.asynchronous
    return LoadSpec(
        model=options.model,
        model_version=options.version,
        address=options.address,
        mode=options.mode,  # type: ignore[arg-type]
        levels=tuple(options.levels()),
        # perf_analyzer reads --request-distribution only for a request rate (beside a concurrency: unread)
        arrival=options.distribution if options.mode == "rate" else "constant",  # type: ignore[arg-type]
        batch_size=options.batch_size,
        shapes=dict(options.shapes),
        input_data=input_data,  # type: ignore[arg-type]
        string_length=options.string_length,
        input_values=values,
        duration_s=window_s if count else STABILITY_WINDOWS * window_s,
        warmup_s=0.0,
        max_duration_s=COUNT_CAP_S if count else options.max_trials * window_s,
        window_s=window_s,
        metrics_interval_s=options.metrics_interval_ms / 1000,
        shared_memory=options.shared_memory,  # type: ignore[arg-type]
        output_shared_memory_size=options.output_shm_size,
        sequences=facts.sequence,
        sequence_length=options.sequence_length,
        sequence_id_range=options.sequence_id_range,
        stability_tolerance=options.stability_percentage / 100,
        stability_percentile=None if options.percentile is None else float(options.percentile),
        count_window_requests=options.request_count if count else 0,
        max_count_windows=options.max_trials,
        stop_at=FirstOf((*limit, StableOnly())),
        search=binary_search(options),
        processes=1 if bounded else None,
        max_inflight=options.max_threads if bounded else LoadSpec.max_inflight,
    )


def binary_search(options: PaOptions) -> Bisection | None:
    """``--binary-search`` over the range given, each level judged by ``-l``; None without it."""
    chosen = options.request_rate or options.concurrency
    if not options.binary_search or chosen is None:
        return None
    return Bisection(
        chosen.start,
        chosen.end,
        chosen.step,
        LatencyLimit(options.latency_threshold_ms),
        whole=options.mode == "concurrency",
    )


def run_sweep(
    options: PaOptions,
    facts: ModelFacts,
    progress: ProgressCallback | None = None,
    stop: threading.Event | None = None,
    on_level: Callable[[RunResult], None] | None = None,
) -> Sweep:
    """Every level in order, in one load test, until the last, ``-l``, an unstable level or a failed run.

    Raises:
        TritongenError: the settings do not fit the model, or the server cannot be reached at the start.
    """
    with input_source(options, facts.interface) as source:
        spec = sweep_spec(options, facts, source)
        report = run_load_test(spec, progress=progress, stop=stop, on_run=on_level)
    sweep = Sweep(options, facts, report)
    search = spec.search
    if isinstance(search, Bisection):
        judged = [(_level(run), search.passes(run, f"level {_level(run):g}")) for run in report.runs]
        sweep.best = search.best(judged)
    stopped, report.sweep_stop = report.sweep_stop, None  # perf_analyzer's report says it its own way
    if stopped is not None and stopped.rule == LatencyLimit.rule:
        sweep.over_threshold = report.runs[-1]
    elif stopped is not None:
        sweep.unstable = report.runs[-1]
    return sweep


def _level(run: RunResult) -> float:
    return float((run.concurrency if run.mode == "concurrency" else run.target_rate) or 0)


@contextmanager
def input_source(options: PaOptions, interface: ModelInterface) -> Iterator[Path | str]:
    """``--input-data`` as tritongen's load test takes it (``zero`` is ``zeros``).

    A directory of raw files (one per input, named after it) becomes an ``.npz`` for as long
    as the sweep runs.

    Raises:
        ConfigError: a directory that lacks an input's file, or a file of the wrong size.
    """
    given = options.input_data
    if given in ("zero", "zeros"):
        yield "zeros"
        return
    if given == "random":
        yield "random"
        return
    path = Path(given)
    if not path.is_dir():
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="tritongen-pa-") as tmp:
        target = Path(tmp) / "inputs.npz"
        np.savez(target, **directory_arrays(path, interface, options))
        yield target


def directory_arrays(folder: Path, interface: ModelInterface, options: PaOptions) -> dict[str, Any]:
    """perf_analyzer's input directory as arrays, one per input.

    Each input's file holds one request's raw row-major values (strings for a BYTES input,
    one per line); a batching model's rows repeat it ``-b`` times.

    Raises:
        ConfigError: a missing file, or values that do not fill the input's shape.
    """
    arrays: dict[str, Any] = {}
    for spec in interface.inputs:
        file = folder / spec.name
        if not file.is_file():
            if spec.optional:
                continue
            raise ConfigError(
                f"--input-data {folder}: there is no file '{spec.name}' for input '{spec.name}'",
                "give one file per input, named after it, with its raw values",
            )
        dims = options.shapes.get(spec.name) or tuple(1 if d == -1 else d for d in spec.dims)
        if spec.datatype == "BYTES":
            values: Any = np.array(file.read_text(encoding="utf-8").splitlines(), dtype=object)
        else:
            values = np.fromfile(file, dtype=np.dtype(numpy_dtype(spec.datatype)))
        if values.size != int(np.prod(dims)):
            raise ConfigError(
                f"--input-data {folder}: file '{spec.name}' holds {values.size} values, "
                f"but input '{spec.name}' takes {int(np.prod(dims))} ({list(dims)})",
                "write one request's values, row-major, or give the shape with --shape NAME:DIMS",
            )
        row = values.reshape(dims)
        if spec.datatype == "BYTES":
            row = np.array(row.tolist(), dtype=np.str_)
        arrays[spec.name] = np.stack([row] * options.batch_size) if interface.batched else row
    return arrays
