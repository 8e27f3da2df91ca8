"""The null kind's load: requests the server answers at once, to measure the load generator's own floor.

Each request is ``GET /v2/models/MODEL/ready`` over the same keep-alive raw HTTP/1.1 path the
tensor kind uses (the process's HTTP engine in a closed loop, the open loop at a rate): the
server answers from its model table without running the model, so the latency is the
client's and the network's own, and the requests/s what one load process can drive.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from .options import TritonOptions
from .recording import Recorder
from .server_api import host_port
from .transports import HttpTransport, StepStarts

if TYPE_CHECKING:
    from .loops import TransportLoad
    from .state import ProcessState


class NullTransport(HttpTransport):
    """One prepared ``GET`` of the model's readiness, sent as the tensor kind sends its requests."""

    def __init__(
        self, host: str, options: TritonOptions, starts: StepStarts, recorder: Recorder | None
    ) -> None:
        self.starts = starts
        self.timeout = options.timeout
        self.host, self.port = host_port(host, 8000)
        path = f"/v2/models/{quote(options.model, safe='')}/ready"
        self.requests = [f"GET {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n\r\n".encode()]
        self.step = 0
        self.rows = 1
        self.recorder = recorder
        self.id_offsets: list[int] = []  # its requests carry no id (--server-trace is the tensor kind's)


def user_load(host: str, options: TritonOptions, process: ProcessState, environment: Any) -> TransportLoad:
    """The null kind's load of one user."""
    from .loops import TransportLoad

    if options.protocol != "http":
        raise ValueError("the null kind goes over HTTP (--triton-protocol http)")
    transport = NullTransport(host, options, process.step_starts, process.recorder)
    return TransportLoad(transport, options, process, environment)
