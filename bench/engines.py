"""In-process latency of each engine on the same model: ONNX Runtime, TVM, TorchScript.

Builds the example MLP and MiniLM-L6 (PyTorch sources) into every format with
``tritongen``'s own converters (so every artifact is verified against the source), then
times each engine's runner at batch 1 and 32 (MiniLM at sequence length 128): the
median of many runs after warm-up, all engines on the same threads, side by side.

Usage: ``.venv/bin/python bench/engines.py [--models mlp,minilm] [--tune-minutes 10]
[--threads 2] [--json bench/results/engines.json]``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from provenance import RESULTS, write_result
from rich.console import Console
from rich.table import Table

console = Console()
Array = npt.NDArray[Any]


@dataclass(frozen=True)
class BenchModel:
    """A model to benchmark: its factory, input specs, and the shapes to time."""

    name: str
    factory: str
    input_specs: tuple[str, ...]
    output_names: tuple[str, ...]
    seq: int | None


MODELS = {
    "mlp": BenchModel("mlp", "tritongen.examples.torch_models:mlp", ("input:FP32:-1,16",), ("logits",), None),
    "minilm": BenchModel(
        "minilm",
        "tritongen.examples.minilm:encoder",
        ("input_ids:INT64:-1,-1", "attention_mask:INT64:-1,-1"),
        ("embedding",),
        128,
    ),
}
BATCHES = (1, 32)


def _feed(model: BenchModel, batch: int) -> dict[str, Array]:
    rng = np.random.default_rng(batch)
    if model.seq is None:
        return {"input": rng.standard_normal((batch, 16)).astype(np.float32)}
    ids = rng.integers(1000, 20000, size=(batch, model.seq)).astype(np.int64)
    ids[:, 0] = 101
    return {"input_ids": ids, "attention_mask": np.ones((batch, model.seq), dtype=np.int64)}


def _time(run: Callable[[], Any], budget_s: float, min_runs: int, max_runs: int) -> list[float]:
    """Run until the time budget or ``max_runs`` is spent (at least ``min_runs``); µs per run."""
    for _ in range(2):
        run()
    samples: list[float] = []
    deadline = time.perf_counter() + budget_s
    while len(samples) < max_runs and (len(samples) < min_runs or time.perf_counter() < deadline):
        start = time.perf_counter_ns()
        run()
        samples.append((time.perf_counter_ns() - start) / 1000)
    return samples


def _build(model: BenchModel, repo: Path, tune_minutes: float, tune_trials: int) -> Any:
    from tritongen.build.pipeline import build_models
    from tritongen.build.request import BuildRequest
    from tritongen.convert.tvm import TvmOptions
    from tritongen.triton.batching import BatchingOptions

    request = BuildRequest(
        source=model.factory,
        name=model.name,
        repo=repo,
        formats=("onnx", "torchscript", "tvm"),
        options=BatchingOptions(max_batch_size=32),
        input_specs=model.input_specs,
        output_names=model.output_names,
        tvm=TvmOptions(
            tune_minutes=tune_minutes or None,
            tune_trials=tune_trials,
            tune_batch_size=32,
            dim_values={"dim1": model.seq} if model.seq else {},
        ),
        force=True,
    )
    start = time.perf_counter()
    result = build_models(request, progress=lambda msg: console.log(f"{model.name}: {msg}"))
    console.log(f"{model.name}: built in {time.perf_counter() - start:.0f} s")
    return result


def _tvm_facts(result: Any, repo: Path) -> dict[str, Any] | None:
    """The TVM artifact's metadata (its libraries, and the tuning behind the tuned one)."""
    for outcome in result.outcomes:
        if outcome.format == "tvm" and outcome.model is not None:
            facts: dict[str, Any] = json.loads(
                (repo / outcome.name / "1" / "tvm_metadata.json").read_text(encoding="utf-8")
            )
            return facts
    return None


def _tvm_library(facts: dict[str, Any] | None, feed: dict[str, Array]) -> str | None:
    """Which TVM library serves ``feed``: the served wrapper's rule (tuned only for its exact shape)."""
    if facts is None:
        return None
    tuning = facts.get("tuning") or {}
    shapes = {name: tuple(shape) for name, shape in (tuning.get("shapes") or {}).items()}
    tuned = bool(shapes) and all(array.shape == shapes.get(name) for name, array in feed.items())
    return "tuned" if tuned else "symbolic"


