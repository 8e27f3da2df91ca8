"""``loadtest --wire``: each run's latencies checked against the loopback capture of its requests.

The requests carry ids (as with ``--server-trace``); the capture gives each request's wire
latency, its first byte out to its response's last byte back (:mod:`.http1`, :mod:`.http2`),
and the load processes' marks give the client's, for the same requests over the run's
measured span. Per run: both at P50, P90, P99 and P99.9, and whether the run's reported
latency is the wire's plus the client's own time (``client_overhead_us``, from the kernel's
receive stamps) within max(2%, 100 µs) at each.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tritongen.loadtest.result import RunResult
from tritongen.loadtest.server_trace import ClientMarks, wait_for_marks
from tritongen.loadtest.wire.capture import CaptureOutcome, captured
from tritongen.loadtest.wire.grpc_streams import grpc_stream_requests
from tritongen.loadtest.wire.http1 import http1_requests
from tritongen.loadtest.wire.http2 import PREFACE, http2_requests
from tritongen.loadtest.wire.packets import CaptureFileError, Connection, dpkt_module, read_connections
from tritongen.loadtest.wire.requests import WireRequest, name_requests
from tritongen.loadtest.wire.streams import stream_figures, stream_warnings

QUANTILES = {"p50": 50.0, "p90": 90.0, "p99": 99.0, "p999": 99.9}
AGREEMENT = (0.02, 100.0)
"""A run's latency agrees with the wire's (plus the client's own time) within the larger of 2% and 100 µs."""


def read_requests(connections: list[Connection], grpc_streams: bool = False) -> list[WireRequest]:
    """Every answered request of the capture's connections, in order per connection.

    HTTP/1.1 exchanges, or HTTP/2 streams (one request each; ``grpc_streams``: Triton's gRPC
    streams, each carrying one request after another).
    """
    found: list[WireRequest] = []
    for connection in connections:
        first = next((s.data for s in connection.segments if s.to_server), b"")
        if not first.startswith(PREFACE[:8]):
            found += http1_requests(connection)
        else:
            found += grpc_stream_requests(connection) if grpc_streams else http2_requests(connection)
    return found


def wire_requests(connections: list[Connection], tag: str) -> dict[str, WireRequest]:
    """The captured requests that carried one of ``tag``'s ids, by id (HTTP/1.1 and HTTP/2 connections)."""
    found = read_requests(connections)
    name_requests(found, tag)
    return {request.request_id: request for request in found if request.request_id}


def _quantiles(values: list[float]) -> dict[str, float]:
    array = np.asarray(values, dtype=np.float64)
    return {key: float(np.percentile(array, q)) for key, q in QUANTILES.items()}


def agreement(run: RunResult, wire_us: dict[str, float]) -> dict[str, dict[str, float | bool]] | None:
    """At each quantile: the run's latency, the wire's plus the client's own time, their gap, within bound."""
    if run.latency_us is None or run.client_overhead_us is None:
        return None
    rows: dict[str, dict[str, float | bool]] = {}
    for key in QUANTILES:
        reported = float(run.latency_us[key])
        expected = wire_us[key] + run.client_overhead_us[key]
        bound = max(AGREEMENT[0] * reported, AGREEMENT[1])
        rows[key] = {"reported": reported, "expected": expected, "gap": reported - expected,
                     "bound": bound, "within": abs(reported - expected) <= bound}  # fmt: skip
    return rows


def wire_figures(
    run: RunResult, times: dict[str, tuple[float, float]], wire: dict[str, WireRequest]
) -> dict[str, Any]:
    """A run's ``wire``: its measured requests matched on the wire, both latencies, and their agreement."""
    matched = [(request_id, span) for request_id, span in times.items() if request_id in wire]
    figures: dict[str, Any] = {"recorded": len(times), "matched": len(matched)}
    if not matched:
        return figures
    client = [(end - start) * 1e6 for _, (start, end) in matched]
    on_wire = [wire[request_id].latency_us for request_id, _ in matched]
    figures["client_us"], figures["wire_us"] = _quantiles(client), _quantiles(on_wire)
    excess = [c - w for c, w in zip(client, on_wire, strict=True)]
    figures["client_minus_wire_us"] = _quantiles(excess) | {"mean": float(np.mean(excess))}
    figures["agreement"] = agreement(run, figures["wire_us"])
    return figures


@dataclass
class _CheckedRun:
    result: RunResult
    results: Path
    processes: int
    span: tuple[float, float]


@dataclass
class WireCheck:
    """A load test's wire check: its request-id tag, its capture, the runs it covers."""

    capture: Path
    port: int
    tag: str = field(default_factory=lambda: secrets.token_hex(3))
    runs: list[_CheckedRun] = field(default_factory=list)
    outcome: CaptureOutcome = field(default_factory=CaptureOutcome)
    streams: bool = False
    """An LLM load: its streams are checked (TTFT, gaps between tokens), not ids' latencies."""
    grpc_streams: bool = False
    """Its streams are Triton's gRPC streams (one HTTP/2 stream per user, requests one after another)."""

    def add(self, result: RunResult, results: Path, processes: int, span: tuple[float, float]) -> None:
        """A run whose requests the capture covers, its windows at ``results``, measured over ``span``."""
        self.runs.append(_CheckedRun(result, results, processes, span))

    def attach(self) -> None:
        """Read the capture and give each run its ``wire`` figures (an unreadable capture: a warning)."""
        if not self.runs:
            return
        first = self.runs[0].result
        if self.outcome.died:
            first.warnings.append(
                f"--wire: {self.outcome.died}: the requests after it are not on the capture"
            )
        if self.outcome.dropped:
            first.warnings.append(
                f"--wire: the kernel dropped {self.outcome.dropped} packet(s) of the capture: "
                "some requests are not on it"
            )
        try:
            notes: list[str] = []
            requests = read_requests(read_connections(self.capture, self.port, notes), self.grpc_streams)
            first.warnings += [f"--wire: {note}" for note in notes]
        except (CaptureFileError, OSError) as e:
            first.warnings.append(f"--wire: the capture cannot be read: {e}")
            return
        if self.streams:
            for run in self.runs:
                run.result.wire = stream_figures(run.result, requests, run.span, grpc=self.grpc_streams)
                run.result.warnings += stream_warnings(run.result.wire)
            return
        name_requests(requests, self.tag)
        wire = {request.request_id: request for request in requests if request.request_id}
        for run in self.runs:
            if wait_for_marks(run.results, run.processes) < run.processes:
                run.result.warnings.append(
                    "--wire: a load process wrote no request ids: its requests are not checked"
                )
            times = ClientMarks.read(run.results, self.tag, run.span).times
            run.result.wire = wire_figures(run.result, times, wire)
            self._warn(run.result)

    @staticmethod
    def _warn(result: RunResult) -> None:
        figures = result.wire or {}
        if not figures.get("matched"):
            result.warnings.append(
                f"--wire: none of the run's {figures.get('recorded', 0)} measured requests was on the wire"
            )
            return
        off = [key for key, row in (figures.get("agreement") or {}).items() if not row["within"]]
        if off:
            result.warnings.append(
                "--wire: the reported latency is not the wire's plus the client's own time at "
                + ", ".join(off)
                + " (see the run's wire figures)"
            )


@contextlib.contextmanager
def wire_checking(check: WireCheck | None) -> Iterator[None]:
    """Capture the server port's traffic while the block runs, then check each run against it (None: off).

    Raises:
        MissingDependencyError: tcpdump or dpkt is not installed.
        ConfigError: tcpdump may not capture here.
    """
    if check is None:
        yield
        return
    dpkt_module()  # before the test: a missing reader is said at once
    outcome = CaptureOutcome()
    try:
        with captured(check.capture, check.port) as outcome:
            yield
    finally:
        check.outcome = outcome  # filled as the capture stopped
        if check.capture.exists():
            check.attach()
