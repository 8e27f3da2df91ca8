"""Triton's statistics API: server-side time per request and batch size over a window."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tritongen.io.loadgen_shared import SERVER_KEYS

PHASES = SERVER_KEYS
"""The phases of a request the statistics API times (the load generator's report names them alike)."""


@dataclass(frozen=True)
class StatsSnapshot:
    """Cumulative counters of one model at one moment."""

    inferences: int
    executions: int
    success: int
    phase_ns: dict[str, int]
    phase_count: dict[str, int]
    success_ns: int = 0
    """Cumulative time of the successful requests, from arrival to response (the server's view)."""

    @classmethod
    def from_json(cls, stats: dict[str, Any]) -> StatsSnapshot:
        """Build from one ``model_stats`` entry of the statistics API (HTTP or gRPC JSON)."""
        inference = stats.get("inference_stats", {})

        def field(phase: str, key: str) -> int:
            return int(inference.get(phase, {}).get(key, 0) or 0)

        return cls(
            inferences=int(stats.get("inference_count", 0) or 0),
            executions=int(stats.get("execution_count", 0) or 0),
            success=field("success", "count"),
            phase_ns={phase: field(phase, "ns") for phase in PHASES},
            phase_count={phase: field(phase, "count") for phase in PHASES},
            success_ns=field("success", "ns"),
        )


@dataclass(frozen=True)
class ServerBreakdown:
    """Server-side figures over a window: µs per request in each phase, and mean batch size."""

    queue_us: float | None
    compute_input_us: float | None
    compute_infer_us: float | None
    compute_output_us: float | None
    avg_batch: float | None
    requests: int
    request_us: float | None = None
    """Mean time of a successful request in the server, arrival to response (µs)."""

    def server_us(self) -> dict[str, float | None]:
        """The JSON ``server_us`` object."""
        return {
            "queue": self.queue_us,
            "compute_input": self.compute_input_us,
            "compute_infer": self.compute_infer_us,
            "compute_output": self.compute_output_us,
        }


def breakdown(before: StatsSnapshot, after: StatsSnapshot) -> ServerBreakdown:
    """Deltas between two snapshots turned into per-request averages."""

    def per_request(phase: str) -> float | None:
        count = after.phase_count[phase] - before.phase_count[phase]
        return (after.phase_ns[phase] - before.phase_ns[phase]) / count / 1000 if count > 0 else None

    executions = after.executions - before.executions
    inferences = after.inferences - before.inferences
    return ServerBreakdown(
        queue_us=per_request("queue"),
        compute_input_us=per_request("compute_input"),
        compute_infer_us=per_request("compute_infer"),
        compute_output_us=per_request("compute_output"),
        # Every execution holds at least one inference. Triton updates the two counters one
        # after the other, so a snapshot taken under load can see an execution whose
        # inferences are not counted yet: the ratio may come out a hair under 1.
        avg_batch=max(1.0, inferences / executions) if executions > 0 else None,
        requests=after.success - before.success,
        request_us=(after.success_ns - before.success_ns) / (after.success - before.success) / 1000
        if after.success > before.success
        else None,
    )
