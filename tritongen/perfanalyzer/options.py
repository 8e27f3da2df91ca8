"""perf_analyzer's command line as it is: its options, their defaults, and what tritongen refuses.

The options are perf_analyzer's own names, meanings and defaults (``-m``, ``-u``, ``-i``,
``--concurrency-range``, ``-p``, ``-f`` …). Options it has and tritongen does not do are
refused in one line naming the option and, where there is one, the tritongen way; an
option neither knows is refused too: nothing is silently ignored.
"""

from __future__ import annotations

import argparse
import difflib
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tritongen.client.address import DEFAULT_PORTS, ServerAddress
from tritongen.errors import ConfigError

DEFAULT_MEASUREMENT_MS = 5000
DEFAULT_STABILITY_PERCENTAGE = 10.0
DEFAULT_MAX_TRIALS = 10
DEFAULT_REQUEST_COUNT = 50
DEFAULT_STRING_LENGTH = 128
DEFAULT_MAX_THREADS = 4
DEFAULT_METRICS_INTERVAL_MS = 1000
DEFAULT_OUTPUT_SHM_SIZE = 102400
OPEN_END_LEVELS = 4096
"""An open-ended range (END 0) stops at the latency limit, or after this many levels."""

UNSUPPORTED: dict[str, str] = {
    "--service-kind": "tritongen measures Triton servers only (drop --service-kind, or give triton)",
    "--triton-c-api": "use tritongen loadtest MODEL --serve REPO (the embedded server)",
    "--model-repository": "use tritongen loadtest MODEL --serve REPO (the embedded server)",
    "--request-intervals": "tritongen schedules constant or Poisson arrivals: --request-rate-range R "
    "--request-distribution poisson",
    "--periodic-concurrency-range": "give the levels with --concurrency-range START:END:STEP",
    "--request-period": "give the levels with --concurrency-range START:END:STEP",
    "--serial-sequences": "tritongen runs sequences concurrently, one per user",
    "--bls-composing-models": "tritongen loadtest reports every model a BLS model calls by itself",
    "--ssl-grpc-use-ssl": "tritongen load-tests plain HTTP and gRPC (no TLS)",
    "--ssl-https-verify-peer": "tritongen load-tests plain HTTP and gRPC (no TLS)",
    "--grpc-compression-algorithm": "tritongen sends gRPC requests uncompressed",
    "-H": "tritongen sends no custom HTTP headers",
    "--header": "tritongen sends no custom HTTP headers",
    "--request-parameter": "tritongen sends no custom request parameters",
    "--input-tensor-format": "tritongen sends tensors in binary (Triton's binary tensor extension)",
    "--output-tensor-format": "tritongen asks for binary outputs",
    "--trace-level": "trace with Triton's own --trace-config on the server",
    "--trace-rate": "trace with Triton's own --trace-config on the server",
    "--trace-count": "trace with Triton's own --trace-config on the server",
    "--log-frequency": "trace with Triton's own --trace-config on the server",
    "--model-signature-name": "tritongen measures Triton servers only",
    "--ensemble": "tritongen loadtest reports an ensemble's steps by itself",
    "-e": "tritongen loadtest reports an ensemble's steps by itself",
    "--session-concurrency": "tritongen measures Triton models, not chat sessions",
    "--endpoint": "tritongen measures Triton's inference API",
}
"""perf_analyzer options tritongen does not do, with what to do instead."""


class PaUsageError(ConfigError):
    """A perf_analyzer command line tritongen cannot run: malformed, or asking for what it does not do."""

    exit_code = 2


@dataclass(frozen=True)
class Range:
    """A perf_analyzer range ``START[:END[:STEP]]``; ``end`` 0 is open-ended (stopped by ``-l``)."""

    start: float
    end: float
    step: float

    def levels(self) -> list[float]:
        """The levels from start to end by step (an open end: up to ``OPEN_END_LEVELS`` of them)."""
        count = (
            OPEN_END_LEVELS if self.end == 0 else math.floor((self.end - self.start) / self.step + 1e-9) + 1
        )
        return [round(self.start + i * self.step, 9) for i in range(count)]


