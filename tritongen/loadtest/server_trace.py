"""``loadtest --server-trace``: the server's own trace of the requests, joined to the client's record.

While the levels run, the server traces the timestamps of one request in ``rate`` (its trace
API; the settings it had are put back afterwards, see :mod:`tritongen.client.trace_settings`).
Each tensor request carries an id (the load processes' ``--triton-trace-tag``), which the
server writes into its trace; each load process writes its requests' ids with when each began
sending and when its response was complete. The server's steady clock is the clock the load
processes read on the same machine, so a traced request's time splits into the client's send
(its first byte written to the server starting to read it), the server's parts
(:data:`~tritongen.triton.trace.PARTS`) and the client's receive (the server's last byte
written to the response complete). Per run, over its measured span, the median request by
the client's latency and the slowest 1% are reported, each part their mean in µs.
"""

from __future__ import annotations

import contextlib
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tritongen.errors import TritongenError
from tritongen.io.loadgen_shared import TRACE_ID_WIDTHS, TRACE_MARKS_SUFFIX
from tritongen.loadtest.result import RunResult
from tritongen.triton.trace import PARTS, RequestTrace, TraceFileError, collect, read_trace_files

CLIENT_PARTS = ("client_send", *PARTS, "client_receive")
"""The parts of a traced request's latency on the client, in order."""
STEP_PARTS = ("queue", "compute_input", "infer", "compute_output")
"""The parts of an ensemble's step or a BLS call (it has no HTTP of its own)."""
FIXED_IN = (2, 58)
"""Triton before 2.58 (25.05) can crash while it traces requests that overlap: a trace's mutex was
deleted while held (triton-inference-server/server#7795, fixed by #8144). Measured here on the
embedded 2.51: at rate 1, one run in three of 6,000 requests at concurrency 2 corrupted a
response or killed the server; none at concurrency 1."""
MARKS_WAIT_S = 5.0
"""How long a run's load processes may take to write their requests' ids once it has stopped."""
_, PID_WIDTH, COUNT_WIDTH = TRACE_ID_WIDTHS


@dataclass(frozen=True)
class JoinedRequest:
    """A request the client recorded and the server traced: its client times and its trace."""

    start: float
    """When the client began sending it (``time.perf_counter``, the server's steady clock)."""
    end: float
    """When its response was complete on the client."""
    trace: RequestTrace

    @property
    def latency_us(self) -> float:
        """Its latency on the client, in µs."""
        return (self.end - self.start) * 1e6

    def split_us(self) -> dict[str, float | None]:
        """Each of :data:`CLIENT_PARTS` in µs (None where the trace lacks an edge)."""
        first, last = self.trace.start_ns, self.trace.end_ns
        send = None if first is None else max(0.0, first / 1000.0 - self.start * 1e6)
        receive = None if last is None else max(0.0, self.end * 1e6 - last / 1000.0)
        return {"client_send": send, **self.trace.split_us(), "client_receive": receive}


def _means(splits: list[dict[str, float | None]], parts: tuple[str, ...]) -> dict[str, float | None]:
    """Each part's mean over the splits that have it (None where none has)."""
    means: dict[str, float | None] = {}
    for part in parts:
        values = [value for split in splits if (value := split.get(part)) is not None]
        means[part] = sum(values) / len(values) if values else None
    return means


def steps_us(requests: list[JoinedRequest]) -> dict[str, dict[str, float | None]]:
    """An ensemble's steps or a BLS model's calls, by model: their mean parts and whole time, in µs.

    ``calls`` is how many times a request made it, on average.
    """
    by_model: dict[str, list[RequestTrace]] = {}
    for request in requests:
        for step in request.trace.steps:
            by_model.setdefault(step.model or "?", []).append(step)
    steps = {}
    for model, traces in by_model.items():
        splits = [{**t.split_us(), "total": t.total_us} for t in traces]
        steps[model] = {"calls": len(traces) / len(requests), **_means(splits, (*STEP_PARTS, "total"))}
    return steps


def split_row(label: str, requests: list[JoinedRequest]) -> dict[str, Any]:
    """``{"label", "requests", "latency_us", "parts_us", "steps_us"}``: each part's mean over ``requests``."""
    parts = _means([request.split_us() for request in requests], CLIENT_PARTS)
    latency = sum(request.latency_us for request in requests) / len(requests)
    return {
        "label": label,
        "requests": len(requests),
        "latency_us": latency,
        "parts_us": parts,
        "steps_us": steps_us(requests),
    }


