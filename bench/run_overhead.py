"""What one load run costs beyond its warm-up and measured time: Locust's start, windows settling.

A multi-level load test (levels interleaved over rounds, as ``loadtest --rounds`` and the
rounds of ``compare`` and ``tune`` run them) on the example MLP, served by one embedded
server. Each run is asked for a fixed warm-up and a fixed measured time (``--max-duration``
equal to ``--duration``, so no run is extended while it waits to be stable); the overhead of a
run is its wall time less those two. Reported: the overhead per run (median, spread over
runs, and in total over the test), each run's wall time, and the measured time it reports.

Usage: ``.venv/bin/python bench/run_overhead.py [--levels 1,2,4,8] [--rounds 3] [--duration 2]
[--warmup 0.5] [--json bench/results/run_overhead.json]`` (about 1½ minutes with the defaults).
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

from provenance import RESULTS, write_result
from rich.console import Console

from tritongen.examples.models import write_example
from tritongen.loadtest.runner import Progress, run_load_test
from tritongen.loadtest.spec import LoadSpec
from tritongen.pipeline.request import BuildRequest
from tritongen.pipeline.run import build_models
from tritongen.server.local import LocalTritonServer

SCHEMA = "tritongen.bench.run_overhead/1"
console = Console()


class _Clock:
    """When each run started, from the progress callback (a new label is a new run)."""

    def __init__(self) -> None:
        self.starts: list[tuple[str, float]] = []

    def __call__(self, progress: Progress) -> None:
        if not self.starts or self.starts[-1][0] != progress.label:
            self.starts.append((progress.label, time.monotonic()))


def _build(root: Path) -> tuple[Path, str]:
    source = write_example("mlp", root / "mlp.onnx")
    repo = root / "repo"
    result = build_models(BuildRequest(source=source, name="mlp", repo=repo, formats=("onnx",)))
    if result.failures or not result.models:
        raise SystemExit(f"could not convert the example model: {result.failures}")
    return repo, result.models[0].name


def measure(args: Any) -> dict[str, Any]:
    """Run the test and work out each run's wall time and overhead."""
    levels = tuple(float(x) for x in args.levels.split(","))
    with tempfile.TemporaryDirectory(prefix="tritongen-overhead-") as tmp:
        repo, model = _build(Path(tmp))
        with LocalTritonServer(repo, http_port=0, grpc_port=0, metrics_port=0, models=[model]) as server:
            spec = LoadSpec(
                model=model,
                url=server.http_url,
                levels=levels,
                rounds=args.rounds,
                duration_s=args.duration,
                warmup_s=args.warmup,
                max_duration_s=args.duration,
                metrics_url=server.metrics_url,
            )
            clock = _Clock()
            began = time.monotonic()
            report = run_load_test(spec, progress=clock)
            ended = time.monotonic()
    starts = [t for _, t in clock.starts] + [ended]
    walls = [b - a for a, b in itertools.pairwise(starts)]
    asked = args.warmup + args.duration
    overheads = [w - asked for w in walls]
    return {
        "model": model,
        "status": report.status,
        "runs": len(report.runs),
        "wall_s": walls,
        "measured_s": [run.duration_s for run in report.runs],
        "overhead_s": overheads,
        "overhead_median_s": statistics.median(overheads) if overheads else None,
        "overhead_spread_s": statistics.stdev(overheads) if len(overheads) > 1 else None,
        "test_wall_s": ended - began,
        "test_overhead_per_run_s": (ended - began - len(report.runs) * asked) / max(1, len(report.runs)),
    }


def main() -> None:
    """Measure, print the figures and write the JSON."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--levels", default="1,2,4,8", help="concurrency levels")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=float, default=2.0, help="measured seconds per run")
    parser.add_argument("--warmup", type=float, default=0.5, help="warm-up seconds per run")
    parser.add_argument("--json", type=Path, default=RESULTS / "run_overhead.json")
    args = parser.parse_args()
    figures = measure(args)
    document = {
        "schema": SCHEMA,
        "settings": {
            "levels": args.levels,
            "rounds": args.rounds,
            "duration_s": args.duration,
            "warmup_s": args.warmup,
            "generator": "a new Locust process per run",
        },
        **figures,
    }
    console.print(
        f"{figures['runs']} runs of {args.warmup:g} s warm-up + {args.duration:g} s: overhead per run "
        f"median {figures['overhead_median_s']:.2f} s (s.d. {figures['overhead_spread_s'] or 0:.2f} s), "
        f"{figures['test_overhead_per_run_s']:.2f} s per run over the whole test"
    )
    path = write_result(args.json, document, sys.argv)
    console.print(f"wrote {path}")


if __name__ == "__main__":
    main()
