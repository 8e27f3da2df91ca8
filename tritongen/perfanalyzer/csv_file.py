"""perf_analyzer's CSV (``-f``): its header and columns, one row per level, sorted by throughput.

Values are whole microseconds, as perf_analyzer writes them. Over plain HTTP the load
generator times each request's parts: ``Client Send`` (writing it), ``Client Recv`` (reading
the response after its first bytes) and ``Network+Server Send/Recv`` (the rest of the average
latency less the server's queue and compute time, at least 0). Where it times requests whole
(gRPC, streams, shared memory), ``Client Send`` and ``Client Recv`` are 0 and their time is
inside ``Network+Server Send/Recv``. Either way the columns add up to the average latency, as
scripts that sum them expect. ``--verbose-csv``'s ``request/response`` is send plus receive,
``response wait`` the rest.
The latency percentiles are p50, p90, p95 and p99, with ``--percentile N`` in its place among
them; ``--verbose-csv`` leaves ``Avg latency`` out when the run stabilised on a percentile.
``--collect-metrics`` with ``--verbose-csv`` adds perf_analyzer's four GPU columns, each cell one
``UUID:value;`` per GPU the server's metrics endpoint reported (sorted by UUID, as
perf_analyzer's map is; an empty cell without GPU metrics, as perf_analyzer writes it):
``Avg GPU Utilization`` (0..1), ``Avg GPU Power Usage`` (W), ``Max GPU Memory Usage`` and ``Total
GPU Memory`` (bytes). tritongen's own CPU columns (with ``--collect-metrics``) come last, after
them, under names no perf_analyzer reader knows (``Avg CPU Utilization (tritongen)``, ``Max CPU Memory
Usage (tritongen)``), so a parser that picks perf_analyzer's columns by name passes them by.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

from tritongen.io.files import write_output
from tritongen.loadtest.result import RunResult
from tritongen.loadtest.run_readers import ServerModelFigures
from tritongen.perfanalyzer.options import PaOptions

BASE = [
    "Inferences/Second",
    "Client Send",
    "Network+Server Send/Recv",
    "Server Queue",
    "Server Compute Input",
    "Server Compute Infer",
    "Server Compute Output",
    "Client Recv",
    "p50 latency",
    "p90 latency",
    "p95 latency",
    "p99 latency",
]
VERBOSE = ["Avg latency", "request/response", "response wait"]
GPU_METRICS = ["Avg GPU Utilization", "Avg GPU Power Usage", "Max GPU Memory Usage", "Total GPU Memory"]
"""perf_analyzer's GPU columns (``--collect-metrics --verbose-csv``), in its order."""
GPU_FIGURES = dict(
    zip(GPU_METRICS, ("util_mean", "power_mean_w", "mem_max_bytes", "mem_total_bytes"), strict=True)
)
CPU_METRICS = ["Avg CPU Utilization (tritongen)", "Max CPU Memory Usage (tritongen)"]
"""tritongen's CPU columns, after perf_analyzer's."""
METRICS = [*GPU_METRICS, *CPU_METRICS]
PERCENTILES = (50, 90, 95, 99)


def csv_header(options: PaOptions) -> list[str]:
    """The columns, in perf_analyzer's order."""
    header = ["Concurrency" if options.mode == "concurrency" else "Request Rate", *BASE[:8]]
    header += [f"p{p} latency" for p in sorted({*PERCENTILES, options.percentile or 50})]
    if options.verbose_csv:
        header += VERBOSE if options.percentile is None else VERBOSE[1:]
        header += GPU_METRICS if options.collect_metrics else []
    return header + (CPU_METRICS if options.collect_metrics else [])


def gpu_cells(gpus: dict[str, dict[str, float | int | None]]) -> dict[str, str]:
    """perf_analyzer's GPU cells: ``UUID:value;`` for each GPU (by UUID) that has the figure."""
    return {
        column: "".join(
            f"{uuid}:{_number(gpus[uuid][figure])};"
            for uuid in sorted(gpus)
            if gpus[uuid].get(figure) is not None
        )
        for column, figure in GPU_FIGURES.items()
    }


def csv_row(run: RunResult, options: PaOptions) -> dict[str, Any]:
    """One level's cells."""
    latency = run.latency_us or {}
    server = run.server_model_figures().get(options.model) or ServerModelFigures()
    phases = [
        server.phase_us(phase) for phase in ("queue", "compute_input", "compute_infer", "compute_output")
    ]
    mean = latency.get("mean")
    inside = sum(float(p or 0.0) for p in phases)
    split = run.client_us or {"send": 0.0, "recv": 0.0}
    ends = split["send"] + split["recv"]
    row: dict[str, Any] = {
        "Concurrency": run.concurrency,
        "Request Rate": run.target_rate,
        "Inferences/Second": round(run.infer_per_s, 3),
        "Client Send": _us(split["send"]),
        "Network+Server Send/Recv": _us(max(0.0, float(mean) - ends - inside) if mean is not None else None),
        "Server Queue": _us(phases[0]),
        "Server Compute Input": _us(phases[1]),
        "Server Compute Infer": _us(phases[2]),
        "Server Compute Output": _us(phases[3]),
        "Client Recv": _us(split["recv"]),
        **{f"p{p} latency": _us(latency.get(f"p{p}")) for p in (50, 90, 95, 99)},
        f"p{options.percentile} latency": _us(run.stability_latency_us),
        "Avg latency": _us(mean),
        "request/response": _us(ends),
        "response wait": _us(float(mean) - ends if mean is not None else None),
    }
    cpu = run.cpu_summary()
    row |= gpu_cells(run.gpus_by_uuid()) | {
        "Avg CPU Utilization (tritongen)": None if cpu is None else cpu.util_mean,
        "Max CPU Memory Usage (tritongen)": None if cpu is None else cpu.mem_max_bytes,
    }
    return row


def write_pa_csv(path: Path, runs: list[RunResult], options: PaOptions) -> None:
    """Write the CSV (atomically): a row per level, by increasing Inferences/Second as perf_analyzer sorts."""
    header = csv_header(options)
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=header, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for run in sorted(runs, key=lambda r: r.infer_per_s):
        writer.writerow(csv_row(run, options))
    write_output(path, buffer.getvalue())


def _number(value: Any) -> str:
    """A figure as C++ streams write a double (six significant digits), whole numbers in full."""
    if isinstance(value, int) or float(value).is_integer():
        return str(int(value))
    return f"{float(value):.6g}"


def _us(value: Any) -> int | None:
    return None if value is None else int(float(value))
