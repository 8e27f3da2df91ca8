"""In-process latency of each engine on the same model: ONNX Runtime, TVM, TorchScript.

Builds the example MLP and MiniLM-L6 (PyTorch sources) into every format with
``tritongen``'s own converters (so every artifact is verified against the source), then
times each engine's runner in-process: the MLP at batch 1 and 32, MiniLM-L6 at sequence
length 128 and batch 1, 8 and 32. TVM is the served wrapper (``model.py``) over shape
buckets (MiniLM-L6: ``batch=1,8,32;seq=128``, the sequence padded through the attention
mask), tuned within ``--tune-minutes``. MiniLM-L6 is also timed at one padded request per
bucket (e.g. batch 5 at seq 100, served by the 8 × 128 bucket).

Engines are timed side by side in interleaved rounds (each round times every engine on
every shape for ``--budget-s / --rounds``), so drift of the machine hits them alike; the
ratio TVM / ONNX Runtime is paired by round (geometric mean, 95% t interval) and judged
against the target: within 1.5× at batch 1 and 8, within 1.3× at batch 32. The tuning
time, its trials and where the time goes per tuned task (calls × best kernel time) are
reported with the figures.

Usage: ``.venv/bin/python bench/engines.py [--models mlp,minilm] [--tune-minutes 25]
[--tune-trials 0] [--threads 2] [--rounds 5] [--budget-s 5] [--json bench/results/engines.json]``
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
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from provenance import RESULTS, require_committed_tree, write_result
from rich.console import Console
from rich.table import Table

from tritongen.intervals import Ratio, paired_ratio, summarise

console = Console()
Array = npt.NDArray[Any]
Runner = Callable[[dict[str, Array]], Any]

SCHEMA = "tritongen.bench.engines/2"
BASELINE = "onnxruntime"
MLP_TUNE_MINUTES = 1.0
"""The MLP's tuning budget (at most): it has two small tasks."""


@dataclass(frozen=True)
class BenchModel:
    """A model to benchmark: its factory, input specs, the shapes to time and the TVM buckets."""

    name: str
    factory: str
    input_specs: tuple[str, ...]
    output_names: tuple[str, ...]
    seq: int | None
    batches: tuple[int, ...]
    buckets: str
    pads: tuple[str, ...] = ()
    targets: dict[int, float] = field(default_factory=dict)
    """Per batch, the largest TVM / ONNX Runtime ratio the target allows."""
    padded_seq: int | None = None
    """Sequence length of the padded requests (one per bucket batch size); ``None``: none."""


MODELS = {
    "mlp": BenchModel(
        "mlp",
        "tritongen.examples.torch_models:mlp",
        ("input:FP32:-1,16",),
        ("logits",),
        seq=None,
        batches=(1, 32),
        buckets="batch=1,32",
    ),
    "minilm": BenchModel(
        "minilm",
        "tritongen.examples.minilm:encoder",
        ("input_ids:INT64:-1,-1", "attention_mask:INT64:-1,-1"),
        ("embedding",),
        seq=128,
        batches=(1, 8, 32),
        buckets="batch=1,8,32;seq=128",
        pads=("seq=attention_mask:1",),
        targets={1: 1.5, 8: 1.5, 32: 1.3},
        padded_seq=100,
    ),
}


@dataclass(frozen=True)
class Case:
    """One request shape to time on every engine: ``padded`` when no bucket has it exactly."""

    model: str
    batch: int
    seq: int | None
    feed: dict[str, Array]
    padded: bool = False

    @property
    def key(self) -> str:
        """``minilm b8 s128``."""
        return f"{self.model} b{self.batch}" + (f" s{self.seq}" if self.seq else "")


# --- build ------------------------------------------------------------------------------


def _feed(model: BenchModel, batch: int, seq: int | None) -> dict[str, Array]:
    rng = np.random.default_rng(batch * 1000 + (seq or 0))
    if seq is None:
        return {"input": rng.standard_normal((batch, 16)).astype(np.float32)}
    ids = rng.integers(1000, 20000, size=(batch, seq)).astype(np.int64)
    ids[:, 0] = 101
    return {"input_ids": ids, "attention_mask": np.ones((batch, seq), dtype=np.int64)}


