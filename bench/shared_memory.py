"""Large tensors with and without system shared memory: throughput and CPU, in interleaved rounds.

A Python-backend identity model on FP32 [N] in and out (4 MiB each way by default) is served
by one embedded Triton server and load-tested over HTTP and gRPC, each with the tensors in
the requests (``--shared-memory none``) and through system shared memory registered with the
server (``--shared-memory system``); the four contenders are measured round-robin. Recorded
per contender and round: infer/s, P50 and P99, and the CPU time per request of the load
generator (the Locust process) and of the server (``tritonserver`` and its backend stubs),
sampled from ``/proc`` over the steady part of each run; per protocol, the paired ratios
system / none of throughput and of both CPU costs.

Usage: ``.venv/bin/python bench/shared_memory.py [--rounds 3] [--concurrency 2] [--mib 4]
[--duration 6] [--warmup 2] [--json bench/results/shared_memory.json]`` (about 3 minutes with
the defaults).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
from provenance import RESULTS, require_committed_tree, write_result
from rich.console import Console
from rich.table import Table

from tritongen.client.address import ServerAddress
from tritongen.intervals import DEFAULT_CONFIDENCE, format_summary, paired_ratio, summarise
from tritongen.loadtest.result import RunResult
from tritongen.loadtest.rounds import Contender, Rounds, measure_rounds
from tritongen.loadtest.spec import LoadSpec
from tritongen.server.local import LocalTritonServer
from tritongen.triton.model_config import InstanceGroup, ModelConfig, ModelInput, ModelOutput
from tritongen.triton.render import render_config

SCHEMA = "tritongen.bench.shared_memory/1"
MODEL = "identity_large"
KINDS = ("none", "system")
SAMPLE_S = 0.2
SETTLE_S = 0.3
"""Left out at the end of each run: Locust is being stopped."""

IDENTITY_PY = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "x").as_numpy()
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("y", x)]))
        return responses
"""

console = Console()


def write_repository(root: Path, elements: int) -> Path:
    """A repository with the identity model on FP32 [``elements``] (no batching, one instance)."""
    model = root / MODEL
    (model / "1").mkdir(parents=True)
    (model / "1" / "model.py").write_text(IDENTITY_PY)
    config = ModelConfig(
        name=MODEL,
        backend="python",
        max_batch_size=0,
        input=[ModelInput(name="x", data_type="TYPE_FP32", dims=[elements])],
        output=[ModelOutput(name="y", data_type="TYPE_FP32", dims=[elements])],
        instance_group=[InstanceGroup(count=1, kind="KIND_CPU")],
    )
    (model / "config.pbtxt").write_text(render_config(config))
    return root


@dataclass
class CpuSampler:
    """CPU seconds of the server's process tree and of the load generator's, sampled in a thread."""

    server_pid: int
    samples: list[tuple[float, dict[int, tuple[str, float]]]] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def _roles(self) -> dict[int, tuple[str, float]]:
        server = psutil.Process(self.server_pid)
        found: dict[int, tuple[str, float]] = {}
        server_pids = {self.server_pid} | {p.pid for p in server.children(recursive=True)}
        for process in psutil.Process().children(recursive=True):
            try:
                times = process.cpu_times()
                if process.pid in server_pids:
                    role = "server"
                elif any("locust" in part for part in process.cmdline()[:2]):
                    role = "generator"
                else:
                    continue
                found[process.pid] = (role, times.user + times.system)
            except psutil.Error:
                continue
        return found

    def run(self) -> None:
        """Sample until stopped."""
        while not self.stop.wait(SAMPLE_S):
            self.samples.append((time.time(), self._roles()))

    def cores(self, start: float, end: float) -> dict[str, float]:
        """Mean cores each role used between ``start`` and ``end`` (processes alive at both ends)."""
        inside = [s for s in self.samples if start <= s[0] <= end]
        if len(inside) < 2:
            return {}
        (t0, first), (t1, last) = inside[0], inside[-1]
        used: dict[str, float] = {}
        for pid, (role, cpu) in last.items():
            if pid in first:
                used[role] = used.get(role, 0.0) + cpu - first[pid][1]
        return {role: seconds / (t1 - t0) for role, seconds in used.items()}


@dataclass
class RunClock:
    """When each measurement ended: the next one's start, or the end of the rounds."""

    marks: list[tuple[str, float]] = field(default_factory=list)

    def started(self, number: int, total: int, name: str) -> None:
        """Called by ``measure_rounds`` before each measurement."""
        self.marks.append((name, time.time()))
        console.log(f"round {number}/{total}: {name}")

    def ends(self, finished: float) -> dict[str, list[float]]:
        """Each contender's end times, in round order."""
        found: dict[str, list[float]] = {}
        for (name, _), (_, end) in zip(self.marks, [*self.marks[1:], ("", finished)], strict=True):
            found.setdefault(name, []).append(end)
        return found


def run_figures(run: RunResult, cores: dict[str, float]) -> dict[str, float | None]:
    """One run's figures: throughput, latency and CPU milliseconds per request of each side."""
    latency = run.latency_us or {}
    qps = run.qps if run.status == "ok" else 0.0

    def per_request(role: str) -> float | None:
        return cores[role] / qps * 1000 if qps > 0 and role in cores else None

    return {
        "infer_per_s": run.infer_per_s if run.status == "ok" else None,
        "p50_us": latency.get("p50"),
        "p99_us": latency.get("p99"),
        "errors": float(run.errors),
        "generator_cpu_cores": cores.get("generator"),
        "server_cpu_cores": cores.get("server"),
        "generator_cpu_ms_per_request": per_request("generator"),
        "server_cpu_ms_per_request": per_request("server"),
    }


