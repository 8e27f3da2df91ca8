"""What ``loadtest --server-trace`` costs: the same load untraced, traced at every request and at one in 10.

The example MLP (ONNX) is served by one embedded server and loaded over HTTP at a fixed
concurrency (1 by default: the embedded Triton 2.51 can crash while it traces requests that
overlap, see ``tritongen/loadtest/server_trace.py``); three contenders are measured
round-robin, the order rotating: no trace, the server tracing every request (``--trace-rate
1``, each request also carrying its id and its times written by the load processes), and one
request in 10. Recorded per contender and round: infer/s, P50 and P99, and for the traced ones
how many measured requests were joined to their trace; per traced contender the paired ratios
traced / untraced of each figure, with their interval (a ratio whose interval holds 1 is no
cost this machine can resolve).

Usage: ``.venv/bin/python bench/server_trace.py [--rounds 5] [--concurrency 1] [--duration 5]
[--warmup 1] [--json bench/results/server_trace.json]`` (about 3 minutes with the defaults).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from noise import build_mlp
from provenance import RESULTS, require_committed_tree, write_result
from rich.console import Console

from tritongen.client.address import ServerAddress
from tritongen.intervals import DEFAULT_CONFIDENCE, paired_ratio, summarise
from tritongen.loadtest.result import RunResult
from tritongen.loadtest.rounds import Contender, measure_rounds
from tritongen.loadtest.spec import LoadSpec
from tritongen.server.local import LocalTritonServer

SCHEMA = "tritongen.bench.server_trace/1"
CONTENDERS = {"untraced": None, "traced_1": 1, "traced_10": 10}
"""Each contender's trace rate (None: no trace)."""
FIGURES = ("infer_per_s", "p50_us", "p99_us")
console = Console()


def run_figures(run: RunResult) -> dict[str, Any]:
    """One run's figures: throughput, latency, and how much of it the trace joined."""
    ok = run.status == "ok"
    latency = run.latency_us or {}
    trace = run.server_trace or {}
    return {
        "infer_per_s": run.infer_per_s if ok else None,
        "p50_us": latency.get("p50") if ok else None,
        "p99_us": latency.get("p99") if ok else None,
        "recorded": trace.get("recorded"),
        "joined": trace.get("joined"),
        "warnings": list(run.warnings),
    }


def measure(args: Any) -> dict[str, Any]:
    """Serve the MLP and measure the contenders in rounds; their figures and the paired ratios."""
    with tempfile.TemporaryDirectory(prefix="tritongen-trace-bench-") as tmp:
        repo, model = build_mlp(Path(tmp))
        with LocalTritonServer(repo, http_port=0, grpc_port=0, metrics_port=0, models=[model]) as server:
            base = LoadSpec(
                model=model,
                address=ServerAddress.parse(server.http_url, metrics_url=server.metrics_url),
                levels=(float(args.concurrency),),
                duration_s=args.duration,
                warmup_s=args.warmup,
                max_duration_s=args.duration,
            )
            contenders = [
                Contender(name, replace(base, server_trace=rate)) for name, rate in CONTENDERS.items()
            ]
            rounds = measure_rounds(
                contenders,
                args.rounds,
                on_start=lambda number, total, name: console.log(f"round {number}/{total}: {name}"),
            )
    per: dict[str, Any] = {}
    for name, runs in rounds.runs.items():
        figures = [run_figures(run) for run in runs]
        summary = {key: summarise([f[key] for f in figures], args.confidence) for key in FIGURES}
        per[name] = {
            "rounds": figures,
            "summary": {k: s.to_json() if s else None for k, s in summary.items()},
        }
    paired: dict[str, Any] = {}
    for name in ("traced_1", "traced_10"):
        if name in per and "untraced" in per:
            paired[name] = {}
            for key in FIGURES:
                ratio = paired_ratio(
                    [r[key] for r in per[name]["rounds"]], [r[key] for r in per["untraced"]["rounds"]],
                    args.confidence,
                )  # fmt: skip
                paired[name][key] = ratio.to_json() if ratio else None
    return {"model": model, "status": rounds.status, "contenders": per, "paired": paired}


def main() -> None:
    """Measure, print the ratios and write the JSON."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--duration", type=float, default=5.0, help="measured seconds per run")
    parser.add_argument("--warmup", type=float, default=1.0, help="warm-up seconds per run")
    parser.add_argument("--confidence", type=float, default=DEFAULT_CONFIDENCE)
    parser.add_argument("--json", type=Path, default=RESULTS / "server_trace.json")
    args = parser.parse_args()
    require_committed_tree(args.json)
    figures = measure(args)
    document = {
        "schema": SCHEMA,
        "settings": {
            "rounds": args.rounds,
            "concurrency": args.concurrency,
            "duration_s": args.duration,
            "warmup_s": args.warmup,
            "confidence": args.confidence,
            "trace_rates": CONTENDERS,
        },
        **figures,
    }
    for name, ratios in figures["paired"].items():
        parts = [
            f"{key} {r['estimate']:.3f}×"
            + ("" if r["ci_low"] is None else f" [{r['ci_low']:.3f}, {r['ci_high']:.3f}]")
            for key, r in ratios.items()
            if r
        ]
        joined = [(r["joined"], r["recorded"]) for r in figures["contenders"][name]["rounds"]]
        console.print(f"{name} / untraced: " + "; ".join(parts) + f"; joined/recorded per round {joined}")
    path = write_result(args.json, document, sys.argv)
    console.print(f"wrote {path}")


if __name__ == "__main__":
    main()