def _build(model: BenchModel, repo: Path, tune_minutes: float, tune_trials: int) -> Any:
    from tritongen.convert.tvm import TvmOptions
    from tritongen.pipeline.request import BuildRequest
    from tritongen.pipeline.run import build_models
    from tritongen.triton.batching import BatchingOptions

    request = BuildRequest(
        source=model.factory,
        name=model.name,
        repo=repo,
        formats=("onnx", "torchscript", "tvm"),
        options=BatchingOptions(max_batch_size=max(model.batches)),
        input_specs=model.input_specs,
        output_names=model.output_names,
        tvm=TvmOptions(
            tune_minutes=tune_minutes or None,
            tune_trials=tune_trials,
            buckets=model.buckets,
            pads=model.pads,
            strict_buckets=False,
        ),
        force=True,
    )
    start = time.perf_counter()
    result = build_models(request, progress=lambda msg: console.log(f"{model.name}: {msg}"))
    console.log(f"{model.name}: built in {time.perf_counter() - start:.0f} s")
    return result


def _tvm_facts(result: Any) -> dict[str, Any] | None:
    """The TVM artifact's metadata (``tvm_metadata.json``: buckets, libraries, tuning)."""
    for outcome in result.outcomes:
        if outcome.format == "tvm" and outcome.model is not None:
            path = outcome.model.path / "1" / "tvm_metadata.json"
            facts: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
            return facts
    return None


def _runners(result: Any, threads: int, max_batch: int) -> dict[str, Runner]:
    from tritongen.convert.onnx import onnx_runner
    from tritongen.convert.torchscript import torchscript_runner
    from tritongen.convert.wrappers import wrapper_runner

    runners: dict[str, Runner] = {}
    for outcome in result.outcomes:
        if outcome.model is None:
            console.log(f"[red]{outcome.format} not built[/]: {outcome.reason}")
            continue
        version = outcome.model.path / "1"
        if outcome.format == "onnx":
            runners[BASELINE] = onnx_runner(version / "model.onnx", result.signature, threads)
        elif outcome.format == "torchscript":
            runners["torchscript"] = torchscript_runner(version, result.signature, threads)
        elif outcome.format == "tvm":  # the served model.py, in-process
            runners["tvm"] = wrapper_runner(version, result.signature, max_batch, threads)
    return runners


def _errors(result: Any) -> dict[str, float | None]:
    """Per engine, the largest absolute error of its verification against the source."""
    engines = {"onnx": BASELINE}
    return {
        engines.get(o.format, o.format): max((c.max_abs for c in o.verification.outputs), default=None)
        for o in result.outcomes
        if o.verification is not None
    }


# --- which bucket serves a request (the wrapper's rule) ---------------------------------


def _dim_values(facts: dict[str, Any], feed: dict[str, Array]) -> dict[str, tuple[int, int]]:
    """Per dynamic dim name, ``(axis, value)`` in ``feed`` (from the metadata's input shapes)."""
    found: dict[str, tuple[int, int]] = {}
    for spec in facts.get("inputs") or []:
        for axis, dim in enumerate(spec.get("shape") or []):
            if isinstance(dim, str) and spec["name"] in feed:
                found.setdefault(dim, (axis, int(feed[spec["name"]].shape[axis])))
    return found


def serving_bucket(facts: dict[str, Any] | None, feed: dict[str, Array]) -> dict[str, Any] | None:
    """The bucket library the wrapper serves ``feed`` with: the smallest one holding it.

    A bucket holds a request when each dynamic dim is equal, or larger where the dim may be
    padded (the batch dim, and the dims declared with ``--tvm-pad``). ``None`` when no
    bucket holds it (the symbolic library serves it) or the model has no buckets.
    """
    buckets = (facts or {}).get("buckets")
    if not facts or not buckets:
        return None
    values = _dim_values(facts, feed)
    paddable = set(buckets.get("padded") or {}) | {_batch_dim(facts)}
    holding = []
    for library in buckets.get("libraries") or []:
        dims: dict[str, int] = library["dims"]
        fits = all(
            dims[d] == v or (dims[d] > v and d in paddable) for d, (_, v) in values.items() if d in dims
        )
        if fits:
            holding.append(library)
    return min(holding, key=lambda lib: int(np.prod(list(lib["dims"].values()))), default=None)


def bucket_name(library: dict[str, Any] | None, batch_dim: str | None = "batch") -> str | None:
    """``8x128``, as the tuning tasks name a bucket (batch first, then the dims by name)."""
    if library is None:
        return None
    dims: dict[str, int] = library["dims"]
    order = ([batch_dim] if batch_dim in dims else []) + sorted(d for d in dims if d != batch_dim)
    return "x".join(str(dims[d]) for d in order)


