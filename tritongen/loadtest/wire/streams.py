"""An LLM run's streams checked against the wire: time to first token and the gaps between tokens.

LLM requests carry no id: the run's streams are the captured requests whose response ended
within its measured span (as the client counts a request in the window it ends in). On the
wire, a stream's time to first token runs from its request's first byte out to the first
event with output text being whole on the wire; its gaps are those between such events. Two
events in one TCP segment have a gap of 0 on the wire: the server wrote them together, and no
client can see them apart. Per run, the client's P50 and P99 of each are set against the
wire's, to agree within 1 ms; over gRPC the TTFT within 2 ms, since the client's clock starts
before the gRPC library's own threads send the request (measured: the client's TTFT P50 1.1 to
1.2 ms over the wire's on a busy machine, its gaps within 1 ms).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tritongen.loadtest.result import RunResult
from tritongen.loadtest.wire.requests import WireRequest

STREAM_BOUND_US = 1000.0
"""A stream figure agrees with the wire's within 1 ms."""
GRPC_TTFT_BOUND_US = 2000.0
"""A gRPC stream's TTFT agrees within 2 ms (the library sends from its own threads)."""
STREAM_QUANTILES = {"p50": 50.0, "p99": 99.0}


def _figure(client: dict[str, float] | None, values: list[float], bound_us: float) -> dict[str, Any] | None:
    """The client's and the wire's P50 and P99, their gaps and whether each is within ``bound_us``."""
    if not values or not client:
        return None
    rows = {}
    for key, q in STREAM_QUANTILES.items():
        on_wire = float(np.percentile(np.asarray(values), q))
        gap = float(client[key]) - on_wire
        rows[key] = {"client": float(client[key]), "wire": on_wire, "gap": gap, "bound": bound_us,
                     "within": abs(gap) <= bound_us}  # fmt: skip
    return rows


def stream_figures(
    run: RunResult, requests: list[WireRequest], span: tuple[float, float], grpc: bool
) -> dict[str, Any]:
    """A streamed LLM run's ``wire``: its streams on the wire, TTFT and ITL set against the client's.

    ``grpc``: Triton's gRPC streams (their TTFT has its own bound), else HTTP streams.
    """
    low, high = int(span[0] * 1e9), int(span[1] * 1e9)
    ttft_bound = GRPC_TTFT_BOUND_US if grpc else STREAM_BOUND_US
    streams = [r for r in requests if low <= r.last_ns < high and r.events_ns]
    ttft = [(r.events_ns[0] - r.first_ns) / 1000.0 for r in streams]
    gaps = [(b - a) / 1000.0 for r in streams for a, b in zip(r.events_ns, r.events_ns[1:], strict=False)]
    return {
        "streams": len(streams),
        "client_streams": run.requests - run.errors,
        "events": sum(len(r.events_ns) for r in streams),
        "same_segment_share": (sum(1 for gap in gaps if gap == 0) / len(gaps)) if gaps else None,
        "ttft_us": _figure(run.ttft_us, ttft, ttft_bound),
        "itl_us": _figure(run.itl_us, gaps, STREAM_BOUND_US),
    }


def stream_warnings(figures: dict[str, Any]) -> list[str]:
    """What a streamed run's wire check found wrong, one line each."""
    if not figures["streams"]:
        return ["--wire: none of the run's streams was found on the wire"]
    off = [
        f"{name.removesuffix('_us').upper()} {key.upper()} by {row['gap'] / 1000:.2f} ms "
        f"(bound {row['bound'] / 1000:g} ms)"
        for name in ("ttft_us", "itl_us")
        for key, row in (figures.get(name) or {}).items()
        if not row["within"]
    ]
    return [f"--wire: the client's {', '.join(off)} differ from the wire's"] if off else []
