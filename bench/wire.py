"""How true tritongen's latencies are: each run's figures against the loopback capture of its requests.

The example MLP (ONNX) is served by one embedded server and loaded at a fixed concurrency
with ``loadtest --wire`` (tcpdump on the loopback; root): over plain HTTP, over gRPC, and over
HTTP without the capture (what capturing costs). The contenders are measured round-robin,
the order rotating. Recorded per run: the reported P50, P90, P99 and P99.9, the same
requests' wire latency (first byte out to the response's last byte back), the client's own
time after the response arrived (``client_overhead_us``, plain HTTP: the kernel's receive
stamps), the gap reported - (wire + client) and whether it is within max(2%, 100 µs); over
gRPC, the client library's own time (reported - wire). Per figure over the rounds: the
median and interval of each, and the paired ratio of the HTTP throughput captured / not.

Usage: ``.venv/bin/python bench/wire.py [--rounds 5] [--concurrency 4] [--duration 5]
[--warmup 1] [--json bench/results/wire.json]`` (about 3 minutes with the defaults; needs
tcpdump, ``make wire``, and root).
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

SCHEMA = "tritongen.bench.wire/1"
QUANTILES = ("p50", "p90", "p99", "p999")
console = Console()


def run_figures(run: RunResult) -> dict[str, Any]:
    """One run's figures: throughput, the reported and the wire's latency, the client's time, the gaps."""
    wire = run.wire or {}
    agreement = wire.get("agreement") or {}
    reported = run.latency_us or {}
    figures: dict[str, Any] = {
        "status": run.status,
        "infer_per_s": run.infer_per_s if run.status == "ok" else None,
        "recorded": wire.get("recorded"),
        "matched": wire.get("matched"),
        "warnings": list(run.warnings),
    }
    for key in QUANTILES:
        on_wire = (wire.get("wire_us") or {}).get(key)
        figures[f"reported_{key}_us"] = reported.get(key)
        figures[f"wire_{key}_us"] = on_wire
        figures[f"client_{key}_us"] = (run.client_overhead_us or {}).get(key)
        row = agreement.get(key) or {}
        figures[f"gap_{key}_us"] = row.get("gap")
        figures[f"within_{key}"] = row.get("within")
        figures[f"reported_minus_wire_{key}_us"] = (
            None if on_wire is None or key not in reported else reported[key] - on_wire
        )
    return figures


def _summaries(figures: list[dict[str, Any]], confidence: float) -> dict[str, Any]:
    keys = [key for key in figures[0] if key.endswith("_us") or key == "infer_per_s"]
    summary = {key: summarise([f[key] for f in figures], confidence) for key in keys}
    out: dict[str, Any] = {key: s.to_json() if s else None for key, s in summary.items()}
    for key in QUANTILES:
        verdicts = [f[f"within_{key}"] for f in figures if f[f"within_{key}"] is not None]
        out[f"within_{key}"] = f"{sum(verdicts)}/{len(verdicts)}" if verdicts else None
    return out


def measure(args: Any) -> dict[str, Any]:
    """Serve the MLP and measure the contenders in rounds; their figures and summaries."""
    with tempfile.TemporaryDirectory(prefix="tritongen-wire-bench-") as tmp:
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
            grpc = ServerAddress.parse(server.grpc_url, protocol="grpc", metrics_url=server.metrics_url)
            contenders = [
                Contender("http", replace(base, wire=True)),
                Contender("grpc", replace(base, address=grpc, wire=True)),
                Contender("http_uncaptured", base),
            ]
            rounds = measure_rounds(
                contenders,
                args.rounds,
                on_start=lambda number, total, name: console.log(f"round {number}/{total}: {name}"),
            )
    per: dict[str, Any] = {}
    for name, runs in rounds.runs.items():
        figures = [run_figures(run) for run in runs]
        per[name] = {"rounds": figures, "summary": _summaries(figures, args.confidence)}
    cost = None
    if "http" in per and "http_uncaptured" in per:
        ratio = paired_ratio(
            [r["infer_per_s"] for r in per["http"]["rounds"]],
            [r["infer_per_s"] for r in per["http_uncaptured"]["rounds"]],
            args.confidence,
        )
        cost = ratio.to_json() if ratio else None
    return {"model": model, "status": rounds.status, "contenders": per, "captured_throughput_ratio": cost}


def _print(figures: dict[str, Any]) -> None:
    for name in ("http", "grpc"):
        summary = (figures["contenders"].get(name) or {}).get("summary") or {}
        for key in QUANTILES:
            cells = []
            for part in ("reported", "wire", "client", "gap", "reported_minus_wire"):
                s = summary.get(f"{part}_{key}_us")
                if s:
                    low, high = s["ci_low"], s["ci_high"]
                    span = "" if low is None else f" [{low:,.0f}, {high:,.0f}]"
                    cells.append(f"{part} {s['median']:,.0f}{span}")
            console.print(f"{name} {key}: " + "; ".join(cells) + f"; within {summary.get(f'within_{key}')}")
    ratio = figures["captured_throughput_ratio"]
    if ratio:
        console.print(f"http throughput captured / uncaptured: {ratio['estimate']:.3f}x "
                      f"[{ratio['ci_low']}, {ratio['ci_high']}]")  # fmt: skip


def main() -> None:
    """Measure, print the figures and write the JSON."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--duration", type=float, default=5.0, help="measured seconds per run")
    parser.add_argument("--warmup", type=float, default=1.0, help="warm-up seconds per run")
    parser.add_argument("--confidence", type=float, default=DEFAULT_CONFIDENCE)
    parser.add_argument("--json", type=Path, default=RESULTS / "wire.json")
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
        },
        **figures,
    }
    _print(figures)
    path = write_result(args.json, document, sys.argv)
    console.print(f"wrote {path}")


if __name__ == "__main__":
    main()