def _batch_dim(facts: dict[str, Any] | None) -> str | None:
    return str(((facts or {}).get("buckets") or {}).get("batch_dim") or "batch")


def _tvm_served_by(facts: dict[str, Any] | None, feed: dict[str, Array]) -> dict[str, Any]:
    library = serving_bucket(facts, feed)
    if library is not None:
        return {"bucket": bucket_name(library, _batch_dim(facts)), "library": library["library"]}
    return {"bucket": None, "library": (facts or {}).get("library") or "none"}


# --- the shapes to time -----------------------------------------------------------------


def _padded_batches(batches: tuple[int, ...]) -> list[int]:
    """One request batch per bucket size, between the bucket below and it (1, 8, 32 → 1, 5, 24)."""
    found, below = [], 0
    for size in sorted(batches):
        found.append(size if below == 0 else below + (size - below) * 2 // 3)
        below = size
    return found


def _cases(model: BenchModel) -> list[Case]:
    cases = [Case(model.name, b, model.seq, _feed(model, b, model.seq)) for b in model.batches]
    if model.padded_seq is not None:
        cases += [
            Case(model.name, b, model.padded_seq, _feed(model, b, model.padded_seq), padded=True)
            for b in _padded_batches(model.batches)
        ]
    return cases


# --- timing -----------------------------------------------------------------------------


def _time(run: Callable[[], Any], budget_s: float, min_runs: int, max_runs: int) -> list[float]:
    """Run until the time budget or ``max_runs`` is spent (at least ``min_runs``); µs per run."""
    samples: list[float] = []
    deadline = time.perf_counter() + budget_s
    while len(samples) < max_runs and (len(samples) < min_runs or time.perf_counter() < deadline):
        start = time.perf_counter_ns()
        run()
        samples.append((time.perf_counter_ns() - start) / 1000)
    return samples


def _interleaved(
    cases: list[Case], runners: dict[str, Runner], rounds: int, budget_s: float
) -> dict[tuple[str, str], list[list[float]]]:
    """Per (case key, engine), the samples of each round; every engine runs in every round."""
    for case in cases:  # warm-up: first calls build caches and spin up thread pools
        for run in runners.values():
            for _ in range(2):
                run(case.feed)
    samples: dict[tuple[str, str], list[list[float]]] = {}
    for index in range(rounds):
        for case in cases:
            heavy = case.seq is not None and case.batch > 1
            for engine, run in runners.items():
                found = _time(partial(run, case.feed), budget_s / rounds, 2 if heavy else 10, 1000)
                samples.setdefault((case.key, engine), []).append(found)
        console.log(f"round {index + 1}/{rounds} done")
    return samples


def _row(case: Case, engine: str, rounds: list[list[float]], context: dict[str, Any]) -> dict[str, Any]:
    every = [s for found in rounds for s in found]
    medians = [statistics.median(found) for found in rounds]
    summary = summarise(medians)
    row = {
        "model": case.model,
        "engine": engine,
        "batch": case.batch,
        "seq": case.seq,
        "padded": case.padded,
        "runs": len(every),
        "median_us": statistics.median(every),
        "p90_us": float(np.percentile(every, 90)),
        "round_median_us": medians,
        "summary": None if summary is None else summary.to_json(),
        "max_abs_err": context["errors"].get(engine),
        "bucket": None,
        "library": None,
    }
    if engine == "tvm":
        row.update(_tvm_served_by(context["facts"], case.feed))
    return row


# --- ratios and the target --------------------------------------------------------------


def verdict(ratio: Ratio, target: float) -> str:
    """The target's verdict on a TVM / ONNX Runtime ratio.

    ``met`` when the ratio's interval lies at or under ``target``, ``missed`` when it lies
    above, ``tie with target`` when it straddles it; one round (no interval) is judged on
    the estimate alone.
    """
    if ratio.low is None or ratio.high is None:
        return ("met" if ratio.estimate <= target else "missed") + " (one round, no interval)"
    if ratio.high <= target:
        return "met"
    if ratio.low > target:
        return "missed"
    return "tie with target"


def _ratios(model: BenchModel, cases: list[Case], rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per case, TVM / ONNX Runtime paired by round, with the target's verdict for exact shapes."""
    found = []
    for case in cases:
        by_engine = {
            r["engine"]: r
            for r in rows
            if (r["model"], r["batch"], r["seq"]) == (case.model, case.batch, case.seq)
        }
        tvm, base = by_engine.get("tvm"), by_engine.get(BASELINE)
        if tvm is None or base is None:
            continue
        ratio = paired_ratio(tvm["round_median_us"], base["round_median_us"])
        if ratio is None:
            continue
        target = None if case.padded else model.targets.get(case.batch)
        found.append(
            {
                "model": case.model,
                "batch": case.batch,
                "seq": case.seq,
                "padded": case.padded,
                "bucket": tvm["bucket"],
                "ratio": ratio.to_json(),
                "median_round_ratio": statistics.median(ratio.ratios),
                "target": target,
                "verdict": None if target is None else verdict(ratio, target),
            }
        )
    return found


# --- where the tuned time goes ----------------------------------------------------------


def task_breakdown(tuning: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Per bucket and tuned task: calls × best kernel time and its share of the bucket's total."""
    tasks = (tuning or {}).get("tasks")
    if not isinstance(tasks, list):
        return []
    totals: dict[str, float] = {}
    for task in tasks:
        bucket = str(task.get("bucket"))
        totals[bucket] = totals.get(bucket, 0.0) + _task_us(task)
    rows = []
    for task in tasks:
        bucket, total_us = str(task.get("bucket")), _task_us(task)
        rows.append(
            {
                "bucket": bucket,
                "task": task.get("name"),
                "calls": task.get("calls"),
                "trials": task.get("trials"),
                "best_us": task.get("best_us"),
                "total_us": total_us,
                "share": total_us / totals[bucket] if totals[bucket] else None,
            }
        )
    return sorted(rows, key=lambda r: (r["bucket"], -r["total_us"]))


def _task_us(task: dict[str, Any]) -> float:
    best = task.get("best_us")
    return float(task.get("calls") or 0) * float(best) if best is not None else 0.0


# --- one model ---------------------------------------------------------------------------


def measure_model(model: BenchModel, tmp: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Build ``model``, time it on every engine in interleaved rounds; its rows, ratios and tuning."""
    tune = args.tune_minutes if model.seq else min(args.tune_minutes, MLP_TUNE_MINUTES)
    result = _build(model, tmp / model.name, tune, args.tune_trials)
    facts = _tvm_facts(result)
    runners = _runners(result, args.threads, max(model.batches))
    cases = _cases(model)
    samples = _interleaved(cases, runners, args.rounds, args.budget_s)
    context = {"errors": _errors(result), "facts": facts}
    rows = [_row(case, engine, samples[(case.key, engine)], context) for case in cases for engine in runners]
    for row in rows:
        base = next(r for r in rows if _same_case(r, row) and r["engine"] == BASELINE)
        row["ratio_vs_onnxruntime"] = row["median_us"] / base["median_us"]
    tuning = (facts or {}).get("tuning")
    return {
        "rows": rows,
        "ratios": _ratios(model, cases, rows),
        "tvm": {
            "buckets": (facts or {}).get("buckets"),
            "library": (facts or {}).get("library"),
            "tuning": tuning,
            "requested_minutes": tune,
        },
        "tasks": task_breakdown(tuning),
    }


def _same_case(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return (a["model"], a["batch"], a["seq"]) == (b["model"], b["batch"], b["seq"])


# --- output ------------------------------------------------------------------------------


def tuning_text(tvm: dict[str, Any]) -> str:
    """``buckets 1×128, 8×128, 32×128; tuned 24.8 min, 1,234 trials`` (or ``untuned``)."""
    buckets = tvm.get("buckets") or {}
    names = [bucket_name(lib, buckets.get("batch_dim") or "batch") for lib in buckets.get("libraries") or []]
    text = "buckets " + ", ".join(n.replace("x", "×") for n in names if n) if names else "symbolic only"
    tuning = tvm.get("tuning")
    if not tuning:
        return f"{text}; untuned"
    cached = ", cached records" if tuning.get("cache_hit") else ""
    minutes = (tuning.get("tune_s") or 0) / 60
    return f"{text}; tuned {minutes:.1f} min, {tuning.get('trials', 0):,} trials{cached}"


def _print_latency(rows: list[dict[str, Any]], ratios: list[dict[str, Any]], threads: int) -> None:
    table = Table(title=f"in-process latency, {threads} threads (median over all runs)")
    for column in (
        "model",
        "batch",
        "seq",
        "engine",
        "median ms",
        "p90 ms",
        "vs ONNX Runtime",
        "runs",
        "max abs err",
    ):
        table.add_column(column, justify="left" if column in ("model", "engine") else "right")
    for row in rows:
        served = f" ({row['bucket'] or row['library']})" if row["engine"] == "tvm" else ""
        err = row["max_abs_err"]
        table.add_row(
            row["model"],
            str(row["batch"]),
            str(row["seq"] or "–") + (" (padded)" if row["padded"] else ""),
            row["engine"] + served,
            f"{row['median_us'] / 1000:.3f}",
            f"{row['p90_us'] / 1000:.3f}",
            f"{row['ratio_vs_onnxruntime']:.2f}×",
            str(row["runs"]),
            "" if err is None else f"{err:.1e}",
        )
    console.print(table)
    _print_ratios(ratios)


def _print_ratios(ratios: list[dict[str, Any]]) -> None:
    table = Table(title="TVM / ONNX Runtime, paired by round (geometric mean, 95% interval)")
    for column in ("model", "batch", "seq", "bucket", "ratio", "target", "verdict"):
        table.add_column(column, justify="left" if column in ("model", "bucket", "verdict") else "right")
    for entry in ratios:
        ratio = Ratio.from_json(entry["ratio"])
        target = entry["target"]
        table.add_row(
            entry["model"],
            str(entry["batch"]),
            str(entry["seq"] or "–") + (" (padded)" if entry["padded"] else ""),
            entry["bucket"] or "symbolic",
            ratio.text(),
            "–" if target is None else f"≤ {target:g}×",
            entry["verdict"] or "–",
        )
    console.print(table)


def _print_tasks(model: str, tvm: dict[str, Any], tasks: list[dict[str, Any]]) -> None:
    table = Table(title=f"{model} TVM: {tuning_text(tvm)}; where the time goes per tuned task")
    for column in ("bucket", "task", "calls", "trials", "best µs", "calls × best ms", "share"):
        table.add_column(column, justify="left" if column in ("bucket", "task") else "right")
    for task in tasks:
        best, share = task["best_us"], task["share"]
        table.add_row(
            task["bucket"],
            str(task["task"]),
            str(task["calls"]),
            str(task["trials"]),
            "–" if best is None else f"{best:,.1f}",
            f"{task['total_us'] / 1000:,.3f}",
            "–" if share is None else f"{share:.1%}",
        )
    console.print(table)


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--models", default="mlp,minilm")
    parser.add_argument(
        "--tune-minutes",
        type=float,
        default=25.0,
        help=f"TVM tuning budget of MiniLM-L6 (MLP: ≤ {MLP_TUNE_MINUTES:g})",
    )
    parser.add_argument("--tune-trials", type=int, default=0, help="trial budget (0: the minutes alone)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5, help="interleaved timing rounds")
    parser.add_argument(
        "--budget-s", type=float, default=5.0, help="timing budget per engine and shape, all rounds"
    )
    parser.add_argument("--json", type=Path, default=RESULTS / "engines.json")
    args = parser.parse_args(argv)
    unknown = [m for m in args.models.split(",") if m.strip() not in MODELS]
    if unknown:
        parser.error(f"unknown model(s) {', '.join(unknown)}; choose from {', '.join(MODELS)}")
    return args


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark, print the tables, write the JSON."""
    args = _parse(argv)
    require_committed_tree(args.json)
    os.environ.setdefault("TVM_NUM_THREADS", str(args.threads))
    rows: list[dict[str, Any]] = []
    ratios: list[dict[str, Any]] = []
    tvm: dict[str, Any] = {}
    tasks: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="tritongen-bench-") as tmp:
        for key in args.models.split(","):
            model = MODELS[key.strip()]
            found = measure_model(model, Path(tmp), args)
            rows += found["rows"]
            ratios += found["ratios"]
            tvm[model.name], tasks[model.name] = found["tvm"], found["tasks"]
    _print_latency(rows, ratios, args.threads)
    for name, entries in tasks.items():
        _print_tasks(name, tvm[name], entries)
    document = {
        "schema": SCHEMA,
        "host": {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count()},
        "threads": args.threads,
        "rounds": args.rounds,
        "budget_s": args.budget_s,
        "tune_minutes": args.tune_minutes,
        "targets": {m.name: {str(b): t for b, t in m.targets.items()} for m in MODELS.values() if m.targets},
        "tvm": tvm,
        "tvm_tasks": tasks,
        "results": rows,
        "ratios": ratios,
    }
    console.print(f"wrote {write_result(args.json, document, sys.argv)}")


if __name__ == "__main__":
    main()
