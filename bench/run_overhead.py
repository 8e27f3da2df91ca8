"""What one load run costs beyond its warm-up and measured time, with Locust kept up and started per run.

A multi-level load test (levels interleaved over rounds, as ``loadtest --rounds`` and the
rounds of ``compare`` and ``tune`` run them) on the example MLP, served by one embedded
server, in two modes measured in turn (the order alternating): the Locust processes stay up
across the runs (the default), or a new one starts for each run (as before). Each run is
asked for a fixed warm-up and a fixed measured time (``--max-duration`` equal to
``--duration``, so no run is extended while it waits to be stable); the overhead of a run is
its wall time less those two. Reported per mode: the overhead per run (median, spread, least
and most over runs, and per run over each whole test), each run's wall time, and the
measured time it reports.

Usage: ``.venv/bin/python bench/run_overhead.py [--levels 1,2,4,8] [--rounds 3] [--duration 2]
[--warmup 0.5] [--repeats 3] [--json bench/results/run_overhead.json]`` (about 8 minutes with
the defaults).
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from noise import build_mlp
from provenance import RESULTS, require_committed_tree, write_result
from rich.console import Console

from tritongen.client.address import ServerAddress
from tritongen.loadtest.load_processes import load_processes
from tritongen.loadtest.runner import Progress, run_load_test
from tritongen.loadtest.spec import LoadSpec
from tritongen.server.local import LocalTritonServer

SCHEMA = "tritongen.bench.run_overhead/2"
console = Console()


class _Clock:
    """When each run started, from the progress callback (a new label is a new run)."""

    def __init__(self) -> None:
        self.starts: list[tuple[str, float]] = []

    def __call__(self, progress: Progress) -> None:
        if not self.starts or self.starts[-1][0] != progress.label:
            self.starts.append((progress.label, time.monotonic()))


MODES = {
    "kept": "Locust processes that stay up across runs (the default)",
    "fresh": "a new Locust process per run (as before)",
}


def one_test(spec: LoadSpec, share: bool, asked: float) -> dict[str, Any]:
    """One multi-level test; each run's wall time and overhead."""
    clock = _Clock()
    began = time.monotonic()
    with load_processes(share=share):
        report = run_load_test(spec, progress=clock)
    ended = time.monotonic()
    starts = [t for _, t in clock.starts] + [ended]
    walls = [b - a for a, b in itertools.pairwise(starts)]
    return {
        "status": report.status,
        "runs": len(report.runs),
        "wall_s": walls,
        "measured_s": [run.duration_s for run in report.runs],
        "overhead_s": [w - asked for w in walls],
        "test_wall_s": ended - began,
        "test_overhead_per_run_s": (ended - began - len(report.runs) * asked) / max(1, len(report.runs)),
    }


def summarise(tests: list[dict[str, Any]]) -> dict[str, Any]:
    """One mode's figures over its tests: every run's overhead, and per run over each whole test."""
    overheads = [o for test in tests for o in test["overhead_s"]]
    per_test = [test["test_overhead_per_run_s"] for test in tests]
    return {
        "tests": tests,
        "runs": sum(test["runs"] for test in tests),
        "overhead_median_s": statistics.median(overheads) if overheads else None,
        "overhead_spread_s": statistics.stdev(overheads) if len(overheads) > 1 else None,
        "overhead_min_s": min(overheads, default=None),
        "overhead_max_s": max(overheads, default=None),
        "test_overhead_per_run_s": statistics.median(per_test) if per_test else None,
    }


def measure(args: Any) -> dict[str, Any]:
    """Run the test in both modes, interleaved (the order alternating), and work out the overheads."""
    levels = tuple(float(x) for x in args.levels.split(","))
    asked = args.warmup + args.duration
    tests: dict[str, list[dict[str, Any]]] = {mode: [] for mode in MODES}
    with tempfile.TemporaryDirectory(prefix="tritongen-overhead-") as tmp:
        repo, model = build_mlp(Path(tmp))
        with LocalTritonServer(repo, http_port=0, grpc_port=0, metrics_port=0, models=[model]) as server:
            spec = LoadSpec(
                model=model,
                address=ServerAddress.parse(server.http_url, metrics_url=server.metrics_url),
                levels=levels,
                rounds=args.rounds,
                duration_s=args.duration,
                warmup_s=args.warmup,
                max_duration_s=args.duration,
            )
            for repeat in range(args.repeats):
                order = list(MODES) if repeat % 2 == 0 else list(reversed(MODES))
                for mode in order:
                    tests[mode].append(one_test(spec, mode == "kept", asked))
                    console.print(f"repeat {repeat + 1}/{args.repeats} {mode}: {_line(tests[mode][-1])}")
    modes = {mode: summarise(runs) for mode, runs in tests.items()}
    kept, fresh = modes["kept"]["overhead_median_s"], modes["fresh"]["overhead_median_s"]
    return {
        "model": model,
        "modes": modes,
        "saved_per_run_s": None if kept is None or fresh is None else fresh - kept,
    }


def _line(test: dict[str, Any]) -> str:
    overheads = test["overhead_s"]
    median = statistics.median(overheads) if overheads else float("nan")
    return f"{test['runs']} runs ({test['status']}), overhead median {median:.2f} s"


def main() -> None:
    """Measure, print the figures and write the JSON."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--levels", default="1,2,4,8", help="concurrency levels")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=float, default=2.0, help="measured seconds per run")
    parser.add_argument("--warmup", type=float, default=0.5, help="warm-up seconds per run")
    parser.add_argument("--repeats", type=int, default=3, help="tests per mode, the modes alternating")
    parser.add_argument("--json", type=Path, default=RESULTS / "run_overhead.json")
    args = parser.parse_args()
    require_committed_tree(args.json)
    figures = measure(args)
    document = {
        "schema": SCHEMA,
        "settings": {
            "levels": args.levels,
            "rounds": args.rounds,
            "duration_s": args.duration,
            "warmup_s": args.warmup,
            "repeats": args.repeats,
            "generators": MODES,
        },
        **figures,
    }
    for mode, text in MODES.items():
        f = figures["modes"][mode]
        console.print(
            f"{text}: {f['runs']} runs of {args.warmup:g} s warm-up + {args.duration:g} s, overhead per "
            f"run median {f['overhead_median_s']:.2f} s (s.d. {f['overhead_spread_s'] or 0:.2f} s), "
            f"{f['test_overhead_per_run_s']:.2f} s per run over the whole test"
        )
    path = write_result(args.json, document, sys.argv)
    console.print(f"wrote {path}")


if __name__ == "__main__":
    main()
