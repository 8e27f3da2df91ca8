"""Grid against adaptive search on the embedded server: trials, wall time, and their bests side by side.

For each model (the example MLP, and MiniLM-L6 as ONNX on the local target when the
torch extra is installed), built without dynamic batching (the baseline), both
strategies tune the same space against the same SLO, one after the other on one
embedded server, each ending with its confirmation (finalists against the baseline in
interleaved rounds). Then the grid's best config, the adaptive search's best config and
the baseline are measured once more in interleaved rounds (A B C, A B C, …): whether
adaptive search found as good a config as the grid is that paired ratio with its
interval, not a difference between two single measurements. Printed and written as
JSON: trials used, wall time, each search's best, the confirmation's verdict and gain
over the baseline with its interval, and the head-to-head ratios.

Usage: ``.venv/bin/python bench/tune.py [--models mlp,minilm] [--duration 2] [--json PATH]``
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from provenance import RESULTS, require_committed_tree, write_result
from rich.console import Console
from rich.table import Table

from tritongen.client.address import ServerAddress
from tritongen.client.control import ModelControl
from tritongen.intervals import DEFAULT_ROUNDS, paired_ratio, summarise
from tritongen.loadtest.rounds import Contender, measure_rounds
from tritongen.loadtest.spec import LoadSpec
from tritongen.pipeline.request import BuildRequest
from tritongen.pipeline.run import build_models
from tritongen.server.local import LocalTritonServer
from tritongen.triton.batching import BatchingOptions
from tritongen.triton.model_config import ModelConfig
from tritongen.triton.proto import read_config
from tritongen.tune.request import TuneRequest
from tritongen.tune.runner import TuneHooks, run_tune
from tritongen.tune.space import Candidate, Current, SearchSpace, parse_preferred_sets
from tritongen.tune.trial import candidate_config

console = Console()


@dataclass(frozen=True)
class BenchModel:
    """A model, its source, and the load and SLO it is tuned for."""

    name: str
    source: str
    input_specs: tuple[str, ...]
    shapes: dict[str, tuple[int, ...]]
    concurrency: int
    slo_p99_ms: float
    space: SearchSpace


def _models() -> dict[str, BenchModel]:
    space = SearchSpace(
        max_batch_sizes=(16, 32),
        preferred_batch_sizes=parse_preferred_sets("4,8;8,16;none"),
        max_queue_delays_us=(0, 500, 2000),
        instance_counts=(1, 2),
    )
    return {
        "mlp": BenchModel(
            "mlp", "tritongen.examples.torch_models:mlp", ("input:FP32:-1,16",), {}, 16, 20.0, space
        ),
        "minilm": BenchModel(
            "minilm",
            "tritongen.examples.minilm:encoder",
            ("input_ids:INT64:-1,-1", "attention_mask:INT64:-1,-1"),
            {"input_ids": (32,), "attention_mask": (32,)},
            8,
            400.0,
            space,
        ),
    }


def _build(model: BenchModel, repo: Path) -> str:
    result = build_models(
        BuildRequest(
            source=model.source,
            name=model.name,
            repo=repo,
            formats=("onnx",),
            options=BatchingOptions(max_batch_size=32, dynamic_batching=False),
            input_specs=model.input_specs,
            force=True,
        )
    )
    return result.models[0].name


def _head_to_head(
    control: ModelControl,
    base: ModelConfig,
    load: LoadSpec,
    bests: dict[str, Candidate | Current],
    rounds: int,
) -> dict[str, dict[str, Any]]:
    """Each strategy's chosen config against the grid's and the baseline's, in interleaved rounds."""
    if "grid" not in bests:
        return {}
    contenders: dict[str, Candidate | Current] = {"baseline": Current.of(base)}
    for candidate in bests.values():
        contenders.setdefault(candidate.key, candidate)
    keys = {strategy: candidate.key for strategy, candidate in bests.items()}
    console.log(f"head to head, {rounds} rounds: {', '.join(contenders)}")
    measured = measure_rounds(
        [
            Contender(key, replace(load, model=control.model), prepare=_reload(control, base, candidate))
            for key, candidate in contenders.items()
        ],
        rounds,
    )
    control.load(base)

    def throughput(key: str) -> list[float | None]:
        return measured.figures(key, lambda run: run.infer_per_s)

    out: dict[str, dict[str, Any]] = {}
    for strategy, key in keys.items():
        vs_grid = paired_ratio(throughput(key), throughput(keys["grid"]))
        vs_base = paired_ratio(throughput(key), throughput("baseline"))
        summary = summarise(throughput(key))
        out[strategy] = {
            "h2h_key": key,
            "h2h_rounds": measured.completed,
            "h2h_infer_per_s": None if summary is None else summary.to_json(),
            "h2h_vs_grid": None if vs_grid is None else vs_grid.to_json(),
            "h2h_vs_baseline": None if vs_base is None else vs_base.to_json(),
        }
    return out


def _reload(control: ModelControl, base: ModelConfig, candidate: Candidate | Current) -> Callable[[], None]:
    config = candidate_config(base, candidate, "local")

    def reload() -> None:
        control.load(config)
        control.check_serving(config)

    return reload


