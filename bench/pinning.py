"""Server and load generator apart (``--cpus``) against not pinned: A/A noise and throughput, side by side.

The example MLP and an identical copy (as ``bench/noise.py`` builds them) are served by one
embedded server and measured in interleaved rounds as four contenders: A and A' not pinned,
and A and A' with ``--cpus server=S,load=L``; the order rotates round by round. For each
setting: the A/A' paired ratios of throughput and P99 (their spread is the noise a decision
must beat) and each figure's CV over rounds. Between the settings: the paired ratio of
throughput and of P99, pinned over not pinned (per round, the geometric mean of A and A').

Usage: ``.venv/bin/python bench/pinning.py [--cpus server=0,load=1] [--rounds 8] [--concurrency 8]
[--duration 4] [--warmup 1.5] [--json bench/results/pinning.json]`` (about 6 minutes with the
defaults on 2 cores).
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
from pathlib import Path
from typing import Any

from noise import build_pair, describe
from provenance import RESULTS, require_committed_tree, write_result
from rich.console import Console
from rich.table import Table

from tritongen.client.address import ServerAddress
from tritongen.intervals import DEFAULT_CONFIDENCE, paired_ratio
from tritongen.loadtest.result import RunResult
from tritongen.loadtest.rounds import Contender, Rounds, measure_rounds
from tritongen.loadtest.spec import LoadSpec
from tritongen.server.affinity import CpuPlan, machine_cores, parse_cpus
from tritongen.server.local import LocalTritonServer

SCHEMA = "tritongen.bench.pinning/1"
SETTINGS = ("unpinned", "pinned")
console = Console()


def _default_plan() -> str:
    cores = sorted(machine_cores())
    half = max(1, len(cores) // 2)
    return f"server={','.join(map(str, cores[:half]))},load={','.join(map(str, cores[half:]))}"


def _figure(key: str, run: RunResult) -> float | None:
    if key == "infer_per_s":
        return run.infer_per_s
    return (run.latency_us or {}).get("p99")


def _between(rounds: Rounds, names: tuple[str, str], key: str, confidence: float) -> dict[str, Any] | None:
    """Pinned over not pinned, per round the geometric mean of A and A' in each setting."""

    def setting(label: str) -> list[float | None]:
        a, b = (rounds.figures(f"{n} {label}", lambda run: _figure(key, run)) for n in names)
        return [math.sqrt(x * y) if x and y else None for x, y in zip(a, b, strict=True)]

    ratio = paired_ratio(setting("pinned"), setting("unpinned"), confidence)
    return None if ratio is None else ratio.to_json()


def _other_cpu(rounds: Rounds) -> float | None:
    """Cores other processes used during the runs, on average (a busy machine shows here)."""
    seen = [run.other_cpu for runs in rounds.runs.values() for run in runs if run.other_cpu is not None]
    return sum(seen) / len(seen) if seen else None


def _contenders(
    server: LocalTritonServer, names: tuple[str, str], plan: CpuPlan, args: Any
) -> list[Contender]:
    out = []
    for label in SETTINGS:
        for name in names:
            spec = LoadSpec(
                model=name,
                address=ServerAddress.parse(server.http_url, metrics_url=server.metrics_url),
                levels=(args.concurrency,),
                duration_s=args.duration,
                warmup_s=args.warmup,
                max_duration_s=1.5 * args.duration,
                cpus=plan if label == "pinned" else None,
            )
            out.append(Contender(f"{name} {label}", spec))
    return out


def print_table(document: dict[str, Any]) -> None:
    """Per setting: the A/A' spread of throughput and P99, and each CV; then pinned over not pinned."""
    cpus, completed = document["settings"]["cpus"], document["rounds_completed"]
    table = Table(title=f"--cpus {cpus} against not pinned, {completed} rounds")
    for column in ("setting", "infer/s CV", "P99 CV", "A/A' infer/s sd", "A/A' P99 sd", "A/A' called"):
        table.add_column(column, justify="left" if column == "setting" else "right")
    for label in SETTINGS:
        noise = document["settings_measured"][label]["noise"]
        called = document["settings_measured"][label]["aa_significant"]

        def pct(value: float | None) -> str:
            return "–" if value is None else f"{value:.1%}"

        table.add_row(
            label,
            pct(noise["infer_per_s_cv"]),
            pct(noise["p99_us_cv"]),
            pct(noise["infer_per_s_ratio_log_sd"]),
            pct(noise["p99_us_ratio_log_sd"]),
            ", ".join(k for k, v in called.items() if v) or "tie (right)",
        )
    console.print(table)
    for key, ratio in document["pinned_over_unpinned"].items():
        if ratio is None:
            continue
        low, high = ratio["ci_low"], ratio["ci_high"]
        interval = "" if low is None else f" [{low:.3f}, {high:.3f}]"
        console.print(f"{key}, pinned over not pinned: {ratio['estimate']:.3f}×{interval}")


def main() -> None:
    """Measure the four contenders in rounds, print the table and write the JSON."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cpus", default=_default_plan(), help="the pinned setting (default: halves)")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--duration", type=float, default=4.0)
    parser.add_argument("--warmup", type=float, default=1.5)
    parser.add_argument("--confidence", type=float, default=DEFAULT_CONFIDENCE)
    parser.add_argument("--json", type=Path, default=RESULTS / "pinning.json")
    args = parser.parse_args()
    require_committed_tree(args.json)
    plan = parse_cpus(args.cpus)
    with tempfile.TemporaryDirectory(prefix="tritongen-pinning-") as tmp:
        repo, original, copy = build_pair(Path(tmp))
        names = (original, copy)
        with LocalTritonServer(repo, http_port=0, grpc_port=0, metrics_port=0, models=list(names)) as server:
            rounds = measure_rounds(
                _contenders(server, names, plan, args),
                args.rounds,
                on_start=lambda number, total, name: console.log(f"round {number}/{total}: {name}"),
            )
    document: dict[str, Any] = {
        "schema": SCHEMA,
        "model": original,
        "settings": {
            "cpus": args.cpus,
            "machine_cores": len(machine_cores()),
            "rounds": args.rounds,
            "concurrency": args.concurrency,
            "duration_s": args.duration,
            "warmup_s": args.warmup,
            "protocol": "http",
            "confidence": args.confidence,
        },
        "status": rounds.status,
        "reason": rounds.reason,
        "rounds_completed": rounds.completed,
        "settings_measured": {
            label: describe(rounds, (f"{original} {label}", f"{copy} {label}"), args.confidence)
            for label in SETTINGS
        },
        "other_cpu_mean": _other_cpu(rounds),
        "pinned_over_unpinned": {
            key: _between(rounds, names, key, args.confidence) for key in ("infer_per_s", "p99_us")
        },
    }
    print_table(document)
    path = write_result(args.json, document, sys.argv)
    console.print(f"wrote {path}")


if __name__ == "__main__":
    main()
