"""The benchmark tables of docs/benchmarks.md are generated from the committed bench/results/*.json."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from support.paths import ROOT


def _load_tables() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_tables", ROOT / "bench" / "tables.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


tables = _load_tables()

PROVENANCE = {
    "commit": "0123456789abcdef0123456789abcdef01234567",
    "dirty": False,
    "date": "2026-11-30T10:00:00+00:00",
    "cpu": "Test CPU 9000",
    "cores": 2,
    "machine": "x86_64",
    "python": "3.11.7",
    "packages": {"nvidia-pytriton": "0.7.0", "onnxruntime-gpu": "1.31.1", "numpy": "1.26.4"},
    "command": f"python {ROOT}/bench/loadgen.py --rounds 3",
}


def _summary(median: float, cv: float) -> dict[str, Any]:
    return {"median": median, "ci_low": median * 0.9, "ci_high": median * 1.1, "cv": cv}


NOISE = {
    "schema": "tritongen.bench.noise/1",
    "model": "mlp_onnx",
    "copy": "mlp_onnx_copy",
    "settings": {"rounds": 10, "concurrency": 8, "batch_size": 1, "duration_s": 5.0},
    "rounds_completed": 10,
    "contenders": {
        "mlp_onnx": {"summary": {"infer_per_s": _summary(4000.0, 0.021), "p99_us": _summary(3000.0, 0.05)}},
        "mlp_onnx_copy": {
            "summary": {"infer_per_s": _summary(4100.0, 0.034), "p99_us": _summary(3100.0, 0.084)}
        },
    },
    "paired": {
        "infer_per_s": {
            "estimate": 0.99,
            "ci_low": 0.97,
            "ci_high": 1.01,
            "significant": False,
            "log_sd": 0.02,
        },
        "p99_us": {"estimate": 1.02, "ci_low": 0.95, "ci_high": 1.09, "significant": False},
    },
    "provenance": PROVENANCE,
}

LOADGEN = {
    "schema": "tritongen.bench.loadgen/1",
    "concurrency": 16,
    "instances": 2,
    "seconds": 20,
    "rounds": 2,
    "generators": {
        "wrk": {
            "requests_per_s": 4208.0,
            "vs_wrk": 1.0,
            "vs_wrk_per_round": [1.0, 1.0],
            "cpu_s_per_1000_requests": 0.0301,
        },
        "tritongen_p1": {
            "requests_per_s": 4050.4,
            "vs_wrk": 0.9625,
            "vs_wrk_per_round": [0.86, 0.98],
            "cpu_s_per_1000_requests": 0.0841,
        },
    },
    "provenance": PROVENANCE,
}


def _write(results: Path, name: str, doc: dict[str, Any]) -> None:
    results.mkdir(parents=True, exist_ok=True)
    (results / f"{name}.json").write_text(json.dumps(doc), encoding="utf-8")


def _page(names: list[str] | None = None) -> str:
    names = names or [block.name for block in tables.BLOCKS]
    blocks = "\n\n".join(f"<!-- bench:{n} -->\nold text\n<!-- /bench:{n} -->" for n in names)
    return f"# Project\n\n## Benchmarks\n\n{blocks}\n\n## Tests\n"


def test_benchmark_tables_match_the_committed_results() -> None:
    text = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    stale = tables.stale_blocks(text)
    assert stale == [], (
        f"docs/benchmarks.md's blocks {stale} differ from bench/results: run make bench-tables"
    )
    assert tables.render_page(text) == text


def test_the_readme_holds_no_benchmark_block() -> None:
    assert "<!-- bench:" not in (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_readme_summary_matches_the_committed_results(tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert tables.render_readme(readme) == readme, "README.md's bench-summary is stale: run make bench-tables"
    # each row comes from its result: without the files, each row says so
    empty = tables.render_summary(tmp_path)
    for name, _, _ in tables.SUMMARY_ROWS:
        assert f"| {name} | no committed result (bench/results/{name}.json) |" in empty
    with pytest.raises(tables.TablesError, match="no <!-- bench-summary -->"):
        tables.render_readme("# a README without the block\n")


def test_every_result_file_has_a_block_and_provenance() -> None:
    names = {block.name for block in tables.BLOCKS}
    for path in sorted((ROOT / "bench" / "results").glob("*.json")):
        assert path.stem in names, f"{path.name} has no docs/benchmarks.md block in bench/tables.py"
        assert "provenance" in json.loads(path.read_text(encoding="utf-8")), path.name


def test_a_missing_result_is_one_line_saying_how_to_measure_it(tmp_path: Path) -> None:
    block = next(b for b in tables.BLOCKS if b.name == "tune")
    assert tables.render_block(block, tmp_path) == (
        "No committed result: run `python bench/tune.py` (it writes bench/results/tune.json)."
    )


def test_loadgen_table_with_provenance_and_noise_floor(tmp_path: Path) -> None:
    _write(tmp_path, "loadgen", LOADGEN)
    _write(tmp_path, "noise", NOISE)
    block = next(b for b in tables.BLOCKS if b.name == "loadgen")
    lines = tables.render_block(block, tmp_path).splitlines()
    assert lines[0].startswith("Identity model, 2 instance(s), concurrency 16, 2 interleaved round(s) of 20")
    assert "| generator | req/s | × wrk | × wrk per round | CPU-s / 1000 requests |" in lines
    assert "| wrk (1 thread) | 4,208 | 1.00 | 1.00, 1.00 | 0.030 |" in lines
    assert "| tritongen loadtest, 1 process | 4,050 | 0.96 | 0.86, 0.98 | 0.084 |" in lines
    assert lines[-3] == (
        "Measured 2026-11-30 on Test CPU 9000, 2 cores, commit 0123456, Python 3.11.7, "
        "nvidia-pytriton 0.7.0, onnxruntime-gpu 1.31.1: `python bench/loadgen.py --rounds 3` "
        "(bench/results/loadgen.json)."
    )
    assert lines[-1] == (
        "Noise floor on this machine: throughput ±3.4%, P99 ±8.4% "
        "(coefficient of variation over 10 A/A rounds, bench/results/noise.json)."
    )


def test_noise_floor_line_without_a_noise_result_or_from_another_machine(tmp_path: Path) -> None:
    assert tables.noise_line(None, LOADGEN) == (
        "Noise floor on this machine: not measured yet (run `python bench/noise.py`)."
    )
    elsewhere = {**NOISE, "provenance": {**PROVENANCE, "cpu": "Other CPU", "cores": 16}}
    line = tables.noise_line(elsewhere, LOADGEN)
    assert line.startswith("Noise floor on Other CPU, 16 cores: throughput ±3.4%")


def test_noise_block_states_the_spread_and_the_paired_ratio(tmp_path: Path) -> None:
    _write(tmp_path, "noise", NOISE)
    block = next(b for b in tables.BLOCKS if b.name == "noise")
    text = tables.render_block(block, tmp_path)
    assert "| `mlp_onnx` | 4,000 [3,600, 4,400] | 2.1% | 3.00 [2.70, 3.30] | 5.0% |" in text
    assert "throughput 0.990× [0.970, 1.010], per-round spread ±2.0% (s.d. of the log ratio), a tie" in text
    assert "P99 1.020× [0.950, 1.090], a tie." in text
    assert "Noise floor on this machine: throughput ±3.4%, P99 ±8.4%" in text


def test_a_dirty_tree_or_a_missing_provenance_is_refused_in_one_line() -> None:
    block = next(b for b in tables.BLOCKS if b.name == "soak")
    dirty = {"provenance": {**PROVENANCE, "dirty": True, "command": "python bench/soak.py"}}
    again = "measure it again from a clean, committed tree with `python bench/soak.py`"
    with pytest.raises(tables.TablesError) as refused:
        tables.provenance_line(dirty, block)
    assert str(refused.value) == (
        f"bench/results/soak.json was measured on commit 0123456 with uncommitted changes: {again}"
    )
    for missing in ({}, {"provenance": {**PROVENANCE, "commit": None}}):
        with pytest.raises(tables.TablesError, match="names no commit it was measured on: measure it again"):
            tables.provenance_line(missing, block)


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()


def test_every_committed_result_comes_from_a_clean_commit_in_the_history() -> None:
    """A README figure can be reproduced: each result names a clean commit that HEAD descends from."""
    if _git("rev-parse", "--is-shallow-repository") == "true":
        pytest.skip("a shallow clone lacks the history the results name")
    for path in sorted((ROOT / "bench" / "results").glob("*.json")):
        facts = json.loads(path.read_text(encoding="utf-8"))["provenance"]
        assert facts.get("commit") and not facts.get("dirty"), f"{path.name}: measured on a dirty tree"
        found = subprocess.run(["git", "merge-base", "--is-ancestor", facts["commit"], "HEAD"], cwd=ROOT)
        assert found.returncode == 0, f"{path.name}: commit {facts['commit'][:7]} is not in the history"
    tables.check_in_history()  # what make bench-tables checks first


def test_the_tables_refuse_a_commit_outside_the_history(tmp_path: Path) -> None:
    _write(tmp_path, "loadgen", {**LOADGEN, "provenance": {**PROVENANCE, "commit": "f" * 40}})
    with pytest.raises(tables.TablesError, match=r"loadgen\.json names commit fffffff, which is not in"):
        tables.check_in_history(tmp_path)


def test_engines_table_names_the_tvm_library_and_the_ratio() -> None:
    def row(model: str, seq: int | None, batch: int, engine: str, us: float, ratio: float) -> dict[str, Any]:
        library = ("tuned" if batch == 32 else "symbolic") if engine == "tvm" else None
        return {"model": model, "seq": seq, "batch": batch, "engine": engine, "median_us": us,
                "ratio_vs_onnxruntime": ratio, "max_abs_err": 8e-7, "library": library}  # fmt: skip

    doc = {
        "threads": 2,
        "tvm_tuning": {
            "minilm": {"shapes": {"input_ids": [32, 128]}, "trials": 272, "tasks": 6, "tune_s": 600.0}
        },
        "results": [
            row("minilm", 128, 1, "onnxruntime", 24_400.0, 1.0),
            row("minilm", 128, 1, "tvm", 1_454_000.0, 59.6),
            row("minilm", 128, 32, "onnxruntime", 704_000.0, 1.0),
            row("minilm", 128, 32, "tvm", 1_300_000.0, 1.85),
        ],
    }
    lines = tables.render_engines(doc)
    assert "TVM: MiniLM-L6 tuned at 32 × 128: 272 MetaSchedule trials on 6 tasks in 10.0 min." in lines[0]
    assert "| MiniLM-L6, seq 128 | 1 | 24.4 ms | 1,454 ms (59.60×, symbolic library) |" in lines
    assert "| MiniLM-L6, seq 128 | 32 | 704 ms | 1,300 ms (1.85×, tuned library) |" in lines
    assert lines[-1] == (
        "Largest absolute error against the PyTorch source: ONNX Runtime 8.0e-07, TVM 8.0e-07."
    )


def test_tune_soak_convert_and_precision_tables() -> None:
    ratio = {"estimate": 0.98, "ci_low": 0.93, "ci_high": 1.03, "significant": False}
    gain = {"estimate": 2.2, "ci_low": 1.9, "ci_high": 2.5, "significant": True}
    tune = {
        "duration_s": 2.0,
        "rounds": 5,
        "results": [
            {"model": "mlp", "strategy": "grid", "concurrency": 16, "slo_p99_ms": 20.0, "grid_size": 36,
             "trials": 36, "h2h_key": "mb32-pbauto-qd500-i1", "decision": "apply", "wall_s": 655.3,
             "h2h_infer_per_s": {"median": 5232.2, "ci_low": 5100.0, "ci_high": 5300.0},
             "h2h_vs_grid": {"estimate": 1.0, "ci_low": 1.0, "ci_high": 1.0, "significant": False},
             "h2h_vs_baseline": gain},
            {"model": "mlp", "strategy": "adaptive", "concurrency": 16, "slo_p99_ms": 20.0, "grid_size": 36,
             "trials": 11, "h2h_key": "mb16-pbauto-qd500-i1", "decision": "apply", "wall_s": 211.0,
             "h2h_infer_per_s": {"median": 5100.0, "ci_low": None, "ci_high": None},
             "h2h_vs_grid": ratio, "h2h_vs_baseline": gain},
        ],
    }  # fmt: skip
    lines = tables.render_tune(tune)
    assert lines[0].startswith("Search space of 36 configs, 2 s per trial; the configs each strategy chose")
    assert (
        "| MLP | grid | 16 | 20 | 36/36 | `mb32-pbauto-qd500-i1` | 5,232 ± 100 | – | 2.20× [1.90, 2.50] "
        "| apply | 655 |" in lines
    )
    assert (
        "| MLP | adaptive | 16 | 20 | 11/36 | `mb16-pbauto-qd500-i1` | 5,100 | 0.98× [0.93, 1.03] (tie) |"
        in ("\n".join(lines))
    )
    soak = {
        "model": "mlp_onnx", "target_req_per_s": 2866, "fraction": 0.7, "max_req_per_s": 4094.2,
        "max_at_concurrency": 8, "requests": 1720308, "duration_s": 600.0, "achieved_req_per_s": 2867.1,
        "errors": 0, "errors_by_kind": {}, "p99_us_per_minute": [97_000.0, 31_000.0], "p99_drift": -0.68,
        "p99_us_median_minute": 64_000.0, "server_rss_bytes": {"first_minute": 123e6, "last_minute": 127e6},
        "server_rss_growth": 0.031, "generator_rss_bytes": {"first_minute": 77.0e6, "last_minute": 77.4e6},
        "generator_rss_growth": 0.006, "passed": True,
    }  # fmt: skip
    lines = tables.render_soak(soak)
    load = "2,866 req/s (70% of 4,094 at c=8), 1,720,308 requests in 600 s, achieved 2,867 req/s"
    assert f"| load | {load} |" in lines
    assert "| P99 per minute | 97.0, 31.0 ms (median 64.0 ms; first → last -68%) |" in lines
    assert "| server RSS | 123 MB → 127 MB (+3.1%) |" in lines
    assert "| verdict | passed |" in lines
    convert = {"results": [{"model": "mlp", "convert_median_us": 36_712.0,
                            "render_and_check_median_us": 423.0, "repeat": 10}]}  # fmt: skip
    assert tables.render_convert_speed(convert) == [
        "Median of 10 runs per example model.",
        "",
        "| model | convert ms | render + check ms |",
        "|---|---|---|",
        "| mlp | 36.7 | 0.423 |",
    ]
    base = {"status": "ok", "p50_ms_b1": 29.3, "p99_ms_b1": 46.0, "infer_per_s_b32": 40.2, "speedup_b32": 1.0,
            "speedup_b1_p50": 1.0, "rel_rms_err": 0.0, "kept_fp32": 0, "peak_mem_mb": 268.4}  # fmt: skip
    precision = {
        "seq": 128, "duration_s": 8.0, "calibration_sentences": 100, "held_out_sentences": 64,
        "max_error_cosine": 0.01,
        "rows": [
            {**base, "model": "minilm_onnx", "precision": "fp32", "variant": "FP32", "cosine_mean": 1.0,
             "cosine_min": 1.0},
            {**base, "model": "minilm_onnx_int8", "precision": "int8", "status": "failed",
             "variant": "INT8 static, every linear layer", "cosine_mean": 0.93874, "cosine_min": 0.8412},
            {**base, "model": "minilm_amp_onnx_int8", "precision": "int8", "kept_fp32": 10,
             "search_steps": 11, "convert_s": 230.4, "variant": "INT8 static, auto mixed precision",
             "cosine_mean": 0.9902, "cosine_min": 0.9671},
        ],
    }  # fmt: skip
    lines = tables.render_precision(precision)
    assert "| FP32 | 29.3 | 46.0 | 40 | 1.00 | 1.00 | 1.0000 | 0.000 | – | 268 |" in lines
    failed = "| INT8 static, every linear layer | – | – | – | – | – | 0.9387 (0.8412) | 0.000 | 0 (failed) |"
    assert failed + " – |" in lines
    assert lines[-1] == (
        "INT8 static, auto mixed precision: 10 nodes kept in FP32 after 11 search steps; "
        "building it took 230 s."
    )


def test_the_page_is_rewritten_in_place_and_check_names_the_stale_block(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = tmp_path / "results"
    _write(results, "loadgen", LOADGEN)
    page = tmp_path / "benchmarks.md"
    page.write_text(_page(), encoding="utf-8")
    args = ["--page", str(page), "--results", str(results)]
    assert tables.main([*args, "--check"]) == 1
    assert "bench:noise" in capsys.readouterr().err
    assert tables.main(args) == 0
    text = page.read_text(encoding="utf-8")
    assert text.startswith("# Project\n\n## Benchmarks\n\n<!-- bench:noise -->\nNo committed result")
    assert text.endswith(f"<!-- /bench:{tables.BLOCKS[-1].name} -->\n\n## Tests\n")
    assert "| wrk (1 thread) | 4,208 |" in text and "old text" not in text
    assert tables.main([*args, "--check"]) == 0
    assert tables.render_page(text, results, page) == text  # idempotent

    _write(results, "loadgen", {**LOADGEN, "concurrency": 32})
    assert tables.main([*args, "--check"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"{page}: bench:loadgen differs") and "\n" not in err


def test_a_page_without_a_block_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    page = tmp_path / "benchmarks.md"
    page.write_text(_page(["noise", "loadgen"]), encoding="utf-8")
    assert tables.main(["--page", str(page), "--results", str(tmp_path), "--check"]) == 1
    assert f"{page} has no <!-- bench:convert_speed --> … <!-- /bench:convert_speed --> block" in (
        capsys.readouterr().err
    )


def _load_engines() -> ModuleType:
    sys.path.insert(0, str(ROOT / "bench"))  # engines.py imports provenance from its folder
    try:
        spec = importlib.util.spec_from_file_location("bench_engines", ROOT / "bench" / "engines.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(ROOT / "bench"))
    return module


MINILM_FACTS: dict[str, Any] = {
    "library": "tvm_model.so",
    "inputs": [
        {"name": "input_ids", "shape": ["batch", "dim1"]},
        {"name": "attention_mask", "shape": ["batch", "dim1"]},
    ],
    "buckets": {
        "dims": {"batch": [1, 8, 32], "dim1": [128]},
        "padded": {"dim1": {"input": "attention_mask", "axis": 1, "alias": "seq"}},
        "strict": False,
        "libraries": [
            {"dims": {"batch": b, "dim1": 128}, "library": f"tvm_bucket_{b}x128.so"} for b in (1, 8, 32)
        ],
    },
    "tuning": {
        "trials": 1234,
        "tune_s": 1488.0,
        "cache_hit": False,
        "tasks": [
            {"bucket": "32x128", "name": "fused_matmul_add", "calls": 36, "trials": 300, "best_us": 9000.0},
            {"bucket": "32x128", "name": "softmax", "calls": 6, "trials": 40, "best_us": 6000.0},
            {"bucket": "1x128", "name": "fused_matmul_add", "calls": 36, "trials": 200, "best_us": 300.0},
        ],
    },
}


def test_engines_bench_picks_the_serving_bucket_and_judges_the_target() -> None:
    engines = _load_engines()
    feed = {"input_ids": np.zeros((5, 100), np.int64), "attention_mask": np.zeros((5, 100), np.int64)}
    assert engines.bucket_name(engines.serving_bucket(MINILM_FACTS, feed)) == "8x128"
    big = {name: np.zeros((33, 128), np.int64) for name in feed}
    assert engines.serving_bucket(MINILM_FACTS, big) is None  # the symbolic library serves it
    longer = {name: np.zeros((1, 200), np.int64) for name in feed}
    assert engines.serving_bucket(MINILM_FACTS, longer) is None
    assert engines._padded_batches((1, 8, 32)) == [1, 5, 24]
    ratio = engines.Ratio((1.2, 1.4), 1.3, 1.1, 1.45)
    assert [engines.verdict(ratio, t) for t in (1.5, 1.3, 1.05)] == ["met", "tie with target", "missed"]
    tasks = engines.task_breakdown(MINILM_FACTS["tuning"])
    assert [(t["bucket"], t["task"]) for t in tasks][:2] == [
        ("1x128", "fused_matmul_add"),
        ("32x128", "fused_matmul_add"),
    ]
    assert tasks[1]["share"] == pytest.approx(324_000 / 360_000)


def _engines_v2_doc(engines: ModuleType) -> dict[str, Any]:
    model = engines.MODELS["minilm"]
    cases = engines._cases(model)
    context = {"errors": {"onnxruntime": 6e-7, "tvm": 1e-6}, "facts": MINILM_FACTS}
    speed = {"onnxruntime": 1.0, "tvm": 1.2}
    rows = [
        engines._row(case, engine, [[1000.0 * case.batch * f * (1 + i / 100)] for i in range(5)], context)
        for case in cases
        for engine, f in speed.items()
    ]
    for row in rows:
        row["ratio_vs_onnxruntime"] = speed[row["engine"]]
    return {
        "schema": engines.SCHEMA,
        "threads": 2,
        "rounds": 5,
        "tvm": {"minilm": {"buckets": MINILM_FACTS["buckets"], "tuning": MINILM_FACTS["tuning"]}},
        "tvm_tasks": {"minilm": engines.task_breakdown(MINILM_FACTS["tuning"])},
        "results": rows,
        "ratios": engines._ratios(model, cases, rows),
    }


def test_engines_v2_table_has_a_column_per_batch_the_bucket_and_the_verdicts() -> None:
    doc = _engines_v2_doc(_load_engines())
    lines = tables.render_engines(doc)
    assert "5 interleaved rounds" in lines[0]
    tuning = "buckets 1×128, 8×128, 32×128; tuned 24.8 min, 1,234 MetaSchedule trials"
    assert f"**MiniLM-L6, seq 128** — TVM: {tuning}." in lines
    assert "| engine | batch 1 | batch 8 | batch 32 |" in lines
    cells = [
        "1.22 ms (1.20×, bucket 1×128)",
        "9.79 ms (1.20×, bucket 8×128)",
        "39.2 ms (1.20×, bucket 32×128)",
    ]
    assert "| TVM | " + " | ".join(cells) + " |" in lines
    assert "| target | ≤ 1.5×: met | ≤ 1.5×: met | ≤ 1.3×: met |" in lines
    padded = next(line for line in lines if line.startswith("| TVM / ONNX Runtime, padded"))
    assert "b5 × s100: 1.20× [1.20, 1.20]" in padded and "b24 × s100" in padded
    assert not any(line.startswith("Where MiniLM-L6") for line in lines)  # every target met
    doc["ratios"][2]["verdict"] = "missed"
    where = next(line for line in tables.render_engines(doc) if line.startswith("Where MiniLM-L6"))
    assert "32×128: `fused_matmul_add` 90% (36 calls × 9,000.0 µs, 300 trials)" in where


def test_a_target_holds_when_its_interval_does_not_its_point_estimate() -> None:
    from tritongen.intervals import paired_ratio

    under = paired_ratio([1.10, 1.15, 1.12, 1.14], [1.0, 1.0, 1.0, 1.0])
    straddles = paired_ratio([1.05, 1.45, 1.0, 1.3], [1.0, 1.0, 1.0, 1.0])  # estimate under 1.2, interval not
    above = paired_ratio([1.6, 1.7, 1.65], [1.0, 1.0, 1.0])
    assert straddles is not None and straddles.estimate < 1.2 < (straddles.high or 0)
    assert tables.judged(under, 1.2, at_most=True).endswith("target ≤ 1.2×: met")
    assert tables.judged(straddles, 1.2, at_most=True).endswith("not shown (the interval straddles it)")
    assert tables.judged(above, 1.5, at_most=True).endswith("missed")
    assert tables.judged(above, 1.5, at_most=False).endswith("met")
    assert tables.judged(paired_ratio([1.1], [1.0]), 1.2, at_most=True).startswith("not shown (one round")


def test_the_near_ties_table_shows_each_tune_and_the_target_on_every_run() -> None:
    run = {"wall_s": 95.0, "exit_code": 0, "trials": 4, "rounds_completed": 5, "rounds_cap": 20,
           "stopped": "no pair can be decided", "verdict": "keep the current config"}  # fmt: skip
    doc = {"model": "batch_model", "repeats": 2, "runs": [run, {**run, "wall_s": 190.0}],
           "summary": {"wall_s": {"min": 95.0, "median": 142.5, "max": 190.0}, "target_s": 180.0,
                       "target_met": False}}  # fmt: skip
    lines = tables.render_near_ties(doc)
    assert "2 runs: 95 / 142 / 190 s" in lines[0]
    assert lines[0].endswith("target each at most 3 min: not met).")
    assert "| 2 | 190 | 4 | 5 of at most 20 | no pair can be decided | keep the current config |" in lines


def test_a_result_written_meanwhile_is_no_change_of_the_code_measured(tmp_path: Path) -> None:
    (tmp_path / "bench" / "results").mkdir(parents=True)
    (tmp_path / "bench" / "results" / "noise.json").write_text("{}\n")
    (tmp_path / "README.md").write_text("x\n")
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "results"], check=True)
    spec = importlib.util.spec_from_file_location("bench_provenance", ROOT / "bench" / "provenance.py")
    assert spec is not None and spec.loader is not None
    provenance = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(provenance)
    provenance.ROOT = tmp_path
    (tmp_path / "bench" / "results" / "noise.json").write_text('{"written": "by an earlier benchmark"}\n')
    assert provenance._dirty() is False
    (tmp_path / "README.md").write_text("changed\n")
    assert provenance._dirty() is True