def main() -> None:
    """Run grid and adaptive for each model; print the table and write the JSON."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--models", default="mlp,minilm")
    parser.add_argument("--duration", type=float, default=2.0, help="measured seconds per trial")
    parser.add_argument(
        "--rounds", type=int, default=DEFAULT_ROUNDS, help="confirmation and head-to-head rounds"
    )
    parser.add_argument("--json", type=Path, default=RESULTS / "tune.json")
    args = parser.parse_args()
    require_committed_tree(args.json)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="tritongen-tune-bench-") as tmp:
        root = Path(tmp)
        for key in args.models.split(","):
            model = _models()[key.strip()]
            name = _build(model, root / "repo")
            base = read_config(root / "repo" / name / "config.pbtxt")
            with LocalTritonServer(
                root / "repo", http_port=0, grpc_port=0, metrics_port=0, models=[name]
            ) as server:
                control = ModelControl(server.http_url, name)
                bests: dict[str, Candidate | Current] = {}
                for strategy in ("grid", "adaptive"):
                    load = LoadSpec(
                        model=name,
                        address=ServerAddress.parse(server.http_url, metrics_url=server.metrics_url),
                        levels=(model.concurrency,),
                        shapes=model.shapes,
                        duration_s=args.duration,
                        warmup_s=1.0,
                        max_duration_s=args.duration,
                    )
                    request = TuneRequest(
                        model=name,
                        space=model.space,
                        load=load,
                        slo_p99_ms=model.slo_p99_ms,
                        strategy=strategy,
                        out_dir=root / f"{name}-{strategy}",
                        rounds=args.rounds,
                    )
                    started = time.perf_counter()
                    report = run_tune(
                        request,
                        control,
                        base,
                        "local",
                        TuneHooks(
                            on_done=lambda r, _reused: console.log(
                                f"{r.key}: {r.measurement.infer_per_s:,.0f}/s P99 "
                                f"{(r.measurement.p99_us or 0) / 1000:.2f} ms"
                            )
                        ),
                    )
                    wall = time.perf_counter() - started
                    winner = report.search_best
                    chosen = report.best
                    if chosen is not None:
                        bests[strategy] = chosen.candidate
                    finalist = report.confirmation.best_finalist if report.confirmation else None
                    gain = finalist.ratio if finalist else None
                    rows.append(
                        {
                            "model": model.name,
                            "strategy": strategy,
                            "slo_p99_ms": model.slo_p99_ms,
                            "concurrency": model.concurrency,
                            "grid_size": model.space.size,
                            "trials": len(report.trials),
                            "best_key": winner.key if winner else None,
                            "best_infer_per_s": winner.measurement.infer_per_s if winner else None,
                            "best_p99_ms": (winner.measurement.p99_us or 0) / 1000 if winner else None,
                            "baseline_infer_per_s": report.baseline.measurement.infer_per_s
                            if report.baseline
                            else None,
                            "baseline_p99_ms": (report.baseline.measurement.p99_us or 0) / 1000
                            if report.baseline
                            else None,
                            "search_gain": winner.measurement.infer_per_s
                            / report.baseline.measurement.infer_per_s
                            if winner and report.baseline and report.baseline.measurement.infer_per_s
                            else None,
                            # The best finalist over the baseline, paired by confirmation round.
                            "finalist_key": finalist.key if finalist else None,
                            "gain_over_baseline": gain.estimate if gain else None,
                            "gain_ci_low": gain.low if gain else None,
                            "gain_ci_high": gain.high if gain else None,
                            "decision": report.decision,
                            "verdict": report.verdict(),
                            "wall_s": wall,
                        }
                    )
                head_to_head = _head_to_head(control, base, load, bests, args.rounds)
                for row in rows:
                    if row["model"] == model.name:
                        row.update(head_to_head.get(row["strategy"], {}))
                control.close()
    for model_name in {r["model"] for r in rows}:
        grid = next(r for r in rows if r["model"] == model_name and r["strategy"] == "grid")
        for row in rows:
            if row["model"] == model_name:
                row["vs_grid_trials"] = row["trials"] / grid["trials"]
    table = Table(title="grid vs adaptive (embedded server)")
    for column in (
        "model",
        "strategy",
        "trials",
        "best infer/s",
        "vs grid",
        "P99 ms",
        "baseline/s",
        "gain",
        "wall s",
    ):
        table.add_column(column, justify="left" if column in ("model", "strategy") else "right")
    for r in rows:
        table.add_row(
            r["model"],
            f"{r['strategy']} ({r['best_key']})",
            f"{r['trials']}/{r['grid_size']}",
            f"{r['best_infer_per_s'] or 0:,.0f}",
            _ratio_text(r.get("h2h_vs_grid")),
            f"{r['best_p99_ms'] or 0:.2f}",
            f"{r['baseline_infer_per_s'] or 0:,.0f}",
            f"{r['gain_over_baseline'] or 0:.2f}×",
            f"{r['wall_s']:.0f}",
        )
    console.print(table)
    document = {
        "schema": "tritongen.bench.tune/1",
        "duration_s": args.duration,
        "rounds": args.rounds,
        "space": {"max_batch_sizes": [16, 32], "preferred_batch_sizes": "4,8;8,16;none",
                  "max_queue_delays_us": [0, 500, 2000], "instance_counts": [1, 2]},
        "results": rows,
    }  # fmt: skip
    console.print(f"wrote {write_result(args.json, document, sys.argv)}")


def _ratio_text(ratio: dict[str, Any] | None) -> str:
    if not ratio:
        return "–"
    if ratio.get("ci_low") is None:
        return f"{ratio['estimate']:.2f}×"
    return f"{ratio['estimate']:.2f}× [{ratio['ci_low']:.2f}, {ratio['ci_high']:.2f}]"


if __name__ == "__main__":
    main()