def _runners(result: Any, repo: Path, threads: int) -> dict[str, Callable[[dict[str, Array]], Any]]:
    from tritongen.convert.onnx import onnx_runner
    from tritongen.convert.torchscript import torchscript_runner
    from tritongen.convert.wrappers import wrapper_runner

    runners: dict[str, Callable[[dict[str, Array]], Any]] = {}
    for outcome in result.outcomes:
        if outcome.model is None:
            console.log(f"[red]{outcome.format} not built[/]: {outcome.reason}")
            continue
        version = repo / outcome.name / "1"
        if outcome.format == "onnx":
            runners["onnxruntime"] = onnx_runner(version / "model.onnx", result.signature, threads)
        elif outcome.format == "torchscript":
            runners["torchscript"] = torchscript_runner(version, result.signature, threads)
        elif outcome.format == "tvm":  # the served model.py, in-process
            runners["tvm"] = wrapper_runner(version, result.signature, 32, threads)
    return runners


def main() -> None:
    """Run the benchmark, print the table, write the JSON."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--models", default="mlp,minilm")
    parser.add_argument("--tune-minutes", type=float, default=10.0, help="TVM tuning budget per model")
    parser.add_argument("--tune-trials", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--budget-s", type=float, default=5.0, help="timing budget per engine and batch")
    parser.add_argument("--json", type=Path, default=RESULTS / "engines.json")
    args = parser.parse_args()
    os.environ.setdefault("TVM_NUM_THREADS", str(args.threads))

    rows: list[dict[str, Any]] = []
    tvm_tuning: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="tritongen-bench-") as tmp:
        for key in args.models.split(","):
            model = MODELS[key.strip()]
            tune = args.tune_minutes if model.seq else min(args.tune_minutes, 1.0)
            repo = Path(tmp) / model.name
            result = _build(model, repo, tune, args.tune_trials)
            errors = {
                o.format: max((c.max_abs for c in o.verification.outputs), default=None)
                for o in result.outcomes
                if o.verification is not None
            }
            runners = _runners(result, repo, args.threads)
            facts = _tvm_facts(result, repo)
            if facts is not None:
                tvm_tuning[model.name] = facts.get("tuning")
            for batch in BATCHES:
                feed = _feed(model, batch)
                heavy = model.seq is not None and batch > 1
                for engine, run in runners.items():
                    samples = _time(partial(run, feed), args.budget_s, 3 if heavy else 20, 2000)
                    fmt = {"onnxruntime": "onnx"}.get(engine, engine)
                    rows.append(
                        {
                            "model": model.name,
                            "engine": engine,
                            "batch": batch,
                            "seq": model.seq,
                            "runs": len(samples),
                            "median_us": statistics.median(samples),
                            "p90_us": float(np.percentile(samples, 90)),
                            "max_abs_err": errors.get(fmt),
                            "library": _tvm_library(facts, feed) if engine == "tvm" else None,
                        }
                    )
                    library = f" ({rows[-1]['library']} library)" if rows[-1]["library"] else ""
                    console.log(
                        f"{model.name} b{batch} {engine}{library}: {rows[-1]['median_us'] / 1000:.3f} ms"
                    )

    table = Table(title=f"in-process latency, {args.threads} threads (median)")
    for column in (
        "model",
        "batch",
        "engine",
        "median ms",
        "p90 ms",
        "vs ONNX Runtime",
        "runs",
        "max abs err",
    ):
        table.add_column(column, justify="left" if column in ("model", "engine") else "right")
    for row in rows:
        base = next(
            r["median_us"]
            for r in rows
            if r["model"] == row["model"] and r["batch"] == row["batch"] and r["engine"] == "onnxruntime"
        )
        row["ratio_vs_onnxruntime"] = row["median_us"] / base
        err = row["max_abs_err"]
        table.add_row(
            row["model"],
            str(row["batch"]),
            row["engine"] + (f" ({row['library']})" if row["library"] else ""),
            f"{row['median_us'] / 1000:.3f}",
            f"{row['p90_us'] / 1000:.3f}",
            f"{row['ratio_vs_onnxruntime']:.2f}×",
            str(row["runs"]),
            "" if err is None else f"{err:.1e}",
        )
    console.print(table)
    document = {
        "schema": "tritongen.bench.engines/1",
        "host": {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count()},
        "threads": args.threads,
        "tune_minutes": args.tune_minutes,
        "tvm_tuning": tvm_tuning,
        "results": rows,
    }
    console.print(f"wrote {write_result(args.json, document, sys.argv)}")


if __name__ == "__main__":
    main()
