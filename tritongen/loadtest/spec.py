"""What a load test is asked to do."""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from tritongen.client.address import Protocol, ServerAddress
from tritongen.client.inputs import DEFAULT_STRING_LENGTH
from tritongen.client.validation_data import DEFAULT_ATOL, DEFAULT_RTOL
from tritongen.errors import ConfigError
from tritongen.intervals import check_rounds
from tritongen.io.loadgen_shared import AUTO_KIND, KINDS, STABILITY_TOLERANCE
from tritongen.loadtest.distributed import Distributed
from tritongen.loadtest.llm.load import LlmLoad
from tritongen.loadtest.sequences import check_sequence_settings
from tritongen.loadtest.shapes.base import LoadShape
from tritongen.loadtest.shared_memory import SharedMemory, check_shared_memory
from tritongen.loadtest.sweep_rules import LevelSearch, SweepRule
from tritongen.loadtest.timeslices import slice_windows
from tritongen.metrics.other_cpu import DEFAULT_LIMIT_CORES
from tritongen.server.affinity import CpuPlan

Mode = Literal["concurrency", "rate"]
Arrival = Literal["constant", "poisson", "gamma"]
InputData = Literal["random", "zeros"]

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


def parse_duration(text: str, option: str) -> float:
    """``"30s"``, ``"2m"``, ``"500ms"`` or ``"10"`` (seconds) -> seconds.

    Raises:
        ConfigError: the text is not a duration.
    """
    match = _DURATION.match(text)
    if not match:
        raise ConfigError(f"{option} {text!r} is not a duration", "write e.g. 30s, 2m or 500ms")
    return float(match.group(1)) * _UNITS[match.group(2)]


