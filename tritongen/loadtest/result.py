"""Results of load runs and their versioned JSON and CSV forms."""

from __future__ import annotations

import csv
import io
import json
import platform
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from tritongen import __version__
from tritongen.triton.repository import write_output

SCHEMA = "tritongen.loadtest/1"
LATENCY_KEYS = ("p50", "p90", "p95", "p99", "p999", "mean", "max")
SERVER_KEYS = ("queue", "compute_input", "compute_infer", "compute_output")


@dataclass
class RunResult:
    """One run at one level."""

    mode: str
    concurrency: int | None
    target_rate: float | None
    batch_size: int
    duration_s: float
    requests: int
    errors: int
    errors_by_kind: dict[str, int]
    qps: float
    infer_per_s: float
    latency_us: dict[str, float] | None
    server_us: dict[str, float | None] | None
    avg_batch: float | None
    stable: bool
    gpu: dict[str, float | int | None] | None
    cpu: dict[str, float | int | None] | None
    status: str = "ok"
    """``ok``, ``aborted`` (server gone, stopped early) or ``interrupted`` (Ctrl-C)."""
    reason: str | None = None
    processes: int = 1
    achieved_rate: float | None = None
    """Open loop: requests actually sent per second."""
    late_sends: int = 0
    max_send_lag_us: float = 0.0
    warnings: list[str] = field(default_factory=list)
    windows: list[dict[str, float | None]] = field(default_factory=list)


@dataclass
class LoadTestReport:
    """All runs of one ``tritongen loadtest`` call."""

    model: str
    protocol: str
    url: str
    runs: list[RunResult] = field(default_factory=list)
    status: str = "ok"

    def to_json(self) -> dict[str, Any]:
        """The ``tritongen.loadtest/1`` document."""
        return {
            "schema": SCHEMA,
            "tritongen_version": __version__,
            "model": self.model,
            "protocol": self.protocol,
            "url": self.url,
            "status": self.status,
            "host": {"machine": platform.machine(), "python": platform.python_version()},
            "runs": [asdict(run) for run in self.runs],
        }

    @classmethod
    def from_json(cls, document: dict[str, Any]) -> LoadTestReport:
        """Read a ``tritongen.loadtest/1`` document (keys it does not know are ignored)."""
        known = {f.name for f in fields(RunResult)}
        return cls(
            model=str(document.get("model", "")),
            protocol=str(document.get("protocol", "http")),
            url=str(document.get("url", "")),
            runs=[RunResult(**{k: v for k, v in r.items() if k in known}) for r in document.get("runs", [])],
            status=str(document.get("status", "ok")),
        )

    def write_json(self, path: Path) -> None:
        """Write the JSON document (atomically)."""
        write_output(path, json.dumps(self.to_json(), indent=2) + "\n")

    def write_csv(self, path: Path) -> None:
        """One row per run, flat columns with units in their names."""
        buffer = io.StringIO()
        columns = [
            "mode", "concurrency", "target_rate", "batch_size", "duration_s", "requests", "errors", "qps",
            "infer_per_s", "p50_us", "p90_us", "p95_us", "p99_us", "p999_us", "mean_us", "max_us",
            "queue_us", "compute_input_us", "compute_infer_us", "compute_output_us", "avg_batch", "stable",
            "gpu_util_mean", "gpu_util_max", "gpu_mem_max_bytes", "cpu_util_mean", "cpu_util_max",
            "cpu_mem_max_bytes", "status",
        ]  # fmt: skip
        writer = csv.DictWriter(buffer, fieldnames=columns)
        writer.writeheader()
        for run in self.runs:
            latency = run.latency_us or {}
            server = run.server_us or {}
            gpu = run.gpu or {}
            cpu = run.cpu or {}
            writer.writerow(
                {
                    "mode": run.mode, "concurrency": run.concurrency, "target_rate": run.target_rate,
                    "batch_size": run.batch_size, "duration_s": round(run.duration_s, 3),
                    "requests": run.requests, "errors": run.errors, "qps": round(run.qps, 3),
                    "infer_per_s": round(run.infer_per_s, 3),
                    **{f"{k}_us": latency.get(k) for k in LATENCY_KEYS},
                    **{f"{k}_us": server.get(k) for k in SERVER_KEYS},
                    "avg_batch": run.avg_batch, "stable": run.stable,
                    "gpu_util_mean": gpu.get("util_mean"), "gpu_util_max": gpu.get("util_max"),
                    "gpu_mem_max_bytes": gpu.get("mem_max_bytes"), "cpu_util_mean": cpu.get("util_mean"),
                    "cpu_util_max": cpu.get("util_max"), "cpu_mem_max_bytes": cpu.get("mem_max_bytes"),
                    "status": run.status,
                }
            )  # fmt: skip
        write_output(path, buffer.getvalue())
