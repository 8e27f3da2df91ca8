"""FP32 against INT8 (dynamic, static, static with nodes kept in FP32) on MiniLM-L6, served.

Every variant is built by ``tritongen compare`` from the PyTorch source: exported to ONNX,
quantized (static INT8 calibrated on real sentences tokenized offline), verified, its
drift measured on held-out sentences, then served one at a time by the embedded Triton
and load-tested at batch 1 (P50/P99, concurrency 1) and batch 32 (throughput, concurrency
ramp), sequence length 128. Static INT8 comes three ways: every linear layer quantized;
the feed-forward output projections kept in FP32 by hand (``--keep-fp32``); and the
nodes ``--auto-mixed-precision`` keeps for a cosine budget. Each of the last two is its
own comparison (its own model name), measured right after the first, same settings.

Usage: ``.venv/bin/python bench/precision.py [--duration 10s] [--max-error 0.02]
[--json bench/results/precision.json]``
"""

from __future__ import annotations

import argparse
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from provenance import RESULTS, require_committed_tree, write_result
from rich.console import Console
from rich.table import Table

console = Console(width=170)

SOURCE = "tritongen.examples.minilm:encoder"
SPECS = ("input_ids:INT64:-1,-1", "attention_mask:INT64:-1,-1")
SEQ = 128
CALIBRATION_SENTENCES = 100
HELD_OUT_SENTENCES = 64
FFN_OUTPUT = "/bert/encoder/layer.[0-9]/output/dense/MatMul"
"""The feed-forward output projections: their GELU inputs carry the outliers per-tensor INT8 cannot hold."""
VARIANTS = {
    "minilm": {"fp32": "FP32", "int8-dynamic": "INT8 dynamic", "int8": "INT8 static, every linear layer"},
    "minilm_ffn": {"int8": "INT8 static, feed-forward outputs in FP32"},
    "minilm_amp": {"int8": "INT8 static, auto mixed precision"},
}
"""How README's table names each variant: per comparison, per precision."""


def _compare(
    name: str,
    work: Path,
    precisions: str,
    calibration: Path,
    held_out: Path,
    duration_s: float,
    extra: dict[str, Any],
) -> dict[str, Any]:
    from tritongen.cli.options.engine import PrecisionFlags
    from tritongen.compare.measure import MeasureSettings
    from tritongen.compare.runner import CompareRequest, run_compare
    from tritongen.pipeline.request import BuildRequest, VerifyOptions
    from tritongen.triton.batching import BatchingOptions

    variants, options = PrecisionFlags(
        precision=precisions,
        calibration_data=str(calibration) if "int8" in precisions.replace("int8-dynamic", "") else None,
        keep_fp32=extra.get("keep"),
        auto_mixed_precision=bool(extra.get("auto")),
        max_error=extra.get("max_error"),
        error_metric=extra.get("metric", "max-abs"),
    ).settings()
    build = BuildRequest(
        source=SOURCE,
        name=name,
        repo=work / name / "model_repository",
        formats=("onnx",),
        options=BatchingOptions(max_batch_size=32),
        force=True,
        input_specs=SPECS,
        output_names=("embedding",),
        verify=VerifyOptions(data=held_out),
        precisions=variants,
        precision=options,
    )
    request = CompareRequest(
        source=SOURCE,
        name=name,
        formats=("onnx",),
        settings=MeasureSettings(
            batch_size_throughput=32,
            seq=SEQ,
            duration_s=duration_s,
            warmup_s=2.0,
            concurrency_levels=(1, 2, 4),
        ),
        build=build,
        precisions=variants,
    )
    started = time.perf_counter()
    report = run_compare(request, say=lambda msg: console.log(f"{name}: {msg}"))
    console.log(f"{name}: done in {time.perf_counter() - started:.0f} s")
    return report.to_json()


def _row(comparison: str, engine: dict[str, Any]) -> dict[str, Any]:
    accuracy = engine.get("accuracy") or {}
    outputs = (accuracy.get("accuracy") or {}).get("outputs") or [{}]
    mixed = accuracy.get("auto_mixed_precision") or {}
    precision = engine.get("precision") or "fp32"
    return {
        "model": engine["model"],
        "label": engine["format"] + " " + precision,
        "precision": precision,
        "variant": VARIANTS.get(comparison, {}).get(precision, f"{comparison} {precision}"),
        "status": engine["status"],
        "reason": engine.get("reason"),
        "p50_ms_b1": engine.get("p50_ms_b1"),
        "p99_ms_b1": engine.get("p99_ms_b1"),
        "infer_per_s_b1": engine.get("infer_per_s_b1"),
        "infer_per_s_b32": engine.get("infer_per_s_b32"),
        "p99_ms_b32": engine.get("p99_ms_b32"),
        "peak_mem_mb": (engine.get("peak_mem_bytes") or 0) / 1e6 or None,
        "cosine_mean": outputs[0].get("cosine_mean", 1.0 if engine.get("precision") == "fp32" else None),
        "cosine_min": outputs[0].get("cosine_min", 1.0 if engine.get("precision") == "fp32" else None),
        "rel_rms_err": outputs[0].get("rel_rms_err", 0.0 if engine.get("precision") == "fp32" else None),
        "kept_fp32": len(accuracy.get("kept_fp32") or []),
        "kept_fp32_nodes": accuracy.get("kept_fp32") or [],
        "search": [{"added": s.get("added"), "error": s.get("error")} for s in mixed.get("steps") or []],
        "search_steps": len(mixed.get("steps") or []),
        "convert_s": engine.get("convert_s"),
    }


