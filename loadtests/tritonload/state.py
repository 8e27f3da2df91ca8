"""The state of one Locust process between events, in one object the locustfile creates once.

A worker (or a lone local runner) records latencies and reports them; the master (or the
lone local runner) collects them and reports the run. Each part is handed explicitly to
what needs it; nothing else in the package keeps state at module level.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from .http_engine import HttpEngine
from .master import MasterReport
from .messages import WorkerTotal
from .options import TritonOptions
from .recording import Collector, Recorder
from .request_ids import RequestIds
from .sequences import SequenceIds, process_sequence_ids
from .shared_memory import ShmSessions
from .transports import StepStarts
from .workers import InputsCopy, InputsSender


@dataclass
class ProcessState:
    """What this Locust process keeps between events (the locustfile's ``STATE``)."""

    recorder: Recorder | None = None
    """This test's latencies (a worker or a lone local runner), created when the test starts."""
    reporter: Any = None
    """The greenlet that sends finished windows to the master."""
    feeder: Any = None
    """The greenlet that moves counted requests into Locust's own statistics."""
    engine: HttpEngine | None = None
    """The closed-loop HTTP engine, shared by every HTTP user of this process."""
    collector: Collector | None = None
    """The merged windows (a master or a lone local runner)."""
    report: MasterReport | None = None
    """The run's report around each test (a master or a lone local runner)."""
    inputs_sender: InputsSender = field(default_factory=InputsSender)
    """A master's request data, for workers that lack it."""
    inputs: InputsCopy = field(default_factory=InputsCopy)
    """A worker's copy of the master's request data."""
    reported: WorkerTotal = field(default_factory=WorkerTotal)
    """The requests a worker has reported to its master."""
    sequence_ids: SequenceIds | None = None
    """The one correlation-ID allocator of this process (its users are greenlets of one thread)."""
    shm: ShmSessions = field(default_factory=ShmSessions)
    """This process's shared-memory regions."""
    step_starts: StepStarts = field(default_factory=StepStarts)
    """Where new users and connections start in the data steps."""
    user_numbers: Iterator[int] = field(default_factory=itertools.count)
    """Numbers the users of this process, in the order they start."""
    request_ids: RequestIds | None = None
    """This test's request ids and their times (``--triton-trace-tag``), written as it stops."""

    def new_run(self) -> None:
        """Start a test as a new process would: users numbered from 0, data steps and IDs afresh.

        A Locust that stays up across runs (``tritongen``'s load processes) starts many tests;
        each must send what a fresh process would, so that its seeds and steps do not depend on
        the runs before it.
        """
        self.user_numbers = itertools.count()
        self.step_starts = StepStarts()
        self.sequence_ids = None
        self.request_ids = None

    def process_sequence_ids(self, environment: Any, options: TritonOptions) -> SequenceIds:
        """This process's correlation-ID allocator, created on first use."""
        if self.sequence_ids is None:
            self.sequence_ids = process_sequence_ids(environment, options)
        return self.sequence_ids