@dataclass(frozen=True)
class LoadSpec:
    """A load test: one run per level (concurrency or request rate)."""

    model: str
    address: ServerAddress
    model_version: str = ""
    """The model version every request goes to (empty: the server's choice, its newest)."""
    """The server, its protocol and its metrics endpoint."""
    mode: Mode = "concurrency"
    levels: tuple[float, ...] = (1,)
    arrival: Arrival = "constant"
    arrival_cv: float | None = None
    """``--arrival gamma:CV``: the coefficient of variation of the gaps between sends."""
    batch_size: int = 1
    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    input_data: InputData | Path = "random"
    """``random``, ``zeros``, or a ``.json`` (perf_analyzer's input-data format) or ``.npz`` file."""
    string_length: int = DEFAULT_STRING_LENGTH
    """Bytes per element of random BYTES inputs."""
    input_values: dict[str, str] = field(default_factory=dict)
    """Inputs fixed to one value in every request (``--input-value NAME=VALUE``)."""
    atol: float = DEFAULT_ATOL
    rtol: float = DEFAULT_RTOL
    """Responses checked against the data's expected outputs: floats agree within
    ``atol + rtol * |expected|``."""
    duration_s: float = 30.0
    warmup_s: float = 5.0
    max_duration_s: float | None = None
    """Cap on the measured time while waiting for stability (default 3 × duration)."""
    window_s: float | None = None
    """Measurement window (default: duration / 6, between 1 and 5 s)."""
    processes: int | None = None
    """Locust worker processes; None = enough not to be the bottleneck."""
    metrics_interval_s: float = 1.0
    """How often the server's metrics are sampled."""
    max_inflight: int = 1024
    seed: int = 0
    rounds: int = 1
    """Each level is measured this many times, levels interleaved (1 2 3, 1 2 3, …)."""
    shared_memory: SharedMemory = "none"
    """``system``: inputs and outputs pass through system shared memory (a server on this host)."""
    output_shared_memory_size: int | None = None
    """Shared-memory bytes of an output whose size the metadata leaves open (dynamic dims, BYTES)."""
    request_timeout_s: float = 30.0
    """A request without its (final) response after this long counts as a ``timeout`` error."""
    end_when_all_fail: bool = True
    """End a level none of whose requests succeeds (after its warm-up, or at its first timeouts) with
    the server's first message; False measures it as any other (``--max-error-rate 1``)."""
    sequences: bool = False
    """A sequence model: each level is a number of sequences in flight (closed loop)."""
    sequence_length: int | None = None
    """Requests per sequence (None: one per step of the input data when it has several, else 20)."""
    sequence_id_range: tuple[int, int] | None = None
    """Correlation IDs from start to end (excluded); None: derived from each Locust process's id."""
    distributed: Distributed | None = None
    """Workers connect from elsewhere to a Locust master per run (``--master``); None: local processes."""
    web_port: int | None = None
    """Locust's web UI on 127.0.0.1 at this port for each run, started at once (None: headless)."""
    stability_tolerance: float = STABILITY_TOLERANCE
    """Stable: the last three windows agree within this fraction on throughput and latency."""
    stability_percentile: float | None = 99.0
    """The latency stability is judged on: this percentile of each window, or its mean (None)."""
    count_window_requests: int = 0
    """perf_analyzer's count windows: windows merged until each holds this many requests (0: time windows)."""
    max_count_windows: int = 10
    """With count windows: an unstable run ends after this many."""
    other_cpu_limit: float = DEFAULT_LIMIT_CORES
    """A run is flagged busy when other processes used more cores than this (on average or in a second)."""
    llm: LlmLoad | None = None
    """An LLM load (``--api``): prompts to a text model, token figures (None: tensors)."""
    cpus: CpuPlan | None = None
    """``--cpus``: the server's tree and the load processes on cores of their own (None: not pinned)."""
    kind: str = AUTO_KIND
    """``--load-kind``: the kind of load by name (:mod:`tritongen.loadtest.kinds`); ``auto``: the one
    the options and the model call for."""
    stop_at: SweepRule | None = None
    """Asked after each level of the first round: ``--stop-at-saturation``, perf_analyzer's ``-l``
    and its stop at an unstable level (None: every level is measured)."""
    search: LevelSearch | None = None
    """The first round's levels chosen one by one from the results before them (perf_analyzer's
    ``--binary-search``), instead of ``levels`` in order; later rounds measure the levels it chose."""
    server_trace: int | None = None
    """``--server-trace``: the server traces one request in this many, joined to the client's
    record (:mod:`.server_trace`); None: no trace."""
    wire: bool = False
    """``--wire``: the loopback traffic captured, each run checked against it (:mod:`.wire.check`)."""
    timeslice_s: float | None = None
    """``--timeslice``: each run's figures per slice of this many seconds too (:mod:`.timeslices`)."""
    shape: LoadShape | None = None
    """An open loop's sends laid out in time (a ramp, ``--stages``, ``--trace``: :mod:`.shapes`), replayed
    by one load process; its length is the measured time (None: a steady rate or concurrency)."""

    def __post_init__(self) -> None:
        """A spec is checked as it is made, once: what exists is legal (``replace`` makes a new one)."""
        self.check()

    @property
    def overlapping(self) -> bool:
        """Whether requests may be in flight together: an open loop, or a concurrency above 1."""
        return self.mode == "rate" or max(self.levels) > 1

    @property
    def protocol(self) -> Protocol:
        """What the requests go over (the address's)."""
        return self.address.protocol

    def check(self) -> None:
        """Reject impossible settings.

        Raises:
            ConfigError: a non-positive level, duration, window or process count.
        """
        if not self.levels:
            raise ConfigError("no load level given", "pass --concurrency 1,8,32 or --rate 500,1000")
        if any(level <= 0 for level in self.levels):
            what = "--concurrency" if self.mode == "concurrency" else "--rate"
            raise ConfigError(f"{what} levels must be positive", f"e.g. {what} 1,8,32")
        if self.mode == "concurrency" and any(level != int(level) for level in self.levels):
            raise ConfigError("--concurrency levels must be whole numbers", "e.g. --concurrency 1,8,32")
        if self.duration_s <= 0:
            raise ConfigError("--duration must be positive", "e.g. --duration 30s")
        if self.warmup_s < 0:
            raise ConfigError("--warmup must not be negative", "e.g. --warmup 5s")
        if self.processes is not None and self.processes < 1:
            raise ConfigError("--processes must be at least 1 (or auto)", "e.g. --processes auto")
        if self.window_s is not None and self.window_s <= 0:
            raise ConfigError("--window must be positive", "e.g. --window 2s")
        if self.request_timeout_s <= 0:
            raise ConfigError("--request-timeout must be positive", "e.g. --request-timeout 30s")
        if self.atol < 0 or self.rtol < 0:
            raise ConfigError("--atol and --rtol must not be negative", "e.g. --atol 1e-6 --rtol 1e-5")
        self._check_arrival()
        if self.shape is not None:
            _check_shape(self)
        if self.timeslice_s is not None:
            if self.timeslice_s <= 0:
                raise ConfigError("--timeslice must be positive", "e.g. --timeslice 10s")
            slice_windows(self.timeslice_s, self.effective_window_s)
        self._check_request_ids("--server-trace", self.server_trace is not None)
        self._check_request_ids("--wire", self.wire and self.llm is None)  # an LLM load: its streams
        if self.wire and self.llm is not None and not self.llm.stream:
            raise ConfigError(
                "--wire checks an LLM load's streams (OpenAI's, Triton's generate_stream, gRPC streams)",
                "drop --wire, or --no-stream",
            )
        if self.server_trace is not None and self.server_trace < 1:
            raise ConfigError("--trace-rate must be at least 1", "e.g. --trace-rate 1 (every request)")
        if self.wire and not self.address.on_this_machine:
            raise ConfigError(
                f"--wire captures this machine's loopback: the server at {self.address.url} is elsewhere",
                "run the load test on the server's machine, or drop --wire",
            )
        check_rounds(self.rounds)
        check_shared_memory(self.shared_memory, self.address, self.output_shared_memory_size)
        check_sequence_settings(self.sequences, self.mode, self.sequence_length, self.sequence_id_range)
        if self.distributed is not None:
            self.distributed.check(self.mode, self.levels, self.sequences, self.shared_memory)
        if self.llm is not None:
            self._check_llm(self.llm)
        if self.kind != AUTO_KIND and self.kind not in KINDS:
            raise ConfigError(
                f"--load-kind {self.kind!r} is unknown", f"use one of {', '.join((AUTO_KIND, *KINDS))}"
            )

    def _check_arrival(self) -> None:
        """Arrivals shape an open loop; a gamma schedule is one process's (see :mod:`.arrivals`)."""
        if self.arrival == "constant":
            return
        if self.mode != "rate":
            raise ConfigError(
                f"--arrival {self.arrival} applies to open-loop runs (--rate), not --concurrency",
                "give --rate levels, or leave --arrival out",
            )
        if self.arrival == "gamma" and ((self.processes or 1) > 1 or self.distributed is not None):
            raise ConfigError(
                "--arrival gamma sends from one process: several would average its bursts out",
                "leave --processes and --workers out (one process sends up to about 3,000 requests/s)",
            )

    def _check_request_ids(self, option: str, given: bool) -> None:
        """``option`` joins tensor requests sent from this machine by their ids (a server trace, the wire)."""
        if not given:
            return
        refused = [
            ("--master", self.distributed is not None, "load workers elsewhere keep their requests' times"),
            ("--api", self.llm is not None, "a language model's requests carry no request id here"),
            ("--sequences", self.sequences, "a sequence's requests carry no request id here"),
            ("--shared-memory system", self.shared_memory != "none", "its requests carry no request id"),
        ]
        for other, clash, why in refused:
            if clash:
                raise ConfigError(f"{option} does not apply with {other}: {why}", f"drop {option}")

    def _check_llm(self, llm: LlmLoad) -> None:
        """An LLM load goes over its API's protocol from local load processes, one prompt per request."""
        llm.check()
        if llm.openai and self.address.path:
            raise ConfigError(
                f"--url {self.address.base_url}: a base URL with a path ({self.address.path}) is not "
                "supported for OpenAI loads",
                "give http://HOST:PORT, the server's own address",
            )
        grpc = llm.api == "triton-grpc"
        if grpc != (self.protocol == "grpc"):
            raise ConfigError(
                f"--api {llm.api} goes over {'gRPC' if grpc else 'HTTP'}, not --protocol {self.protocol}",
                "add --protocol grpc (--url HOST:8001)" if grpc else "drop --protocol grpc",
            )
        clashes = [
            ("--shared-memory", self.shared_memory != "none"),
            ("--sequences", self.sequences),
            ("--master", self.distributed is not None),
            ("--batch-size", self.batch_size != 1),
        ]
        given = [name for name, clash in clashes if clash]
        if given:
            raise ConfigError(
                f"--api {llm.api} does not go with {', '.join(given)}: its prompts go one per request, "
                "from load processes on this machine",
                f"drop {', '.join(given)}",
            )

    @property
    def effective_window_s(self) -> float:
        """The measurement window in seconds (with ``--timeslice`` and no ``--window``: one dividing it)."""
        if self.window_s is not None:
            return self.window_s
        window = min(5.0, max(1.0, self.duration_s / 6))
        if self.shape is not None:  # its stages (and a timeslice) are whole numbers of windows
            return self.shape.window_s(window, self.timeslice_s)
        if self.timeslice_s is not None:
            return self.timeslice_s / math.ceil(self.timeslice_s / window - 1e-9)
        return window

    def run_seconds(self, longest: bool = False) -> float:
        """Roughly what one run costs: warm-up, measured time (``longest``: until stable), overhead."""
        measured = self.effective_max_duration_s if longest else self.duration_s
        return self.warmup_s + measured + RUN_OVERHEAD_S

    @property
    def effective_max_duration_s(self) -> float:
        """Longest measured time while waiting for stability."""
        if self.max_duration_s is not None:
            return max(self.max_duration_s, self.duration_s)
        return 3 * self.duration_s


