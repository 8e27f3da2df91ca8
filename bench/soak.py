"""Soak: a long open-loop load at a fraction of the measured maximum against the embedded server.

First a short closed-loop ramp finds the model's maximum throughput on this machine; then
one open-loop run holds ``--fraction`` (70%) of it for ``--duration`` (10 minutes), measured
in one-minute windows, while the resident memory of the load generator (the Locust
processes) and of the server (tritonserver and its Python-backend stubs) is sampled.

Printed and written as JSON: errors, P99 of every minute and the drift between the first
and the last minute, and the RSS growth of both sides from the first to the last minute.
It passes when there are no errors and both RSS growths are under 10%.

Usage: ``.venv/bin/python bench/soak.py [--duration 600] [--fraction 0.7] [--json PATH]``
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
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
from tritongen.loadtest.runner import run_load_test
from tritongen.loadtest.spec import LoadSpec
from tritongen.server.local import LocalTritonServer

console = Console()
ROOT = Path(__file__).resolve().parents[1]
MINUTE = 60.0
GROWTH_LIMIT = 0.10


@dataclass
class RssSampler:
    """RSS of the server's process tree and of this process's Locust children, every few seconds."""

    server_pid: int
    every_s: float = 5.0
    samples: list[tuple[float, int, int]] = field(default_factory=list)
    """(time, server bytes, load-generator bytes)."""
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        """Sample in a background thread."""
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop sampling."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _loop(self) -> None:
        while not self._stop.wait(self.every_s):
            try:
                server = _tree_rss(psutil.Process(self.server_pid))
                generator = sum(_rss(p) for p in psutil.Process().children(recursive=True) if _is_locust(p))
            except psutil.Error:  # a process came or went while being read: the next sample counts
                continue
            if generator:  # only while Locust runs
                self.samples.append((time.time(), server, generator))

    def mean(self, start: float, end: float) -> tuple[float, float]:
        """Mean (server, generator) RSS over samples in ``[start, end)``."""
        chosen = [(s, g) for t, s, g in self.samples if start <= t < end]
        if not chosen:
            seen = f"{self.samples[0][0]:.0f}..{self.samples[-1][0]:.0f}" if self.samples else "none"
            raise RuntimeError(f"no RSS sample between {start:.0f} and {end:.0f} (samples: {seen})")
        return statistics.fmean(s for s, _ in chosen), statistics.fmean(g for _, g in chosen)


def _rss(process: psutil.Process) -> int:
    try:
        return int(process.memory_info().rss)
    except psutil.Error:
        return 0


def _tree_rss(process: psutil.Process) -> int:
    return _rss(process) + sum(_rss(child) for child in process.children(recursive=True))


def _is_locust(process: psutil.Process) -> bool:
    try:
        return "locust" in " ".join(process.cmdline())
    except psutil.Error:
        return False


def _max_throughput(server: LocalTritonServer, model: str, levels: tuple[int, ...]) -> tuple[float, int]:
    """Highest requests/s over a short closed-loop ramp, and the concurrency that gave it."""
    spec = LoadSpec(
        model=model, address=ServerAddress.parse(server.http_url, metrics_url=server.metrics_url),
        mode="concurrency", levels=tuple(float(c) for c in levels),
        duration_s=6.0, warmup_s=2.0, window_s=1.0, max_duration_s=6.0,
    )  # fmt: skip
    report = run_load_test(spec)
    best = max(report.runs, key=lambda r: r.qps)
    for run in report.runs:
        console.print(f"  c={run.concurrency}: {run.qps:,.0f} req/s, errors {run.errors}")
    return best.qps, int(best.concurrency or 0)


def soak(model: str, repo: Path, duration_s: float, fraction: float, max_inflight: int) -> dict[str, Any]:
    """Find the maximum, soak at ``fraction`` of it, and return the figures."""
    with LocalTritonServer(repo, http_port=0, grpc_port=0, metrics_port=0, models=[model]) as server:
        assert server.pid is not None
        console.print(f"[bold]{model}[/]: finding the maximum throughput")
        max_qps, at = _max_throughput(server, model, (1, 2, 4, 8))
        rate = round(max_qps * fraction)
        console.print(
            f"maximum {max_qps:,.0f} req/s at c={at}; soaking at {rate:,} req/s for {duration_s:.0f} s"
        )
        sampler = RssSampler(server.pid)
        sampler.start()
        spec = LoadSpec(
            model=model, address=ServerAddress.parse(server.http_url, metrics_url=server.metrics_url),
            mode="rate", levels=(float(rate),), arrival="poisson",
            duration_s=duration_s, warmup_s=0.0, window_s=MINUTE, max_duration_s=duration_s,
            max_inflight=max_inflight,
        )  # fmt: skip
        started = time.time()
        try:
            report = run_load_test(spec)
        finally:
            ended = time.time()
            sampler.stop()
    (run,) = report.runs
    minutes = [float(w["p99_us"] or 0.0) for w in run.windows]
    first_minute = (ended - run.duration_s, ended - run.duration_s + MINUTE)
    last_minute = (ended - MINUTE, ended)
    server_first, generator_first = sampler.mean(*first_minute)
    server_last, generator_last = sampler.mean(*last_minute)
    result: dict[str, Any] = {
        "model": model,
        "max_req_per_s": max_qps,
        "max_at_concurrency": at,
        "fraction": fraction,
        "max_inflight": max_inflight,
        "target_req_per_s": rate,
        "achieved_req_per_s": run.achieved_rate,
        "duration_s": run.duration_s,
        "wall_s": ended - started,
        "requests": run.requests,
        "errors": run.errors,
        "errors_by_kind": run.errors_by_kind,
        "status": run.status,
        "p99_us_per_minute": minutes,
        "p99_us_first_minute": minutes[0] if minutes else None,
        "p99_us_last_minute": minutes[-1] if minutes else None,
        "p99_drift": (minutes[-1] / minutes[0] - 1) if len(minutes) >= 2 and minutes[0] else None,
        "p99_us_median_minute": statistics.median(minutes) if minutes else None,
        "latency_us": run.latency_us,
        "server_rss_bytes": {"first_minute": server_first, "last_minute": server_last},
        "server_rss_growth": server_last / server_first - 1,
        "generator_rss_bytes": {"first_minute": generator_first, "last_minute": generator_last},
        "generator_rss_growth": generator_last / generator_first - 1,
        "rss_samples": len(sampler.samples),
        "warnings": run.warnings,
        "cpus": os.cpu_count(),
    }
    result["passed"] = (
        run.status == "ok"
        and run.errors == 0
        and result["server_rss_growth"] < GROWTH_LIMIT
        and result["generator_rss_growth"] < GROWTH_LIMIT
    )
    return result


def _growth(result: dict[str, Any], side: str) -> str:
    first = result[f"{side}_rss_bytes"]["first_minute"]
    return f"{result[f'{side}_rss_growth']:+.1%} ({first / 1e6:,.0f} MB in the first minute)"


def _print(result: dict[str, Any]) -> None:
    table = Table(title=f"soak: {result['model']} at {result['target_req_per_s']:,} req/s "
                        f"({result['fraction']:.0%} of {result['max_req_per_s']:,.0f})")  # fmt: skip
    table.add_column("figure")
    table.add_column("value", justify="right")
    rows = [
        ("measured", f"{result['duration_s']:.0f} s, {result['requests']:,} requests"),
        ("achieved rate", f"{result['achieved_req_per_s'] or 0:,.1f} req/s"),
        ("errors", f"{result['errors']}"),
        ("P99 first minute", f"{(result['p99_us_first_minute'] or 0) / 1000:.3f} ms"),
        ("P99 last minute", f"{(result['p99_us_last_minute'] or 0) / 1000:.3f} ms"),
        ("P99 drift", f"{(result['p99_drift'] or 0):+.1%}"),
        ("P99 median minute", f"{(result['p99_us_median_minute'] or 0) / 1000:.3f} ms"),
        ("server RSS growth", _growth(result, "server")),
        ("load-generator RSS growth", _growth(result, "generator")),
        ("passed", "yes" if result["passed"] else "NO"),
    ]  # fmt: skip
    for row in rows:
        table.add_row(*row)
    console.print(table)
    minutes = ", ".join(f"{p / 1000:.2f}" for p in result["p99_us_per_minute"])
    console.print(f"P99 per minute (ms): {minutes}", highlight=False)


def main() -> int:
    """Run the soak; exit 1 when it fails."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="mlp_onnx", help="a model of --repo")
    parser.add_argument("--repo", type=Path, default=ROOT / "model_repository")
    parser.add_argument("--duration", type=float, default=600.0, help="soak seconds (default 600)")
    parser.add_argument("--fraction", type=float, default=0.7, help="share of the maximum throughput")
    parser.add_argument(
        "--max-inflight",
        type=int,
        default=8192,
        help="requests the generator may have in flight; sends due beyond it wait for a slot and go "
        "out late (counted as held back, their latency from the schedule)",
    )
    parser.add_argument("--json", type=Path, default=RESULTS / "soak.json")
    args = parser.parse_args()
    require_committed_tree(args.json)
    if args.duration < 2 * MINUTE:
        parser.error("--duration must be at least 120 s: the first and last minutes are compared")
    result = soak(args.model, args.repo, args.duration, args.fraction, args.max_inflight)
    _print(result)
    path = write_result(args.json, result, sys.argv)
    console.print(f"wrote {path}", highlight=False, markup=False)
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