FIGURES = ("infer_per_s", "p50_us", "p99_us", "generator_cpu_ms_per_request", "server_cpu_ms_per_request")
PAIRED = ("infer_per_s", "generator_cpu_ms_per_request", "server_cpu_ms_per_request")


def describe(
    rounds: Rounds, sampler: CpuSampler, ends: dict[str, list[float]], confidence: float
) -> dict[str, Any]:
    """Per contender its rounds and summaries; per protocol the paired ratios system / none."""
    contenders: dict[str, Any] = {}
    for name, runs in rounds.runs.items():
        per_round = []
        for run, end in zip(runs, ends.get(name, []), strict=False):
            cores = sampler.cores(end - SETTLE_S - run.duration_s, end - SETTLE_S)
            per_round.append(run_figures(run, cores))
        summary = {key: summarise([r[key] for r in per_round], confidence) for key in FIGURES}
        contenders[name] = {
            "rounds": per_round,
            "summary": {key: s.to_json() if s else None for key, s in summary.items()},
        }
    paired: dict[str, Any] = {}
    for protocol in ("http", "grpc"):
        shm, plain = contenders.get(f"{protocol}_system"), contenders.get(f"{protocol}_none")
        if shm is None or plain is None:
            continue
        paired[protocol] = {}
        for key in PAIRED:
            ratio = paired_ratio(
                [r[key] for r in shm["rounds"]], [r[key] for r in plain["rounds"]], confidence
            )
            paired[protocol][key] = ratio.to_json() if ratio else None
    return {"contenders": contenders, "paired": paired}


def print_table(document: dict[str, Any]) -> None:
    """The figures on the console."""
    table = Table(title=f"{document['tensor_mib']:g} MiB in and out per request, shared memory vs none")
    for column in ("contender", "infer/s", "P99 ms", "generator CPU ms/req", "server CPU ms/req"):
        table.add_column(column, justify="right")
    from tritongen.intervals import Summary

    def cell(data: dict[str, Any] | None, scale: float = 1.0) -> str:
        if not data:
            return "–"
        values = tuple(v * scale for v in data["values"])
        low, high = data.get("ci_low"), data.get("ci_high")
        summary = Summary(
            values=values,
            median=data["median"] * scale,
            mean=data["mean"] * scale,
            low=None if low is None else low * scale,
            high=None if high is None else high * scale,
            cv=data.get("cv"),
        )
        return format_summary(summary)

    for name, data in document["contenders"].items():
        s = data["summary"]
        table.add_row(
            name,
            cell(s["infer_per_s"]),
            cell(s["p99_us"], 1e-3),
            cell(s["generator_cpu_ms_per_request"]),
            cell(s["server_cpu_ms_per_request"]),
        )
    console.print(table)
    for protocol, ratios in document["paired"].items():
        parts = [
            f"{key} {r['estimate']:.2f}×"
            + ("" if r["ci_low"] is None else f" [{r['ci_low']:.2f}, {r['ci_high']:.2f}]")
            for key, r in ratios.items()
            if r
        ]
        console.print(f"{protocol} system / none: " + "; ".join(parts))


def main() -> None:
    """Serve the identity model, measure the four contenders in rounds, print and write the JSON."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--mib", type=float, default=4.0, help="MiB of the input (and of the output)")
    parser.add_argument("--duration", type=float, default=6.0, help="measured seconds per run")
    parser.add_argument("--warmup", type=float, default=2.0, help="warm-up seconds per run")
    parser.add_argument("--protocols", default="http,grpc")
    parser.add_argument("--confidence", type=float, default=DEFAULT_CONFIDENCE)
    parser.add_argument("--json", type=Path, default=RESULTS / "shared_memory.json")
    args = parser.parse_args()
    require_committed_tree(args.json)
    elements = int(args.mib * 2**20) // 4
    protocols = [p for p in args.protocols.split(",") if p]
    clock = RunClock()
    with tempfile.TemporaryDirectory(prefix="tritongen-shm-bench-") as tmp:
        repo = write_repository(Path(tmp), elements)
        with LocalTritonServer(repo, http_port=0, grpc_port=0, metrics_port=0) as server:
            assert server.pid is not None
            contenders = [
                Contender(
                    f"{protocol}_{kind}",
                    LoadSpec(
                        model=MODEL,
                        address=ServerAddress.parse(
                            server.http_url if protocol == "http" else server.grpc_url,
                            protocol,
                            server.metrics_url,
                        ),
                        levels=(args.concurrency,),
                        duration_s=args.duration,
                        warmup_s=args.warmup,
                        max_duration_s=args.duration,
                        processes=1,
                        shared_memory=kind,  # type: ignore[arg-type]
                    ),
                )
                for protocol in protocols
                for kind in KINDS
            ]
            sampler = CpuSampler(server.pid)
            thread = threading.Thread(target=sampler.run, daemon=True)
            thread.start()
            try:
                rounds = measure_rounds(contenders, args.rounds, on_start=clock.started)
                finished = time.time()
            finally:
                sampler.stop.set()
                thread.join()
    document: dict[str, Any] = {
        "schema": SCHEMA,
        "model": MODEL,
        "tensor_mib": args.mib,
        "tensor_bytes": elements * 4,
        "settings": {
            "rounds": args.rounds,
            "concurrency": args.concurrency,
            "duration_s": args.duration,
            "warmup_s": args.warmup,
            "processes": 1,
            "protocols": protocols,
            "confidence": args.confidence,
            "cpu_sample_s": SAMPLE_S,
        },
        "status": rounds.status,
        "reason": rounds.reason,
        "rounds_completed": rounds.completed,
        **describe(rounds, sampler, clock.ends(finished), args.confidence),
    }
    print_table(document)
    console.print(f"wrote {write_result(args.json, document, sys.argv)}")


if __name__ == "__main__":
    main()
