"""The load options of ``loadtest``, ``tune`` and ``compare``: declared once, taken as groups."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Annotated

import typer

from tritongen.cli.options.engine import Atol, Rtol
from tritongen.cli.options.groups import reworded
from tritongen.cli.options.parsing import parse_int_list, parse_other_cpu_limit, sequence_levels
from tritongen.cli.options.shared import Arrival, MetricsUrl, Protocol, ProtocolChoice, Shapes
from tritongen.client.address import DEFAULT_PORTS, ServerAddress
from tritongen.client.input_data import InputPlan, parse_input_data, parse_input_values
from tritongen.client.inputs import DEFAULT_STRING_LENGTH, parse_shape_overrides
from tritongen.client.validation_data import DEFAULT_ATOL, DEFAULT_RTOL
from tritongen.errors import ConfigError
from tritongen.io.loadgen_shared import AUTO_KIND
from tritongen.loadtest.arrivals import parse_arrival
from tritongen.loadtest.distributed import DEFAULT_PORT, Distributed
from tritongen.loadtest.kinds.registry import kind_names
from tritongen.loadtest.llm.load import LlmLoad
from tritongen.loadtest.locust_process import WEB_HOST
from tritongen.loadtest.sequences import parse_id_range
from tritongen.loadtest.shapes.base import LoadShape, measured_cap
from tritongen.loadtest.spec import LoadSpec, parse_duration
from tritongen.loadtest.sweep_rules import SweepRule
from tritongen.server.affinity import parse_cpus
from tritongen.server.ports import check_port_free, pick_free_ports

Cpus = Annotated[
    str | None,
    typer.Option(
        "--cpus",
        help="server=LIST,load=LIST: the server's processes and the load generator's on cores of "
        "their own, e.g. server=0-5,load=6-7 (a server on this machine; default: not pinned).",
    ),
]

MaxDuration = Annotated[
    str | None,
    typer.Option(
        "--max-duration",
        help="Cap while waiting for stability (default 3 × duration).",
    ),
]
MeasurementWindow = Annotated[
    str | None,
    typer.Option("--window", help="Measurement window (default duration/6, 1-5 s)."),
]
RequestTimeout = Annotated[
    str,
    typer.Option(
        "--request-timeout",
        "--timeout",
        help="A request without its response (streaming: its final response) after this long "
        "counts as a timeout error; a model that answers none within it is named, e.g. 10s.",
    ),
]

OtherCpuLimit = Annotated[
    str,
    typer.Option(
        "--other-cpu-limit",
        help="Flag a run (console, JSON other_cpu, CSV, HTML) when processes other than tritongen, the "
        "server and the load generator used more than this share of one core, on average or in any "
        "second, e.g. 25%.",
    ),
]


class SharedMemoryChoice(str, Enum):
    """How the tensors of a load test travel."""

    none = "none"
    system = "system"


def _validation(alias: object, help: str) -> typer.models.ParameterInfo:
    """The tolerance option ``alias`` worded for the check of load-test responses, in the load options."""
    info = reworded(alias, help)
    info.rich_help_panel = None
    return info


@dataclass(frozen=True)
class LoadFlags:
    """What load each run applies and for how long."""

    concurrency: Annotated[
        str | None,
        typer.Option(
            "--concurrency", help="Closed loop: in-flight requests per run, e.g. 1,8,32.", show_default=False
        ),
    ] = None
    rate: Annotated[
        str | None,
        typer.Option("--rate", help="Open loop: requests/s per run, e.g. 500,1000."),
    ] = None
    batch_size: Annotated[int, typer.Option("--batch-size", help="Batch size of each request.", min=1)] = 1
    shapes: Shapes = None
    duration: Annotated[str, typer.Option("--duration", help="Measured time of each load run, e.g. 30s.")] = (
        "30s"
    )
    warmup: Annotated[
        str, typer.Option("--warmup", help="Load before measuring, excluded from the figures.")
    ] = "5s"
    protocol: Annotated[ProtocolChoice, reworded(Protocol, "Load-test protocol: http or grpc.")] = (
        ProtocolChoice.http
    )
    seed: Annotated[int, typer.Option("--seed", help="Seed of the random inputs.")] = 0
    input_data: Annotated[
        str,
        typer.Option(
            "--input-data",
            help="random, zeros, a .json in perf_analyzer's input-data format (its entries sent "
            "round-robin), or an .npz with one array per input (strings for BYTES inputs).",
        ),
    ] = "random"
    string_length: Annotated[
        int, typer.Option("--string-length", help="Bytes per element of random BYTES (string) inputs.")
    ] = DEFAULT_STRING_LENGTH
    input_values: Annotated[
        list[str] | None,
        typer.Option(
            "--input-value",
            help="NAME=VALUE: one input fixed in every request, a string for BYTES inputs (e.g. the "
            "model a BLS model calls: MODEL_NAME=mlp_onnx), else a number (repeatable).",
        ),
    ] = None
    atol: Annotated[
        float | None,
        _validation(
            Atol,
            "Responses are checked against the expected outputs of --input-data (validation_data; "
            "expected:NAME in an .npz): float outputs agree within atol + rtol × |expected|, other "
            f"types exactly. Absolute tolerance (default {DEFAULT_ATOL:g}).",
        ),
    ] = None
    rtol: Annotated[
        float | None,
        _validation(Rtol, f"Relative tolerance of the responses' check (default {DEFAULT_RTOL:g})."),
    ] = None
    shared_memory: Annotated[
        SharedMemoryChoice,
        typer.Option(
            "--shared-memory",
            help="system: inputs and outputs pass through system shared memory registered with the "
            "server (a server on this host), like perf_analyzer's option; none: inside the requests.",
        ),
    ] = SharedMemoryChoice.none
    output_shared_memory_size: Annotated[
        int | None,
        typer.Option(
            "--output-shared-memory-size",
            help="Shared-memory bytes of each output whose size the model leaves open (dynamic dims, "
            "strings); the others are sized from the model.",
            min=1,
        ),
    ] = None
    sequences: Annotated[
        str | None,
        typer.Option(
            "--sequences",
            help="Sequence model: sequences in flight per run, e.g. 1,4,16 (its closed loop, "
            "instead of --concurrency).",
        ),
    ] = None
    sequence_length: Annotated[
        int | None,
        typer.Option(
            "--sequence-length",
            help="Requests per sequence (default: one per step of the input data when it has several, "
            "else 20).",
        ),
    ] = None
    sequence_id_range: Annotated[
        str | None,
        typer.Option(
            "--sequence-id-range",
            help="Correlation IDs START:END, END excluded (default: from each load process's id).",
        ),
    ] = None
    load_kind: Annotated[
        str,
        typer.Option(
            "--load-kind",
            help=f"What the requests are, one of {', '.join(kind_names())}: auto is what the options and "
            "the model call for; a kind by name takes only its own options.",
        ),
    ] = AUTO_KIND

    def input_plan(self) -> InputPlan:
        """The data options (``--input-data``, ``--string-length``, ``--input-value``), parsed.

        Raises:
            ConfigError: an unknown ``--input-data`` kind, a negative ``--string-length``, or a
                malformed ``--input-value``.
        """
        if self.string_length < 0:
            raise ConfigError(f"--string-length {self.string_length} is negative", "give 0 or more bytes")
        return InputPlan(
            source=parse_input_data(self.input_data),
            string_length=self.string_length,
            values=parse_input_values(self.input_values or []),
        )

    def duration_s(self) -> float:
        """``--duration`` in seconds."""
        return parse_duration(self.duration, "--duration")

    def warmup_s(self) -> float:
        """``--warmup`` in seconds."""
        return parse_duration(self.warmup, "--warmup")

    def concurrency_levels(self, default: str = "1") -> tuple[int, ...]:
        """``--concurrency`` as levels (``default`` when not given)."""
        return parse_int_list(self.concurrency or default, "--concurrency") or (1,)

    def levels(self) -> tuple[str, tuple[float, ...]]:
        """The loop (``concurrency`` or ``rate``) and its levels.

        Raises:
            ConfigError: both loops, or a malformed ``--rate``.
        """
        if self.sequences:
            return "concurrency", sequence_levels(self.sequences, self.concurrency, self.rate)
        if self.concurrency and self.rate:
            raise ConfigError("--concurrency and --rate exclude each other", "use one: closed or open loop")
        if not self.rate:
            return "concurrency", tuple(float(v) for v in self.concurrency_levels())
        if ".." in self.rate:
            raise ConfigError(
                f"--rate {self.rate}: a ramp is loadtest's and tune's", "give --rate levels, e.g. 500,1000"
            )
        try:
            return "rate", tuple(float(v) for v in self.rate.split(",") if v.strip())
        except ValueError as e:
            raise ConfigError(f"--rate {self.rate!r} is not a list of numbers", "e.g. --rate 500,1000") from e


@dataclass(frozen=True)
class RunFlags:
    """How ``loadtest`` drives and judges each run (``tune`` takes its window and stability cap)."""

    arrival: Arrival = "constant"
    max_duration: MaxDuration = None
    window: MeasurementWindow = None
    timeslice: Annotated[
        str | None,
        typer.Option(
            "--timeslice",
            help="Also report each run's figures per slice of this long (e.g. 10s; a whole number of "
            "windows): throughput, P50-P99, errors (TTFT and ITL for an LLM load) over time.",
        ),
    ] = None
    request_timeout: RequestTimeout = "30s"
    other_cpu_limit: OtherCpuLimit = "25%"
    processes: Annotated[
        str,
        typer.Option(
            "--processes", help="Locust worker processes, or auto (enough not to be the bottleneck)."
        ),
    ] = "auto"
    metrics_url: MetricsUrl = None
    cpus: Cpus = None
    stop_at_saturation: Annotated[
        bool,
        typer.Option(
            "--stop-at-saturation",
            help="End a sweep at the first level whose P99 misses --slo-p99-ms, or whose throughput "
            "no longer rises beyond the noise while its P99 rises; the higher levels are not measured.",
        ),
    ] = False
    mix: Annotated[
        str | None,
        typer.Option(
            "--mix",
            help="Several models at once (MODEL a,b): each one's share of the load, e.g. 3:1 "
            "(default: equal shares).",
        ),
    ] = None
    master: Annotated[
        bool,
        typer.Option(
            "--master",
            help="Distributed load: each run is a Locust master on this machine that waits for "
            "--workers load workers (`tritongen loadtest --worker --master-host THIS_HOST`, here or on "
            "other machines) and merges their histograms.",
        ),
    ] = False
    workers: Annotated[
        int | None,
        typer.Option("--workers", help="With --master: load workers each run waits for."),
    ] = None
    worker: Annotated[
        bool,
        typer.Option(
            "--worker",
            help="Be a load worker of a `loadtest --master` elsewhere (no MODEL, no load options): join "
            "each of its runs until no master appears for --worker-wait.",
        ),
    ] = False
    master_host: Annotated[
        str | None,
        typer.Option("--master-host", help="With --worker: the master's host."),
    ] = None
    master_port: Annotated[
        int, typer.Option("--master-port", help="The master's port (--master binds it, --worker joins it).")
    ] = DEFAULT_PORT
    worker_wait: Annotated[
        str,
        typer.Option(
            "--worker-wait",
            help="--master: how long each run waits for its workers; --worker: how long to wait for "
            "the next master before stopping.",
        ),
    ] = "60s"
    web: Annotated[
        bool,
        typer.Option(
            "--web",
            help="Watch each run live in Locust's web UI on 127.0.0.1 (its own figures, whole ms); the "
            "results are written as usual.",
        ),
    ] = False
    web_port: Annotated[
        int | None,
        typer.Option(
            "--web-port",
            help="With --web: the web UI's port, kept for every run (default: a free one).",
            min=0,
            max=65535,
        ),
    ] = None

    def web_ui_port(self) -> int | None:
        """The port of Locust's web UI on 127.0.0.1 (None without ``--web``): given and free, or picked.

        Raises:
            ConfigError: ``--web-port`` without ``--web``, or ``--web`` with ``--master``.
            ServerError: the port is in use.
        """
        if not self.web:
            if self.web_port is not None:
                raise ConfigError("--web-port goes with --web", "add --web")
            return None
        if self.master:
            raise ConfigError(
                "--web does not go with --master: the workers' figures reach the master's own web UI "
                "only through Locust's reports",
                "drop --web, or watch a local run with --processes",
            )
        if not self.web_port:
            return pick_free_ports(WEB_HOST, 1)[0]
        check_port_free(WEB_HOST, self.web_port, "Locust web UI", "--web-port")
        return self.web_port

    def distributed(self) -> Distributed | None:
        """The ``--master`` settings (None without ``--master``).

        Raises:
            ConfigError: ``--workers`` or ``--master-host`` without their mode, or ``--master``
                with ``--processes`` or ``--mix``. (``--worker`` never gets here: it is a mode of
                its own, which refuses ``--master``.)
        """
        if not self.master:
            if self.workers is not None:
                raise ConfigError("--workers goes with --master", "add --master, or use --processes")
            if self.master_host is not None and not self.worker:
                raise ConfigError("--master-host goes with --worker", "add --worker")
            return None
        if self.processes != "auto":
            raise ConfigError("--master and --processes exclude each other", "drop --processes")
        if self.mix is not None:
            raise ConfigError("--master does not run --mix loads yet", "load one model with --master")
        if self.master_host is not None:
            raise ConfigError("--master binds every address; --master-host is the workers' option", "drop it")
        wait_s = parse_duration(self.worker_wait, "--worker-wait")
        workers = 1 if self.workers is None else self.workers
        return Distributed(workers=workers, port=self.master_port, wait_s=wait_s)


def load_spec(
    model: str,
    url: str | None,
    load: LoadFlags,
    run: RunFlags,
    rounds: int = 1,
    llm: LlmLoad | None = None,
    stop_at: SweepRule | None = None,
    shape: LoadShape | None = None,
) -> LoadSpec:
    """The load spec of ``loadtest`` and ``tune`` from their option groups (checked as it is made).

    Raises:
        ConfigError: contradictory or malformed values.
    """
    plan = load.input_plan()
    mode, levels = _levels(load, llm, shape)
    arrival, arrival_cv = parse_arrival(run.arrival)
    if run.processes != "auto" and not run.processes.isdigit():
        raise ConfigError(f"--processes {run.processes!r} is not a number", "use a count or auto")
    return LoadSpec(
        model=model,
        address=_address(url, load.protocol.value, run.metrics_url, llm is not None and llm.openai),
        mode=mode,  # type: ignore[arg-type]
        levels=levels,
        arrival=arrival,  # type: ignore[arg-type]
        arrival_cv=arrival_cv,
        batch_size=load.batch_size,
        shapes=parse_shape_overrides(load.shapes or []),
        input_data=plan.source,
        string_length=plan.string_length,
        input_values=dict(plan.values),
        atol=DEFAULT_ATOL if load.atol is None else load.atol,
        rtol=DEFAULT_RTOL if load.rtol is None else load.rtol,
        duration_s=load.duration_s() if shape is None else shape.duration_s,
        warmup_s=load.warmup_s(),
        max_duration_s=measured_cap(
            parse_duration(run.max_duration, "--max-duration") if run.max_duration else None, shape
        ),
        window_s=parse_duration(run.window, "--window") if run.window else None,
        timeslice_s=parse_duration(run.timeslice, "--timeslice") if run.timeslice else None,
        processes=None if run.processes == "auto" else int(run.processes),
        request_timeout_s=parse_duration(run.request_timeout, "--request-timeout"),
        other_cpu_limit=parse_other_cpu_limit(run.other_cpu_limit),
        seed=load.seed,
        rounds=rounds,
        shared_memory=load.shared_memory.value,
        output_shared_memory_size=load.output_shared_memory_size,
        sequences=bool(load.sequences),
        sequence_length=load.sequence_length,
        sequence_id_range=parse_id_range(load.sequence_id_range) if load.sequence_id_range else None,
        distributed=run.distributed(),
        web_port=run.web_ui_port(),
        cpus=parse_cpus(run.cpus) if run.cpus else None,
        llm=llm,
        kind=load.load_kind,
        stop_at=stop_at,
        shape=shape,
    )


def _levels(load: LoadFlags, llm: LlmLoad | None, shape: LoadShape | None) -> tuple[str, tuple[float, ...]]:
    """The loop and its levels: a shape's mean rate, sessions in flight, or ``--concurrency``/``--rate``.

    Raises:
        ConfigError: ``--sessions`` with another loop or a shape, or a malformed level list.
    """
    if llm is not None and llm.sessions:
        clash = next(
            (flag for flag, given in (("--concurrency", load.concurrency), ("--rate", load.rate)) if given),
            None,
        )
        if clash is not None or shape is not None:
            what = clash or shape.option  # type: ignore[union-attr]
            raise ConfigError(
                f"--sessions is the load's level (sessions in flight): {what} does not apply", f"drop {what}"
            )
        return "concurrency", tuple(float(n) for n in llm.sessions)
    if shape is not None:
        return "rate", (float(f"{shape.mean_rate:.3g}"),)
    return load.levels()


def _address(url: str | None, protocol: str, metrics_url: str | None, openai: bool) -> ServerAddress:
    """The server under load (an OpenAI-compatible one's base URL), the protocol's port by default."""
    given = url or f"localhost:{DEFAULT_PORTS[protocol]}"
    return (
        ServerAddress.openai(given, metrics_url)
        if openai
        else ServerAddress.parse(given, protocol, metrics_url)
    )
