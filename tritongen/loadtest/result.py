"""Results of load runs and their versioned JSON and CSV forms."""

from __future__ import annotations

import csv
import io
import json
import platform
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from tritongen import __version__
from tritongen.intervals import DEFAULT_CONFIDENCE, Summary, summarise
from tritongen.io.files import write_output
from tritongen.io.loadgen_shared import LATENCY_KEYS, SCHEMA, SERVER_KEYS
from tritongen.loadtest.client_floor import ClientFloor
from tritongen.loadtest.run_readers import ServerModelFigures, ServerTimes, server_model_figures
from tritongen.loadtest.sequences import SEQUENCE_COLUMNS, sequence_figures
from tritongen.loadtest.sweep_stop import FoundMax, SweepStop
from tritongen.loadtest.validation import first_mismatch_text
from tritongen.metrics.prometheus import UtilisationSummary


@dataclass
class RunResult:
    """One run at one level."""

    mode: str
    concurrency: int | None
    target_rate: float | None
    batch_size: int
    duration_s: float
    requests: int
    errors: int
    errors_by_kind: dict[str, int]
    qps: float
    infer_per_s: float
    latency_us: dict[str, float] | None
    server_us: dict[str, float | None] | None
    avg_batch: float | None
    stable: bool
    gpu: dict[str, Any] | None
    """``util_mean``, ``util_max`` (0..1), ``mem_max_bytes``, ``source`` (``triton``: the metrics
    endpoint, DCGM; ``nvml``), ``memory_scope`` (``device`` or ``server-processes``), ``devices``
    (GPU names, from NVML), and ``by_uuid`` where the metrics endpoint reported GPUs: each GPU's
    ``util_mean`` (0..1), ``power_mean_w``, ``mem_max_bytes`` and ``mem_total_bytes`` by UUID;
    ``None`` where no GPU figure was found."""
    cpu: dict[str, Any] | None
    """``util_mean``, ``util_max``, ``mem_max_bytes``, ``source`` (``triton``)."""
    status: str = "ok"
    """``ok``, ``aborted`` (server gone, stopped early) or ``interrupted`` (Ctrl-C)."""
    reason: str | None = None
    processes: int = 1
    achieved_rate: float | None = None
    """Open loop: requests actually sent per second."""
    arrival_cv: float | None = None
    """Open loop: the coefficient of variation of the gaps between the sends that left on schedule
    (asked: 0 constant, 1 Poisson, a gamma's own; see loadtest/arrivals.py)."""
    late_sends: int = 0
    """Open loop: sends the generator itself sent more than 1 ms after their scheduled time."""
    max_send_lag_us: float = 0.0
    held_back_sends: int = 0
    """Open loop: sends held back because the requests in flight had reached the cap; each went out as
    soon as one finished, its latency from its scheduled time (those waiting at the end have none)."""
    max_hold_us: float = 0.0
    """Open loop: the longest a held-back send waited for a free slot."""
    warnings: list[str] = field(default_factory=list)
    error_messages: dict[str, str] = field(default_factory=dict)
    """The first message of each error kind of the run, warm-up included (the server's text)."""
    windows: list[dict[str, float | None]] = field(default_factory=list)
    round: int = 1
    """Which round of its level this run is (levels are measured round-robin)."""
    models: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Several models at once (``--mix``): each model's own figures by name: ``share`` (its
    fraction of the load), ``concurrency`` or ``target_rate`` (its part of the level),
    ``requests``, ``errors``, ``qps``, ``infer_per_s``, ``latency_us``, ``server_us``,
    ``avg_batch``, ``stable``; the run's own figures are the union's. Empty for one model."""
    server_models: dict[str, dict[str, float | int | str | None]] = field(default_factory=dict)
    """The server's figures of every model the measured requests touched, by model name:
    ``queue_us``, ``compute_input_us``, ``compute_infer_us``, ``compute_output_us`` (µs per
    request), ``executions``, ``inferences``, ``requests``, ``avg_batch``, and ``parent``, the
    model it sits under in the tree (``None`` for the top model)."""
    latencies_us: dict[str, dict[str, float]] = field(default_factory=dict)
    """Further latencies by name, each P50…P99.9, mean and max in µs (streaming: ``first_response``,
    ``between_responses``; sequences: ``sequence``; plain HTTP: ``kernel``, see client_overhead_us)."""
    counts: dict[str, int] = field(default_factory=dict)
    """Further counters over the measured time by name (streaming: ``responses``)."""
    streaming: bool = False
    """A decoupled model over gRPC streams: ``latency_us`` is each request's total time (send to
    final response)."""
    responses_per_s: float | None = None
    """Streaming: responses with outputs received per second (the final flag alone not counted)."""
    responses_per_request: float | None = None
    """Streaming: mean responses with outputs per request that finished without error."""
    sequences_per_s: float | None = None
    """Sequence model: sequences finished per second (``counts``: ``sequences`` finished,
    ``sequence_requests`` their requests, ``sequence_errors`` sequences a failed request ended;
    ``latencies_us``: ``sequence``, from a sequence's first send to its last response)."""
    requests_per_sequence: float | None = None
    """Sequence model: mean requests per finished sequence."""
    other_cpu: float | None = None
    """Cores other processes on this machine used during the measured time, on average (outside the
    trees of tritongen, the server and the load generator); None where it was not sampled."""
    other_cpu_max: float | None = None
    """The most cores other processes used in any one second of the measured time."""
    busy: bool = False
    """Other processes used more than the limit (``--other-cpu-limit``), on average or in a second."""
    client_us: dict[str, float] | None = None
    """Plain HTTP: the mean time of a successful request's parts on the client, ``send`` (writing
    it), ``wait`` (until the response's first bytes) and ``recv`` (reading the rest), in µs;
    None where the transport does not split them (gRPC, streams, shared memory)."""
    client_overhead_us: dict[str, float] | None = None
    """Plain HTTP: the client's own time in its latency at P50, P90, P99, P999 (µs): the latency less
    ``latencies_us["kernel"]``, the latency up to the kernel's receipt of the response's last bytes
    (the socket's receive timestamp); None where the kernel did not stamp every response."""
    latency_stddev_us: float | None = None  # of the requests' latency (µs), None when none succeeded
    stability_latency_us: float | None = None
    """The run's latency on the figure its stability was judged on (P99 by default; the mean or
    another percentile where the load asked, e.g. ``tritongen perf-analyzer --percentile``)."""
    validation: dict[str, Any] | None = None
    """Responses checked against the data's expected outputs (``validation_data``), over the whole
    run, warm-up included: ``validated``, ``matched``, ``mismatched`` (the ``validation`` errors) and
    ``outputs``, per output ``mismatched`` and ``first`` (``entry``, ``element``, ``expected``,
    ``received``; None when all matched). ``None`` when the data has no expected outputs."""
    ttft_us: dict[str, float] | None = None
    """An LLM load: time to first token (send to the first output text), P50…P99.9, mean, max."""
    itl_us: dict[str, float] | None = None
    """An LLM load: every gap between two output events (an event may hold several tokens)."""
    tpot_us: dict[str, float] | None = None
    """An LLM load: time per output token after the first ((end − first token) / (tokens − 1))."""
    e2e_us: dict[str, float] | None = None
    """An LLM load: send to the answer's end (``latency_us``)."""
    output_tokens_per_s: float | None = None
    """An LLM load: output tokens received per second, all users together."""
    output_tokens_per_s_per_user: float | None = None
    goodput_per_s: float | None = None
    """An LLM load: requests per second that met every ``--slo`` limit (all of them without limits)."""
    output_token_source: str | None = None
    """An LLM load: ``usage`` (the server's count of output tokens), ``tokenizer`` (the answers'
    text counted with ``--tokenizer``: the server gave none), ``events`` (one per output event:
    neither) or ``mixed``."""
    llm_server: dict[str, Any] | None = None
    """An OpenAI-compatible load of a vLLM server: its ``/metrics`` over the measured span (see
    :mod:`tritongen.metrics.vllm`); None for other loads or servers."""
    server_trace: dict[str, Any] | None = None
    """``--server-trace``: the median and the slowest 1% requests' parts (:mod:`.server_trace`)."""
    wire: dict[str, Any] | None = None
    """``--wire``: the measured requests' latency on the client and on the wire (:mod:`.wire.check`)."""
    timeslices: list[dict[str, Any]] = field(default_factory=list)
    """``--timeslice``: the run's figures per slice of its measured time (:mod:`.timeslices`)."""
    schedule: dict[str, Any] | None = None
    """Open loop: how well the sends kept their schedule (:func:`~.timeslices.schedule_fidelity`): ``shape``,
    ``lateness_us`` (P50, P99, max), ``late_share`` (over 1 ms late), ``kept`` (lateness P99 within 10 ms)."""
    stages: list[dict[str, Any]] = field(default_factory=list)
    """A ramp or ``--stages``: the run's figures per stage, as ``timeslices`` with ``stage`` and ``rate``."""
    workers: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Distributed load (``--master``): each worker's part by id: ``requests``, ``errors``, ``ok``,
    ``lost`` (the master lost it mid-run), ``lost_at_s`` (when, from the run's start) and
    ``histogram`` (base64 of its HDR latency histogram in µs); empty for local processes."""

    def to_json(self) -> dict[str, Any]:
        """One run object of the ``tritongen.loadtest/1`` document (``error_messages``: where there are)."""
        data = asdict(self)
        for name in (
            "error_messages",
            "server_trace",
            "client_overhead_us",
            "wire",
            "timeslices",
            "schedule",
            "stages",
        ):
            if not data[name]:  # written where there are
                del data[name]
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunResult:
        """Read one run object (keys it does not know are ignored)."""
        return cls(**known_fields(cls, data))

    def gpu_summary(self) -> UtilisationSummary | None:
        """``gpu`` read: the GPU's utilisation and memory over the run, and where they came from."""
        return None if not self.gpu else UtilisationSummary.from_json(self.gpu)

    def gpus_by_uuid(self) -> dict[str, dict[str, float | int | None]]:
        """Each GPU the metrics endpoint reported over the run, by UUID (empty: none)."""
        return dict((self.gpu or {}).get("by_uuid") or {})

    def cpu_summary(self) -> UtilisationSummary | None:
        """``cpu`` read: the server's CPU utilisation and memory over the run."""
        return None if not self.cpu else UtilisationSummary.from_json(self.cpu)

    def server_times(self) -> ServerTimes:
        """``server_us`` read: the server's µs per request by phase (all ``None`` where not reported)."""
        return ServerTimes.from_json(self.server_us)

    def server_model_figures(self) -> dict[str, ServerModelFigures]:
        """``server_models`` read: the server's figures of each model the requests touched, in tree order."""
        return server_model_figures(self.server_models)

    def model_parts(self) -> dict[str, ModelPart]:
        """``models`` read: each model of a mixed run with its share, its figures as a run of its own."""
        whole = asdict(self)
        return {
            name: ModelPart(float(entry.get("share") or 0.0), RunResult.from_json({**whole, **entry}))
            for name, entry in self.models.items()
        }


@dataclass(frozen=True)
class ModelPart:
    """One model of a mixed run: its share of the load and its own figures (the run's where it has none)."""

    share: float
    run: RunResult


STREAMING_LATENCIES = ("first_response", "between_responses")
STREAMING_COLUMNS = ["streaming", "responses_per_s", "responses_per_request"] + [
    f"{name}_{key}_us" for name in STREAMING_LATENCIES for key in LATENCY_KEYS
]
"""CSV columns of a streaming run (empty for other runs)."""

LLM_LATENCIES = ("ttft", "itl", "tpot")
LLM_COLUMNS = [f"{name}_{key}_us" for name in LLM_LATENCIES for key in ("p50", "p90", "p99", "mean")] + [
    "output_tokens_per_s", "output_tokens_per_s_per_user", "goodput_per_s", "output_token_source",
]  # fmt: skip
"""CSV columns of an LLM run (empty for other runs)."""


def llm_cells(run: RunResult) -> dict[str, Any]:
    """A run's ``LLM_COLUMNS`` cells."""
    cells: dict[str, Any] = {}
    for name in LLM_LATENCIES:
        figures: dict[str, float] = getattr(run, f"{name}_us") or {}
        cells.update({f"{name}_{key}_us": figures.get(key) for key in ("p50", "p90", "p99", "mean")})
    return {
        **cells,
        "output_tokens_per_s": run.output_tokens_per_s,
        "output_tokens_per_s_per_user": run.output_tokens_per_s_per_user,
        "goodput_per_s": run.goodput_per_s,
        "output_token_source": run.output_token_source,
    }


def streaming_cells(run: RunResult) -> dict[str, Any]:
    """A run's ``STREAMING_COLUMNS`` cells."""
    cells: dict[str, Any] = {
        "streaming": run.streaming,
        "responses_per_s": None if run.responses_per_s is None else round(run.responses_per_s, 3),
        "responses_per_request": run.responses_per_request,
    }
    for name in STREAMING_LATENCIES:
        figures = run.latencies_us.get(name) or {}
        cells.update({f"{name}_{key}_us": figures.get(key) for key in LATENCY_KEYS})
    return cells


def known_fields(cls: type, data: dict[str, Any]) -> dict[str, Any]:
    """The entries of ``data`` that are fields of the dataclass ``cls`` (newer writers add keys)."""
    known = {f.name for f in fields(cls)}
    return {k: v for k, v in data.items() if k in known}


def run_level(run: RunResult) -> float:
    """The level a run was measured at: its concurrency or its target rate."""
    if run.mode == "concurrency":
        return float(run.concurrency or 0)
    return float(run.target_rate or 0.0)


@dataclass(frozen=True)
class LevelSummary:
    """One load level over its rounds: each deciding figure's median, interval and spread."""

    mode: str
    level: float
    rounds: int
    """Rounds measured without failure (the others are left out of the figures)."""
    infer_per_s: Summary | None
    qps: Summary | None
    latency_us: dict[str, Summary]
    """``p50`` … ``p999`` and ``mean``, each over rounds."""

    def to_json(self) -> dict[str, Any]:
        """``{"mode", "concurrency"|"target_rate", "rounds", "infer_per_s", "qps", "latency_us"}``."""
        return {
            "mode": self.mode,
            "concurrency" if self.mode == "concurrency" else "target_rate": (
                int(self.level) if self.mode == "concurrency" else self.level
            ),
            "rounds": self.rounds,
            "infer_per_s": None if self.infer_per_s is None else self.infer_per_s.to_json(),
            "qps": None if self.qps is None else self.qps.to_json(),
            "latency_us": {k: v.to_json() for k, v in self.latency_us.items()},
        }


def level_summaries(runs: list[RunResult], confidence: float = DEFAULT_CONFIDENCE) -> list[LevelSummary]:
    """Each level's figures over the rounds that finished without failure, levels in first-seen order."""
    order: list[float] = []
    by_level: dict[float, list[RunResult]] = {}
    for run in runs:
        level = run_level(run)
        if level not in by_level:
            order.append(level)
            by_level[level] = []
        if run.status == "ok":
            by_level[level].append(run)
    summaries = []
    for level in order:
        good = by_level[level]
        mode = good[0].mode if good else next(r.mode for r in runs if run_level(r) == level)
        latency: dict[str, Summary] = {}
        for key in ("p50", "p90", "p95", "p99", "p999", "mean"):
            found = summarise([r.latency_us[key] for r in good if r.latency_us], confidence)
            if found is not None:
                latency[key] = found
        summaries.append(
            LevelSummary(
                mode=mode,
                level=level,
                rounds=len(good),
                infer_per_s=summarise([r.infer_per_s for r in good], confidence),
                qps=summarise([r.qps for r in good], confidence),
                latency_us=latency,
            )
        )
    return summaries


@dataclass
class LoadTestReport:
    """All runs of one ``tritongen loadtest`` call."""

    model: str
    protocol: str
    url: str
    runs: list[RunResult] = field(default_factory=list)
    status: str = "ok"
    rounds: int = 1
    confidence: float = DEFAULT_CONFIDENCE
    shared_memory: str = "none"
    """How tensors passed: ``none`` (in the requests) or ``system`` (system shared memory)."""
    cpus: dict[str, list[int]] | None = None
    """``--cpus``: the cores of the server's tree and of the load processes (None: not pinned)."""
    sweep_stop: SweepStop | None = None
    """``--stop-at-saturation``: the level the sweep stopped at, the rule, and the levels left out."""
    find_max: FoundMax | None = None
    """``--find-max``: the highest level that met the SLO and the lowest that missed it."""
    client_floor: ClientFloor | None = None
    """``--calibrate``: the client's own floor at each level (the null kind's runs)."""
    tritongen_version: str = __version__
    """The version that measured it (a document read back keeps the one it was written with)."""
    host: dict[str, str] = field(default_factory=lambda: host_facts())
    """The load generator's machine and Python (``machine``, ``python``)."""

    def levels(self) -> list[LevelSummary]:
        """One summary per load level over its rounds, in the order the levels were asked."""
        return level_summaries(self.runs, self.confidence)

    def to_json(self) -> dict[str, Any]:
        """The ``tritongen.loadtest/1`` document (``levels`` over rounds; ``client_floor``: --calibrate)."""
        document = {
            "schema": SCHEMA,
            "tritongen_version": self.tritongen_version,
            "model": self.model,
            "protocol": self.protocol,
            "url": self.url,
            "status": self.status,
            "rounds": self.rounds,
            "confidence": self.confidence,
            "shared_memory": self.shared_memory,
            "cpus": self.cpus,
            "sweep_stop": None if self.sweep_stop is None else self.sweep_stop.to_json(),
            "client_floor": None if self.client_floor is None else self.client_floor.to_json(),
            "find_max": None if self.find_max is None else self.find_max.to_json(),
            "host": dict(self.host),
            "runs": [run.to_json() for run in self.runs],
            "levels": [level.to_json() for level in self.levels()],
        }
        for name in ("client_floor", "find_max"):  # written where there is one
            if document[name] is None:
                del document[name]
        return document

    @classmethod
    def from_json(cls, document: dict[str, Any]) -> LoadTestReport:
        """Read a ``tritongen.loadtest/1`` document (keys it does not know are ignored)."""
        return cls(
            model=str(document.get("model", "")),
            protocol=str(document.get("protocol", "http")),
            url=str(document.get("url", "")),
            runs=[RunResult.from_json(r) for r in document.get("runs", [])],
            status=str(document.get("status", "ok")),
            rounds=int(document.get("rounds", 1)),
            confidence=float(document.get("confidence", DEFAULT_CONFIDENCE)),
            shared_memory=str(document.get("shared_memory", "none")),
            cpus=document.get("cpus"),
            sweep_stop=SweepStop.from_json(document["sweep_stop"]) if document.get("sweep_stop") else None,
            client_floor=ClientFloor.from_json(floor) if (floor := document.get("client_floor")) else None,
            find_max=FoundMax.from_json(found) if (found := document.get("find_max")) else None,
            tritongen_version=str(document.get("tritongen_version", __version__)),
            host={str(k): str(v) for k, v in (document.get("host") or host_facts()).items()},
        )

    def write_json(self, path: Path) -> None:
        """Write the JSON document (atomically)."""
        write_output(path, json.dumps(self.to_json(), indent=2) + "\n")

    def write_csv(self, path: Path) -> None:
        """One row per run, flat columns with units in their names; a mixed run adds a row per model."""
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        for run in self.runs:
            writer.writerow({"model": self.model, **csv_cells(run)})
            for name, part in run.model_parts().items():
                writer.writerow({"model": name, **csv_cells(part.run)})
        write_output(path, buffer.getvalue())


CSV_COLUMNS = [
    "model", "mode", "concurrency", "target_rate", "round", "batch_size", "duration_s", "requests", "errors",
    "qps", "infer_per_s", "p50_us", "p90_us", "p95_us", "p99_us", "p999_us", "mean_us", "max_us",
    "queue_us", "compute_input_us", "compute_infer_us", "compute_output_us", "avg_batch", "stable",
    "gpu_util_mean", "gpu_util_max", "gpu_mem_max_bytes", "gpu_source", "cpu_util_mean", "cpu_util_max",
    "cpu_mem_max_bytes", "held_back_sends", "status", *STREAMING_COLUMNS, *SEQUENCE_COLUMNS,
    "validated", "mismatched", "first_mismatch", "other_cpu", "other_cpu_max", "busy", *LLM_COLUMNS,
]  # fmt: skip
"""The CSV's columns: the load test's (or one model's, in a mix) figures of one run."""


def gpu_source_text(source: str | None, memory_scope: str | None) -> str:
    """Where GPU figures came from, in words: ``from NVML, server processes`` or ``from Triton's metrics``."""
    if source != "nvml":
        return "from Triton's metrics"
    return "from NVML, " + ("server processes" if memory_scope == "server-processes" else "whole device")


def csv_cells(run: RunResult) -> dict[str, Any]:
    """A run's CSV cells, every column but ``model``."""
    latency = run.latency_us or {}
    server = run.server_times()
    gpu, cpu = run.gpu_summary(), run.cpu_summary()
    return {
        "mode": run.mode, "concurrency": run.concurrency, "target_rate": run.target_rate, "round": run.round,
        "batch_size": run.batch_size, "duration_s": round(run.duration_s, 3),
        "requests": run.requests, "errors": run.errors, "qps": round(run.qps, 3),
        "infer_per_s": round(run.infer_per_s, 3),
        **{f"{k}_us": latency.get(k) for k in LATENCY_KEYS},
        **{f"{k}_us": server.phase_us(k) for k in SERVER_KEYS},
        "avg_batch": run.avg_batch, "stable": run.stable,
        **utilisation_cells("gpu", gpu), "gpu_source": gpu.source if gpu else None,
        **utilisation_cells("cpu", cpu),
        "held_back_sends": run.held_back_sends, "status": run.status,
        **streaming_cells(run),
        **(sequence_figures(run.latencies_us, run.counts, run.duration_s) or {}),
        **validation_cells(run.validation),
        "other_cpu": run.other_cpu, "other_cpu_max": run.other_cpu_max, "busy": run.busy,
        **llm_cells(run),
    }  # fmt: skip


def utilisation_cells(prefix: str, figures: UtilisationSummary | None) -> dict[str, Any]:
    """``gpu_util_mean``, ``gpu_util_max``, ``gpu_mem_max_bytes`` (or ``cpu_…``); empty without figures."""
    if figures is None:
        return {f"{prefix}_util_mean": None, f"{prefix}_util_max": None, f"{prefix}_mem_max_bytes": None}
    return {
        f"{prefix}_util_mean": figures.util_mean,
        f"{prefix}_util_max": figures.util_max,
        f"{prefix}_mem_max_bytes": figures.mem_max_bytes,
    }


def host_facts() -> dict[str, str]:
    """The machine and Python of this process, as a document's ``host`` records them."""
    return {"machine": platform.machine(), "python": platform.python_version()}


def validation_cells(validation: dict[str, Any] | None) -> dict[str, Any]:
    """A run's validation columns (empty cells when its responses were not checked)."""
    if not validation:
        return {"validated": None, "mismatched": None, "first_mismatch": None}
    return {
        "validated": validation["validated"],
        "mismatched": validation["mismatched"],
        "first_mismatch": first_mismatch_text(validation) or None,
    }