def breakdown(joined: list[JoinedRequest], rate: int, recorded: int) -> dict[str, Any]:
    """A run's ``server_trace``: the median request's split and the slowest 1%'s (ranked by client latency).

    ``{"rate", "recorded", "joined", "splits": [median, slowest 1%]}``: the successful requests
    the client recorded over the measured span, those of them the server traced, and their
    splits (none when none was traced).
    """
    ranked = sorted(joined, key=lambda request: request.latency_us)
    splits = []
    if ranked:
        slowest = ranked[-max(1, len(ranked) // 100) :]
        splits = [split_row("median", [ranked[(len(ranked) - 1) // 2]]), split_row("slowest 1%", slowest)]
    return {"rate": rate, "recorded": recorded, "joined": len(joined), "splits": splits}


@dataclass(frozen=True)
class ClientMarks:
    """The requests one run's load processes recorded: id → (start, end), on ``time.perf_counter``."""

    times: dict[str, tuple[float, float]]

    @classmethod
    def read(cls, results: Path, tag: str, span: tuple[float, float]) -> ClientMarks:
        """The marks written beside ``results``, of the requests that ended in ``span`` (epoch seconds).

        A request counts in the window its response completed in, as the run's figures count it.

        A file's first row holds its process's ``time.time() - time.perf_counter()``.
        """
        times: dict[str, tuple[float, float]] = {}
        for path in sorted(results.parent.glob(results.name + TRACE_MARKS_SUFFIX + "*.npy")):
            pid = int(path.name[len(results.name + TRACE_MARKS_SUFFIX) : -len(".npy")])
            rows = np.load(path)
            offset, rows = float(rows[0, 0]), rows[1:]
            prefix = f"{tag}{pid % 10**PID_WIDTH:0{PID_WIDTH}d}"
            for count, start, end in rows.tolist():
                if span[0] <= end + offset < span[1]:
                    times[f"{prefix}{int(count):0{COUNT_WIDTH}d}"] = (start, end)
        return cls(times)


def wait_for_marks(results: Path, processes: int, wait_s: float = MARKS_WAIT_S) -> int:
    """Wait until ``processes`` load processes have written their marks (up to ``wait_s``); how many did."""
    deadline = time.monotonic() + wait_s
    while True:
        found = len(list(results.parent.glob(results.name + TRACE_MARKS_SUFFIX + "*.npy")))
        if found >= processes or time.monotonic() >= deadline:
            return found
        time.sleep(0.05)


@dataclass
class _TracedRun:
    result: RunResult
    results: Path
    processes: int
    span: tuple[float, float]


@dataclass
class ServerTrace:
    """A load test's server trace: its request-id tag, the runs it covers, their breakdowns once read."""

    rate: int
    """The server traces one request in this many."""
    tag: str = field(default_factory=lambda: secrets.token_hex(3))
    runs: list[_TracedRun] = field(default_factory=list)
    unavailable: str | None = None
    """Why the server traced nothing (no trace API, no trace file): the runs go on without."""
    warning: str | None = None
    """What to know of the server's tracing (a version that can crash while tracing), said once."""

    def add(self, result: RunResult, results: Path, processes: int, span: tuple[float, float]) -> None:
        """A run whose requests the trace covers, its windows at ``results``, measured over ``span``."""
        self.runs.append(_TracedRun(result, results, processes, span))

    def attach(self, trace_file: Path | None) -> None:
        """Join each run's requests to the server's traces in ``trace_file``; each run's ``server_trace``.

        A trace file that cannot be read, or marks a load process did not write: one warning on
        the run, the run's other figures as they were.
        """
        if not self.runs:
            return
        if self.warning is not None:
            self.runs[0].result.warnings.append(f"--server-trace: {self.warning}")
        if self.unavailable is not None or trace_file is None:
            self.runs[0].result.warnings.append(f"--server-trace: {self.unavailable or 'no trace file'}")
            return
        if not any(trace_file.parent.glob(trace_file.name + "*")):
            self.runs[0].result.warnings.append(
                f"--server-trace: the server's trace file {trace_file} is not on this machine "
                "(trace a server that runs here)"
            )
            return
        try:
            traces = {t.request_id: t for t in collect(read_trace_files(trace_file)) if t.request_id}
        except (TraceFileError, OSError) as e:
            self.runs[0].result.warnings.append(f"--server-trace: the trace file cannot be read: {e}")
            return
        for run in self.runs:
            self._attach_run(run, traces)

    def _attach_run(self, run: _TracedRun, traces: dict[str, RequestTrace]) -> None:
        written = wait_for_marks(run.results, run.processes)
        if written < run.processes:
            run.result.warnings.append(
                f"--server-trace: {run.processes - written} of {run.processes} load process(es) "
                "wrote no request ids: their requests are not in the breakdown"
            )
        marks = ClientMarks.read(run.results, self.tag, run.span)
        joined = [
            JoinedRequest(times[0], times[1], traces[request_id])
            for request_id, times in marks.times.items()
            if request_id in traces
        ]
        run.result.server_trace = breakdown(joined, self.rate, len(marks.times))
        if not joined:
            run.result.warnings.append(
                f"--server-trace: none of the run's {len(marks.times)} measured requests was in the "
                "server's trace (is the trace rate above the requests sent?)"
            )


def crash_warning(version: str | None, overlapping: bool) -> str | None:
    """Why tracing may kill this server (a version before :data:`FIXED_IN`, overlapping requests)."""
    try:
        release = tuple(int(part) for part in (version or "").split(".")[:2])
    except ValueError:
        return None
    if not overlapping or len(release) < 2 or release >= FIXED_IN:
        return None
    return (
        f"Triton {version} can crash while it traces requests that overlap (fixed in 2.58, 25.05: "
        "triton-inference-server/server#7795); trace at --concurrency 1, or with a high --trace-rate, "
        "or on a newer Triton"
    )


@contextlib.contextmanager
def server_tracing(
    trace: ServerTrace | None, url: str, protocol: str = "http", overlapping: bool = True
) -> Iterator[None]:
    """Trace the server's requests while the block runs, then join them to the runs' (``trace`` None: off).

    A server that cannot trace (no trace API, no trace file) is noted on the first run; the
    load test goes on without the breakdown.
    """
    if trace is None:
        yield
        return
    from tritongen.client.trace_settings import TraceControl

    control = TraceControl(url, protocol=protocol)
    path: Path | None = None
    try:
        with contextlib.ExitStack() as stack:
            try:
                path = stack.enter_context(control.timestamps(trace.rate))
            except TritongenError as e:
                trace.unavailable = e.one_line()
            if trace.unavailable is None:
                trace.warning = crash_warning(control.server_version(), overlapping)
            yield
    finally:
        control.close()
        trace.attach(path)