def main() -> None:
    """Build, serve and measure every variant; print the table and write the JSON."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--duration", default="10s", help="measured time of each load run")
    parser.add_argument("--max-error", type=float, default=0.01, help="auto mixed precision: 1 − mean cosine")
    parser.add_argument("--json", type=Path, default=RESULTS / "precision.json")
    args = parser.parse_args()
    require_committed_tree(args.json)
    from tritongen.examples.minilm import write_sample_data
    from tritongen.loadtest.spec import parse_duration

    duration = parse_duration(args.duration, "--duration")
    with tempfile.TemporaryDirectory(prefix="tritongen-bench-precision-") as tmp:
        work = Path(tmp)
        calibration = write_sample_data(work / "calibration.npz", CALIBRATION_SENTENCES, SEQ)
        held_out = write_sample_data(
            work / "held_out.npz", HELD_OUT_SENTENCES, SEQ, offset=CALIBRATION_SENTENCES + 20
        )
        plain = _compare("minilm", work, "fp32,int8-dynamic,int8", calibration, held_out, duration, {})
        by_hand = _compare(
            "minilm_ffn",
            work,
            "int8",
            calibration,
            held_out,
            duration,
            {"keep": FFN_OUTPUT},
        )
        mixed = _compare(
            "minilm_amp",
            work,
            "int8",
            calibration,
            held_out,
            duration,
            {"auto": True, "max_error": args.max_error, "metric": "cosine"},
        )
    rows = [
        _row(comparison, engine)
        for comparison, report in (("minilm", plain), ("minilm_ffn", by_hand), ("minilm_amp", mixed))
        for engine in report["engines"]
    ]
    base = next((r for r in rows if r["model"] == "minilm_onnx" and r["status"] == "ok"), None)
    table = Table(title=f"MiniLM-L6 through the embedded Triton, seq {SEQ} (ONNX Runtime, CPU)")
    for column in ("variant", "P50 ms b1", "P99 ms b1", "infer/s b32", "× FP32 b32", "× FP32 b1 P50",
                   "cosine mean", "cosine min", "rel RMS", "FP32 nodes"):  # fmt: skip
        table.add_column(column, justify="left" if column == "variant" else "right")
    for row in rows:
        if base and row["infer_per_s_b32"] and base["infer_per_s_b32"]:
            row["speedup_b32"] = row["infer_per_s_b32"] / base["infer_per_s_b32"]
        if base and row["p50_ms_b1"] and base["p50_ms_b1"]:
            row["speedup_b1_p50"] = base["p50_ms_b1"] / row["p50_ms_b1"]

        def cell(key: str, fmt: str, row: dict[str, Any] = row) -> str:
            value = row.get(key)
            return format(value, fmt) if value is not None else "–"

        table.add_row(
            f"{row['model']} ({row['status']})",
            cell("p50_ms_b1", ".2f"),
            cell("p99_ms_b1", ".2f"),
            cell("infer_per_s_b32", ",.0f"),
            cell("speedup_b32", ".2f"),
            cell("speedup_b1_p50", ".2f"),
            cell("cosine_mean", ".4f"),
            cell("cosine_min", ".4f"),
            cell("rel_rms_err", ".3f"),
            str(row["kept_fp32"]),
        )
    console.print(table)
    for rec in plain["recommendations"]:
        console.print(f"  {rec['title']}: {rec['reason']}", soft_wrap=True, highlight=False, markup=False)
    result = {
        "benchmark": "precision",
        "host": {
            "machine": platform.machine(),
            "processor": platform.processor(),
            "python": platform.python_version(),
        },
        "seq": SEQ,
        "duration_s": duration,
        "calibration_sentences": CALIBRATION_SENTENCES,
        "held_out_sentences": HELD_OUT_SENTENCES,
        "max_error_cosine": args.max_error,
        "rows": rows,
        "recommendations": plain["recommendations"],
        "hardware": plain["hardware"],
    }
    console.print(f"wrote {write_result(args.json, result, sys.argv)}")


if __name__ == "__main__":
    main()