@dataclass(frozen=True)
class PaOptions:
    """One perf_analyzer command line, parsed, with perf_analyzer's defaults."""

    model: str
    version: str = ""
    address: ServerAddress = field(default_factory=lambda: ServerAddress.parse("localhost:8000"))
    """``-u`` (or perf_analyzer's default for the protocol) and ``--metrics-url``, parsed once."""
    protocol: str = "http"
    concurrency: Range | None = None
    request_rate: Range | None = None
    distribution: str = "constant"
    asynchronous: bool = False
    """``--async`` (or ``--streaming``): with a request rate, requests in flight are not bounded by
    ``--max-threads``; without it (perf_analyzer's synchronous default) at most that many are."""
    streaming: bool = False
    max_threads: int = DEFAULT_MAX_THREADS
    binary_search: bool = False
    """``--binary-search``: bisect the range for the highest level whose latency is within ``-l``."""
    batch_size: int = 1
    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    input_data: str = "random"
    string_length: int = DEFAULT_STRING_LENGTH
    string_data: str | None = None
    sequence_length: int | None = None
    sequence_id_range: tuple[int, int] | None = None
    shared_memory: str = "none"
    output_shm_size: int = DEFAULT_OUTPUT_SHM_SIZE
    measurement_ms: int = DEFAULT_MEASUREMENT_MS
    count_windows: bool = False
    request_count: int = DEFAULT_REQUEST_COUNT
    stability_percentage: float = DEFAULT_STABILITY_PERCENTAGE
    max_trials: int = DEFAULT_MAX_TRIALS
    percentile: int | None = None
    """Stabilise on (and report) this latency percentile; None: the average latency."""
    latency_threshold_ms: float = 0.0
    """Stop the sweep at the first level above this latency (0: no limit)."""
    csv: Path | None = None
    verbose_csv: bool = False
    collect_metrics: bool = False
    metrics_interval_ms: int = DEFAULT_METRICS_INTERVAL_MS
    profile_export: Path | None = None
    verbose: bool = False

    @property
    def mode(self) -> str:
        """``concurrency`` or ``rate``."""
        return "rate" if self.request_rate is not None else "concurrency"

    @property
    def target_url(self) -> str:
        """``-u`` as ``host:port``, or perf_analyzer's default for the protocol."""
        return self.address.url

    def levels(self) -> list[float]:
        """The load levels in sweep order."""
        chosen = self.request_rate or self.concurrency or Range(1, 1, 1)
        return chosen.levels()


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="tritongen perf-analyzer", add_help=False, allow_abbrev=False)
    add = parser.add_argument
    add("-m", dest="model")
    add("-x", dest="version", default="")
    add("-u", dest="url", default="")
    add("-i", dest="protocol", default="http")
    add("--concurrency-range", dest="concurrency")
    add("--request-rate-range", dest="request_rate")
    add("--request-distribution", dest="distribution", default="constant")
    add("-a", "--async", dest="asynchronous", action="store_true")
    add("--sync", dest="synchronous", action="store_true")
    add("--streaming", action="store_true")
    add("--max-threads", dest="max_threads")
    add("--binary-search", dest="binary_search", action="store_true")
    add("-b", dest="batch_size", default="1")
    add("--shape", dest="shapes", action="append", default=[])
    add("--input-data", dest="input_data", default="random")
    add("--string-length", dest="string_length", default=str(DEFAULT_STRING_LENGTH))
    add("--string-data", dest="string_data")
    add("--sequence-length", dest="sequence_length")
    add("--sequence-id-range", dest="sequence_id_range")
    add("--shared-memory", dest="shared_memory", default="none")
    add("--output-shared-memory-size", dest="output_shm_size", default=str(DEFAULT_OUTPUT_SHM_SIZE))
    add("-p", "--measurement-interval", dest="measurement_ms", default=str(DEFAULT_MEASUREMENT_MS))
    add("--measurement-mode", dest="measurement_mode", default="time_windows")
    add("--measurement-request-count", dest="request_count", default=str(DEFAULT_REQUEST_COUNT))
    add("-s", "--stability-percentage", dest="stability", default=str(DEFAULT_STABILITY_PERCENTAGE))
    add("-r", "--max-trials", dest="max_trials", default=str(DEFAULT_MAX_TRIALS))
    add("--percentile", dest="percentile")
    add("-l", "--latency-threshold", dest="latency_threshold", default="0")
    add("-f", dest="csv")
    add("--verbose-csv", dest="verbose_csv", action="store_true")
    add("--collect-metrics", dest="collect_metrics", action="store_true")
    add("--metrics-url", dest="metrics_url")
    add("--metrics-interval", dest="metrics_interval", default=str(DEFAULT_METRICS_INTERVAL_MS))
    add("--profile-export-file", dest="profile_export")
    add("-v", "--verbose", dest="verbose", action="store_true")
    return parser


