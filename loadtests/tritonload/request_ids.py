"""Request ids for the server's trace: each request names itself, each process writes when it sent them.

With ``--triton-trace-tag TAG`` every tensor request carries an id of fixed width, ``TAG``
then this process's id then a count (``a1b2c3`` ``0012345`` ``000000042``), which Triton
writes into its trace as the request's ``request_id`` and echoes in the response (of the
same size each time: the HTTP engine's whole-response shortcut still holds). The process
keeps, for each request that succeeds, its count, when it began sending and when its
response was complete (``time.perf_counter``, the server's steady clock on the same
machine), and writes them as the test stops beside ``--triton-results``:
``RESULTS.ids-PID.npy``, rows of (count, start, end), with ``time.time() - perf_counter()``
in a row of its own first so that the reader can place them on the window grid.
"""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np

from .shared import TRACE_ID_WIDTHS, TRACE_MARKS_SUFFIX

TAG_WIDTH, PID_WIDTH, COUNT_WIDTH = TRACE_ID_WIDTHS
ID_WIDTH = TAG_WIDTH + PID_WIDTH + COUNT_WIDTH
PLACEHOLDER = "0" * ID_WIDTH
"""What a prepared request's id holds until a send writes the request's own."""
ID_KEY = b'"id":"'


def marks_path(results: str, pid: int) -> str:
    """Where process ``pid`` writes the ids of a run whose windows go to ``results``."""
    return f"{results}{TRACE_MARKS_SUFFIX}{pid}.npy"


def id_offset(request: bytes) -> int:
    """Where the id's characters start in a prepared HTTP request (its JSON header's ``"id"``); -1: none."""
    at = request.find(ID_KEY)
    return at + len(ID_KEY) if at >= 0 else -1


class RequestIds:
    """This process's request ids for one test, and the times of the requests that succeeded."""

    last_count = 0
    """The process's last count: ids never repeat within a process (the runs of a load test share its
    tag, and the server's trace and the wire capture cover them all)."""

    def __init__(self, tag: str, results: str) -> None:
        if len(tag) != TAG_WIDTH or not tag.isalnum():
            raise ValueError(f"--triton-trace-tag must be {TAG_WIDTH} letters or digits, not {tag!r}")
        self.prefix = f"{tag}{os.getpid() % 10**PID_WIDTH:0{PID_WIDTH}d}"
        self.results = results
        self.count = RequestIds.last_count  # a process that stays up: a load test's later runs go on counting
        self.marks: list[float] = []
        """(count, start, end) of each request that succeeded, one after the other."""

    def next(self) -> tuple[int, bytes]:
        """The next request's count and its id."""
        self.count += 1
        RequestIds.last_count = self.count
        count = self.count % 10**COUNT_WIDTH
        return count, f"{self.prefix}{count:0{COUNT_WIDTH}d}".encode()

    def stamp(self, request: bytearray, offset: int) -> int:
        """Write the next id into ``request`` at ``offset``; its count."""
        count, text = self.next()
        request[offset : offset + ID_WIDTH] = text
        return count

    def stamped(self, request: bytes, offset: int) -> tuple[int, bytes]:
        """A copy of ``request`` with the next id at ``offset``, and its count (for sends that overlap)."""
        count, text = self.next()
        return count, request[:offset] + text + request[offset + ID_WIDTH :]

    def proto_id(self, request: Any) -> int:
        """Set a gRPC ``ModelInferRequest``'s ``id`` to the next id; its count."""
        count, text = self.next()
        request.id = text.decode()
        return count

    def mark(self, count: int, start: float, end: float) -> None:
        """A request that succeeded: when it began sending and when its response was complete."""
        self.marks += (count, start, end)

    def write(self, wall_offset: float | None = None) -> None:
        """Write the marks beside the results (a whole file or none: written aside, then renamed).

        ``wall_offset``: the ``time.time() - time.perf_counter()`` the windows were placed with (a
        process that stays up took it as it started; the clocks drift apart over minutes), so that
        the marks fall in the windows their requests were counted in; None: taken now.
        """
        offset = time.time() - time.perf_counter() if wall_offset is None else wall_offset
        rows = np.array([offset, 0.0, 0.0, *self.marks], dtype=np.float64)
        path = marks_path(self.results, os.getpid())
        aside = path + ".part"
        with open(aside, "wb") as file:
            np.save(file, rows.reshape(-1, 3))
        os.replace(aside, path)