def _check_shape(spec: LoadSpec) -> None:
    """Refuse what a shaped load cannot take.

    A shape's schedule is one timeline: one load process replays it (several would each send all
    of it), from this machine; its length is the run's measured time; each stage is a whole number
    of windows.

    Raises:
        ConfigError: a concurrency, several levels, processes or workers, sequences, a stability wait,
            a search, or a window that does not divide the stages.
    """
    shape = spec.shape
    assert shape is not None
    option = shape.option
    clashes = [
        ("--concurrency", spec.mode != "rate"),
        ("several --rate levels", len(spec.levels) != 1),
        ("--processes", (spec.processes or 1) > 1),
        ("--master", spec.distributed is not None),
        ("--sequences", spec.sequences),
        ("--find-max", spec.search is not None),
        ("--stop-at-saturation", spec.stop_at is not None),
        ("--max-duration", spec.max_duration_s not in (None, spec.duration_s)),
    ]
    given = [name for name, clash in clashes if clash]
    if given:
        raise ConfigError(
            f"{option} lays out its own sends from one load process for its own length: "
            f"{', '.join(given)} does not apply",
            f"drop {', '.join(given)}",
        )
    if not math.isclose(spec.duration_s, shape.duration_s, rel_tol=1e-9):
        raise ConfigError(
            f"{option} lasts {shape.duration_s:g} s: the measured time is its length, not --duration "
            f"{spec.duration_s:g}s",
            "drop --duration",
        )
    window = spec.effective_window_s
    for stage in shape.stages():
        count = stage.duration_s / window
        if not math.isclose(count, round(count), rel_tol=1e-6) or round(count) < 1:
            raise ConfigError(
                f"{option}: stage {stage.label} ({stage.duration_s:g} s) is not a whole number of "
                f"--window {window:g}s",
                "give a --window that divides every stage, or leave it out",
            )


RUN_OVERHEAD_S = 3.0
"""What one run costs beyond its warm-up and measured time: Locust's start, the partial first
window, the last window settling (measured here at 2.5-3.5 s on 2 cores)."""


def seconds_text(seconds: float) -> str:
    """A duration for a cost estimate: ``40 s`` or ``6 min``."""
    return f"{math.ceil(seconds / 60)} min" if seconds >= 90 else f"{seconds:.0f} s"


def auto_processes(mode: Mode, level: float, cpus: int | None = None) -> int:
    """Locust worker processes for a level: one per ~64 concurrent streams or ~3000 req/s, within the CPUs."""
    if cpus is None:
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    need = math.ceil(level / 64) if mode == "concurrency" else math.ceil(level / 3000)
    return max(1, min(need, cpus, int(level) if mode == "concurrency" else need))