class _Parser(argparse.ArgumentParser):
    """argparse, its errors raised as one line in perf_analyzer's terms instead of printed."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise PaUsageError(f"perf_analyzer option error: {message}", "see tritongen perf-analyzer --help")


def parse_pa_args(args: Sequence[str]) -> PaOptions:
    """perf_analyzer's command line (without the program name) as :class:`PaOptions`.

    Raises:
        PaUsageError: an option tritongen does not do (with the tritongen way), an unknown
            option, a malformed or impossible value.
    """
    _refuse_unsupported(args)
    parsed, unknown = _parser().parse_known_args(list(args))
    if unknown:
        raise PaUsageError(f"{unknown[0]}: not a perf_analyzer option tritongen knows", _nearest(unknown[0]))
    if not parsed.model:
        raise PaUsageError(
            "-m MODEL is required: the model to measure", "e.g. tritongen perf-analyzer -m mlp_onnx"
        )
    protocol = _choice("-i", parsed.protocol.lower(), ("http", "grpc"))
    options = PaOptions(
        model=parsed.model,
        version=parsed.version,
        address=ServerAddress.parse(
            parsed.url or f"localhost:{DEFAULT_PORTS[protocol]}", protocol, parsed.metrics_url
        ),
        protocol=protocol,
        concurrency=parse_range("--concurrency-range", parsed.concurrency, integer=True),
        request_rate=parse_range("--request-rate-range", parsed.request_rate, integer=False),
        distribution=_choice("--request-distribution", parsed.distribution, ("constant", "poisson")),
        asynchronous=bool(parsed.asynchronous or parsed.streaming),
        streaming=bool(parsed.streaming),
        max_threads=_integer("--max-threads", parsed.max_threads or str(DEFAULT_MAX_THREADS), least=1),
        binary_search=bool(parsed.binary_search),
        batch_size=_integer("-b", parsed.batch_size, least=1),
        shapes=parse_shapes(parsed.shapes),
        input_data=parsed.input_data,
        string_length=_integer("--string-length", parsed.string_length, least=0),
        string_data=parsed.string_data,
        sequence_length=None
        if parsed.sequence_length is None
        else _integer("--sequence-length", parsed.sequence_length, least=1),
        sequence_id_range=parse_id_range(parsed.sequence_id_range),
        shared_memory=_shared_memory(parsed.shared_memory),
        output_shm_size=_integer("--output-shared-memory-size", parsed.output_shm_size, least=1),
        **_measurement(parsed),
        csv=Path(parsed.csv) if parsed.csv else None,
        verbose_csv=bool(parsed.verbose_csv),
        collect_metrics=bool(parsed.collect_metrics),
        metrics_interval_ms=_integer("--metrics-interval", parsed.metrics_interval, least=1),
        profile_export=Path(parsed.profile_export) if parsed.profile_export else None,
        verbose=bool(parsed.verbose),
    )
    check_client_mode(options, parsed)
    check_binary_search(options)
    return options


def check_client_mode(options: PaOptions, parsed: argparse.Namespace) -> None:
    """``--async``, ``--sync`` and ``--max-threads`` only where they change what is measured.

    With a request rate they do: synchronous calls (perf_analyzer's default) keep at most
    ``--max-threads`` requests in flight, asynchronous ones any number. A concurrency keeps N
    requests in flight whatever the mode and the threads, so there they are refused.

    Raises:
        PaUsageError: both modes, or a mode or thread count that would change nothing.
    """
    if parsed.asynchronous and parsed.synchronous:
        raise PaUsageError("--async and --sync exclude each other", "give one of them")
    if options.mode == "rate":
        if parsed.max_threads is not None and options.asynchronous:
            raise PaUsageError(
                "--max-threads with --async: asynchronous calls are not bounded by threads, so it "
                "would change nothing",
                "drop --max-threads, or drop --async to keep at most that many requests in flight",
            )
        return
    given = [name for name, on in (("--async", parsed.asynchronous and not parsed.streaming),
                                   ("--sync", parsed.synchronous),
                                   ("--max-threads", parsed.max_threads is not None)) if on]  # fmt: skip
    if given:
        raise PaUsageError(
            f"{given[0]}: with a concurrency every level keeps N requests in flight whatever the client's "
            "mode and threads, so it would change nothing measured",
            f"drop {given[0]} (it changes what is measured with --request-rate-range)",
        )


def check_binary_search(options: PaOptions) -> None:
    """``--binary-search`` needs ``-l`` and a closed range, as perf_analyzer requires.

    Raises:
        PaUsageError: no latency limit, no range, or an open-ended one.
    """
    if not options.binary_search:
        return
    chosen = options.request_rate or options.concurrency
    if not options.latency_threshold_ms:
        raise PaUsageError(
            "--binary-search needs a latency limit: it looks for the highest level within it",
            "add -l MS (--latency-threshold)",
        )
    if chosen is None or chosen.end == 0 or chosen.end == chosen.start:
        raise PaUsageError(
            "--binary-search needs a range to search: START:END with END above START",
            "e.g. --concurrency-range 1:64 or --request-rate-range 100:2000:50",
        )


def _nearest(option: str) -> str:
    """The hint for an unknown option: the nearest option tritongen perf-analyzer takes."""
    known = [flag for action in _parser()._actions for flag in action.option_strings]
    close = difflib.get_close_matches(option.split("=", 1)[0], known, n=1, cutoff=0.5)
    nearest = f"did you mean {close[0]}? " if close else ""
    return nearest + "tritongen perf-analyzer --help lists the options it takes"


def _measurement(parsed: argparse.Namespace) -> dict[str, Any]:
    """The measurement options (``-p``, ``--measurement-mode``, ``-s``, ``-r``, ``--percentile``, ``-l``)."""
    mode = _choice("--measurement-mode", parsed.measurement_mode, ("time_windows", "count_windows"))
    percentile = None if parsed.percentile is None else _integer("--percentile", parsed.percentile, least=1)
    if percentile is not None and percentile > 99:
        raise PaUsageError(f"--percentile {percentile} is out of range", "give a percentile from 1 to 99")
    stability = _number("-s", parsed.stability)
    if not 0 < stability <= 100:
        raise PaUsageError(f"-s {parsed.stability}: the stability percentage must be above 0 and at most 100",
                           "e.g. -s 10")  # fmt: skip
    return {
        "measurement_ms": _integer("-p", parsed.measurement_ms, least=1),
        "count_windows": mode == "count_windows",
        "request_count": _integer("--measurement-request-count", parsed.request_count, least=1),
        "stability_percentage": stability,
        "max_trials": _integer("-r", parsed.max_trials, least=1),
        "percentile": percentile,
        "latency_threshold_ms": _non_negative("-l", parsed.latency_threshold),
    }


def _refuse_unsupported(args: Sequence[str]) -> None:
    for arg in args:
        name = arg.split("=", 1)[0]
        if name == "--service-kind" and "=" not in arg:
            continue  # its value follows: judged below
        if arg == "--service-kind=triton":
            continue
        hint = UNSUPPORTED.get(name)
        if hint is not None:
            raise PaUsageError(f"{name}: {hint}", "tritongen perf-analyzer --help lists the options it takes")
    for before, after in itertools.pairwise(args):
        if before == "--service-kind" and after != "triton":
            raise PaUsageError(
                f"--service-kind {after}: tritongen measures Triton servers only", "drop --service-kind"
            )
        if before == "--shared-memory" and after == "cuda":
            raise PaUsageError(
                "--shared-memory cuda: tritongen passes tensors through system shared memory only",
                "use --shared-memory system (a server on this host) or none",
            )


def parse_range(option: str, text: str | None, integer: bool) -> Range | None:
    """``START[:END[:STEP]]`` (END defaults to START, STEP to 1; END 0: no end).

    Raises:
        PaUsageError: not numbers, a start or step below what the range takes, or an end below the start.
    """
    if text is None:
        return None
    parts = text.split(":")
    if not 1 <= len(parts) <= 3 or any(not p.strip() for p in parts):
        raise PaUsageError(f"{option} {text}: not START[:END[:STEP]]", f"e.g. {option} 1:8:1")
    values = [(_integer if integer else _number)(option, p) for p in parts]
    start = values[0]
    end = values[1] if len(values) > 1 else start
    step = values[2] if len(values) > 2 else 1
    if start <= 0 or step <= 0:
        raise PaUsageError(
            f"{option} {text}: the start and the step must be positive", f"e.g. {option} 1:8:1"
        )
    if end != 0 and end < start:
        raise PaUsageError(
            f"{option} {text}: the end ({end:g}) is below the start ({start:g})",
            f"give START:END with END at least START, e.g. {option} {end:g}:{start:g}",
        )
    return Range(float(start), float(end), float(step))


def parse_shapes(items: Sequence[str]) -> dict[str, tuple[int, ...]]:
    """``--shape NAME:D1,D2,…`` items by input name (the name may hold colons; the dims follow the last).

    Raises:
        PaUsageError: an item without a colon, or dims that are not positive integers.
    """
    shapes: dict[str, tuple[int, ...]] = {}
    for item in items:
        name, sep, dims = item.rpartition(":")
        if not sep or not name:
            raise PaUsageError(f"--shape {item}: not NAME:DIMS", "e.g. --shape INPUT0:1,3,224,224")
        try:
            values = tuple(int(d) for d in dims.split(","))
        except ValueError:
            values = ()
        if not values or min(values) < 1:
            raise PaUsageError(
                f"--shape {item}: the dims must be positive integers", "e.g. --shape INPUT0:16"
            )
        shapes[name] = values
    return shapes


def parse_id_range(text: str | None) -> tuple[int, int] | None:
    """``--sequence-id-range START:END`` (END excluded, as perf_analyzer reads it).

    Raises:
        PaUsageError: not two integers with 1 <= START < END.
    """
    if text is None:
        return None
    start, _, end = text.partition(":")
    first = _integer("--sequence-id-range", start, least=1)
    last = _integer("--sequence-id-range", end, least=first + 1) if end else 2**63
    return first, last


def _choice(option: str, value: str, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise PaUsageError(
            f"{option} {value}: not one of {', '.join(choices)}", f"give one of {', '.join(choices)}"
        )
    return value


def _shared_memory(value: str) -> str:
    return _choice("--shared-memory", value, ("none", "system"))


def _number(option: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise PaUsageError(f"{option} {text}: not a number", f"give a number to {option}") from None
    if not math.isfinite(value):
        raise PaUsageError(f"{option} {text}: not a finite number", f"give a number to {option}")
    return value


def _non_negative(option: str, text: str) -> float:
    value = _number(option, text)
    if value < 0:
        raise PaUsageError(f"{option} {text}: must not be negative", f"give 0 or more to {option}")
    return value


def _integer(option: str, text: str, least: int = 0) -> int:
    try:
        value = int(text)
    except ValueError:
        raise PaUsageError(
            f"{option} {text}: not a whole number", f"give a whole number to {option}"
        ) from None
    if value < least:
        raise PaUsageError(f"{option} {text}: must be at least {least}", f"e.g. {option} {max(least, 1)}")
    return value
