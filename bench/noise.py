"""The noise floor of this machine: an A/A series on the example model.

The example MLP is converted to ONNX (target ``local``) and copied to an identical second
model; both are served by one embedded Triton server and measured round-robin (A A', A
A', …) with the same load, as ``compare`` and ``tune`` measure contenders. Since the two
are the same model, every difference between them is noise. Recorded per contender and
round: infer/s, P50 and P99; per figure its median, 95% interval and coefficient of
variation over rounds; the per-round paired ratio A/A' of throughput and of P99 with its
interval and spread (standard deviation of the log ratio), and whether that A/A
comparison came out significant (it should not). The ``noise`` block sums it up: the larger
of the two contenders' CVs per figure, and the standard deviation of the A/A' log ratio
(``tests/test_intervals.py`` simulates its A/A and power trials with these).

Usage: ``.venv/bin/python bench/noise.py [--rounds 10] [--concurrency 8] [--batch-size 1]
[--duration 5] [--warmup 2] [--json bench/results/noise.json]`` (about 3-4 minutes with
the defaults).
"""

from __future__ import annotations

import argparse
import math
import re
import shutil
import statistics
import sys
import tempfile
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from provenance import RESULTS, require_committed_tree, write_result
from rich.console import Console
from rich.table import Table

from tritongen.client.address import ServerAddress
from tritongen.examples.models import write_example
from tritongen.intervals import DEFAULT_CONFIDENCE, Ratio, Summary, format_summary, paired_ratio, summarise
from tritongen.loadtest.result import RunResult
from tritongen.loadtest.rounds import Contender, Rounds, measure_rounds
from tritongen.loadtest.spec import LoadSpec
from tritongen.pipeline.request import BuildRequest
from tritongen.pipeline.run import build_models
from tritongen.server.local import LocalTritonServer

SCHEMA = "tritongen.bench.noise/1"
FIGURES = ("infer_per_s", "p50_us", "p99_us")
PAIRED = ("infer_per_s", "p99_us")

console = Console()


def _figure(key: str, run: RunResult) -> float | None:
    if key == "infer_per_s":
        return run.infer_per_s
    latency = run.latency_us or {}
    return latency.get(key.removesuffix("_us"))


def build_mlp(root: Path) -> tuple[Path, str]:
    """The example MLP converted to ONNX in ``root/repo``: the repository and the model's name."""
    source = write_example("mlp", root / "mlp.onnx")
    repo = root / "repo"
    result = build_models(BuildRequest(source=source, name="mlp", repo=repo, formats=("onnx",)))
    if result.failures or not result.models:
        raise SystemExit(f"could not convert the example model: {result.failures}")
    return repo, result.models[0].name


def build_pair(root: Path) -> tuple[Path, str, str]:
    """The example MLP converted to ONNX, plus an identical copy under another name."""
    repo, original = build_mlp(root)
    copy = f"{original}_copy"
    shutil.copytree(repo / original, repo / copy)
    config = repo / copy / "config.pbtxt"
    text = config.read_text(encoding="utf-8")
    config.write_text(re.sub(r'^name: ".*"$', f'name: "{copy}"', text, count=1, flags=re.M), encoding="utf-8")
    return repo, original, copy


def log_sd(ratio: Ratio | None) -> float | None:
    """Sample standard deviation of the per-round log ratios (``None`` under two rounds)."""
    if ratio is None or ratio.rounds < 2:
        return None
    return statistics.stdev(math.log(r) for r in ratio.ratios)


def ratio_cv(ratio: Ratio | None) -> float | None:
    """Coefficient of variation of the per-round ratios (``None`` under two rounds)."""
    if ratio is None or ratio.rounds < 2:
        return None
    return statistics.stdev(ratio.ratios) / statistics.fmean(ratio.ratios)


def describe(rounds: Rounds, names: tuple[str, str], confidence: float) -> dict[str, Any]:
    """The per-round figures, their summaries, the paired A/A' ratios and the A/A verdicts."""
    contenders: dict[str, Any] = {}
    summaries: dict[str, dict[str, Summary | None]] = {}
    for name in names:
        values = {key: rounds.figures(name, partial(_figure, key)) for key in FIGURES}
        summaries[name] = {
            key: summarise([v for v in values[key] if v is not None], confidence) for key in FIGURES
        }
        contenders[name] = {
            "rounds": values,
            "summary": {k: (s.to_json() if s is not None else None) for k, s in summaries[name].items()},
        }
    a, b = names
    paired: dict[str, Any] = {}
    for key in PAIRED:
        xs = rounds.figures(a, partial(_figure, key))
        ys = rounds.figures(b, partial(_figure, key))
        ratio = paired_ratio(
            [math.nan if v is None else v for v in xs], [math.nan if v is None else v for v in ys], confidence
        )
        paired[key] = {
            **(ratio.to_json() if ratio is not None else {"estimate": None, "significant": False}),
            "log_sd": log_sd(ratio),
            "ratio_cv": ratio_cv(ratio),
        }
    cvs = {
        key: [s.cv for n in names if (s := summaries[n][key]) is not None and s.cv is not None]
        for key in FIGURES
    }
    noise = {
        "infer_per_s_cv": max(cvs["infer_per_s"], default=None),
        "p50_us_cv": max(cvs["p50_us"], default=None),
        "p99_us_cv": max(cvs["p99_us"], default=None),
        "infer_per_s_ratio_log_sd": paired["infer_per_s"]["log_sd"],
        "p99_us_ratio_log_sd": paired["p99_us"]["log_sd"],
    }
    return {
        "contenders": contenders,
        "paired": paired,
        "noise": noise,
        "aa_significant": {key: bool(paired[key]["significant"]) for key in PAIRED},
    }


