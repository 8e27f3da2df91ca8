"""Whether this machine can capture the loopback for ``loadtest --wire``, and the check of a stream's figures.

Capturing needs tcpdump (``make wire``) and root; where either is missing the wire checks are
skipped, unless ``TRITONGEN_REQUIRE_WIRE`` is set (CI), where they fail.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

TCPDUMP = shutil.which("tcpdump") or next((p for p in ("/usr/sbin/tcpdump",) if Path(p).exists()), None)
WHY_NOT = (
    "tcpdump is not installed (`make wire` installs Debian's)"
    if TCPDUMP is None
    else "capturing the loopback needs root"
    if os.geteuid() != 0
    else None
)
"""Why the loopback cannot be captured here (None: it can)."""


def skip_without_capture() -> None:
    """Skip (fail where the wire is required) when the loopback cannot be captured here."""
    if WHY_NOT is not None:
        if os.environ.get("TRITONGEN_REQUIRE_WIRE"):
            raise RuntimeError(f"the wire checks are required here: {WHY_NOT}")
        pytest.skip(WHY_NOT, allow_module_level=True)


APART = ["--cpus", "server=0,load=1"]
"""A language model's engine keeps every core busy: a load generator on the same cores finds several
events waiting in its socket, which the kernel merges under the newest one's time. On cores apart,
it reads each event as it comes."""


def wire_args() -> list[str]:
    """``--wire`` (the server and the load on cores apart) where the loopback can be captured, else none."""
    if WHY_NOT is not None and os.environ.get("TRITONGEN_REQUIRE_WIRE"):
        raise RuntimeError(f"the wire checks are required here: {WHY_NOT}")
    return [] if WHY_NOT is not None else ["--wire", *APART]


P99_VALUES = 200
"""A P99 is held to its rule over this many values or more (the client's and the wire's sets of streams
differ by a stream or two at the measured span's edges)."""


def check_streams_on_the_wire(run: dict[str, Any], grpc: bool = False) -> None:
    """A streamed run's TTFT and gaps against its streams' on the wire (where the wire was checked).

    At P50 the client's must agree with the wire's within 1 ms (a gRPC stream's TTFT within 2 ms:
    the gRPC library sends from its own threads after the client's clock started; its P50 ran
    1.1-1.2 ms over the wire's on a busy machine). At P99 a few late events decide the figure: here
    the client's ran 1-4 ms over the wire's in one run in two (over HTTP some events reach the
    client's reads late), so P99 is held to what cannot fail on a sound client: never more than
    1 ms before the wire's (a client cannot see an event before it crossed).
    """
    wire = run.get("wire")
    if WHY_NOT is not None:
        assert wire is None
        return
    assert wire is not None and wire["streams"] >= 1, run.get("warnings")
    counted = {"ttft_us": wire["streams"], "itl_us": wire["events"] - wire["streams"]}
    for name in ("ttft_us", "itl_us"):
        p50, p99 = wire[name]["p50"], wire[name]["p99"]
        bound = 2000.0 if grpc and name == "ttft_us" else 1000.0
        assert p50["bound"] == bound and p50["within"], (name, "p50", p50)
        if counted[name] >= P99_VALUES:  # fewer: P99 is the slowest one or two, which the span's edge decides
            assert p99["client"] >= p99["wire"] - 1000, (name, "p99", p99)