def _scaled(summary: Summary, factor: float) -> Summary:
    """The same summary in another unit (µs to ms)."""

    def scale(value: float | None) -> float | None:
        return None if value is None else value * factor

    return replace(
        summary,
        values=tuple(v * factor for v in summary.values),
        median=summary.median * factor,
        mean=summary.mean * factor,
        low=scale(summary.low),
        high=scale(summary.high),
    )


def print_table(document: dict[str, Any]) -> None:
    """Per contender: each figure as ``median ± half-interval`` and its CV; then the A/A' ratios."""
    table = Table(title=f"A/A noise, {document['rounds_completed']} rounds (embedded server)")
    for column in ("model", "infer/s", "CV", "P50 ms", "CV", "P99 ms", "CV"):
        table.add_column(column, justify="left" if column == "model" else "right")
    for name, data in document["contenders"].items():
        cells = [name]
        for key in FIGURES:
            found = data["summary"][key]
            summary = (
                None
                if found is None
                else _scaled(Summary.from_json(found), 1.0 if key == "infer_per_s" else 1e-3)
            )
            cells.append(format_summary(summary, digits=0 if key == "infer_per_s" else 3))
            cells.append("–" if summary is None or summary.cv is None else f"{summary.cv:.1%}")
        table.add_row(*cells)
    console.print(table)
    for key in PAIRED:
        paired = document["paired"][key]
        if paired.get("estimate") is None:
            console.print(f"{key} A/A': no paired round")
            continue
        low, high = paired.get("ci_low"), paired.get("ci_high")
        interval = "no interval" if low is None or high is None else f"[{low:.3f}, {high:.3f}]"
        spread = paired["log_sd"]
        verdict = "DIFFERENT (a false positive)" if paired["significant"] else "tie"
        console.print(
            f"{key} A/A': {paired['estimate']:.3f}× {interval}, "
            f"sd(log ratio) {'–' if spread is None else f'{spread:.1%}'}: {verdict}"
        )


def main() -> None:
    """Build the pair, measure it in rounds, print the table and write the JSON."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--concurrency", type=int, default=8, help="closed-loop concurrent requests")
    parser.add_argument("--batch-size", type=int, default=1)
    parser.add_argument("--duration", type=float, default=5.0, help="measured seconds per run")
    parser.add_argument("--warmup", type=float, default=2.0, help="warm-up seconds per run")
    parser.add_argument(
        "--max-duration",
        type=float,
        default=None,
        help="longest measured seconds per run (default 1.5 × --duration, as compare)",
    )
    parser.add_argument("--confidence", type=float, default=DEFAULT_CONFIDENCE)
    parser.add_argument("--json", type=Path, default=RESULTS / "noise.json")
    args = parser.parse_args()
    require_committed_tree(args.json)
    max_duration = args.max_duration if args.max_duration is not None else 1.5 * args.duration
    with tempfile.TemporaryDirectory(prefix="tritongen-noise-") as tmp:
        repo, original, copy = build_pair(Path(tmp))
        with LocalTritonServer(
            repo, http_port=0, grpc_port=0, metrics_port=0, models=[original, copy]
        ) as server:
            contenders = [
                Contender(
                    name,
                    LoadSpec(
                        model=name,
                        address=ServerAddress.parse(server.http_url, metrics_url=server.metrics_url),
                        levels=(args.concurrency,),
                        batch_size=args.batch_size,
                        duration_s=args.duration,
                        warmup_s=args.warmup,
                        max_duration_s=max_duration,
                    ),
                )
                for name in (original, copy)
            ]
            rounds = measure_rounds(
                contenders,
                args.rounds,
                on_start=lambda number, total, name: console.log(f"round {number}/{total}: {name}"),
            )
    document: dict[str, Any] = {
        "schema": SCHEMA,
        "model": original,
        "copy": copy,
        "settings": {
            "rounds": args.rounds,
            "mode": "concurrency",
            "concurrency": args.concurrency,
            "batch_size": args.batch_size,
            "duration_s": args.duration,
            "warmup_s": args.warmup,
            "max_duration_s": max_duration,
            "protocol": "http",
            "confidence": args.confidence,
        },
        "status": rounds.status,
        "reason": rounds.reason,
        "rounds_completed": rounds.completed,
        **describe(rounds, (original, copy), args.confidence),
    }
    print_table(document)
    path = write_result(args.json, document, sys.argv)
    console.print(f"wrote {path}")


if __name__ == "__main__":
    main()
