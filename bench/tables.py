"""The benchmark tables of docs/benchmarks.md, generated from the committed ``bench/results/*.json``.

Each table lives in docs/benchmarks.md between ``<!-- bench:NAME -->`` and ``<!-- /bench:NAME -->``,
one block per result file ``bench/results/NAME.json``: the table, a line saying where and
how it was measured (from the file's ``provenance``) and the noise floor of this machine
(from ``bench/results/noise.json``). A result that is not committed yet gets one line
saying how to measure it instead of a table, so the docs never show a figure without its
file.

Usage: ``.venv/bin/python bench/tables.py [--check]`` (``make bench-tables``). ``--check``
changes nothing and exits 1 when a block differs from what the results give.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tritongen.intervals import Ratio, paired_ratio

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
PAGE = ROOT / "docs" / "benchmarks.md"
"""The page that holds the benchmark blocks."""

Document = dict[str, Any]

VERSIONS = ("nvidia-pytriton", "onnxruntime-gpu", "onnxruntime", "apache-tvm", "torch")
"""Packages whose versions the provenance line names (Triton, ONNX Runtime, TVM, torch)."""

MODEL_LABELS = {"mlp": "MLP", "minilm": "MiniLM-L6"}
ENGINE_LABELS = {"onnxruntime": "ONNX Runtime", "torchscript": "TorchScript", "tvm": "TVM"}
GENERATOR_LABELS = {
    "wrk": "wrk (1 thread)",
    "plain_locust": "plain Locust + tritonclient.http",
    "tritongen_p1": "tritongen loadtest, 1 process",
    "tritongen_p2": "tritongen loadtest, 2 processes",
    "tritongen_kept_p1": "tritongen, a run in a kept process, 1 process",
    "tritongen_kept_p2": "tritongen, a run in a kept process, 2 processes",
    "locustfile_given_p1": "given locustfile (before), 1 process",
    "locustfile_given_p2": "given locustfile (before), 2 processes",
    "locustfile_current_p1": "current locustfile, 1 process",
    "locustfile_current_p2": "current locustfile, 2 processes",
}


class TablesError(Exception):
    """The page lacks a block, or a result file cannot be read."""


# --- number formats ---------------------------------------------------------------------


def _ms(us: float | None) -> str:
    """Microseconds as milliseconds with about three significant digits."""
    if us is None:
        return "–"
    ms = us / 1000
    if ms < 1:
        return f"{ms:.3f}"
    if ms < 10:
        return f"{ms:.2f}"
    if ms < 100:
        return f"{ms:.1f}"
    return f"{ms:,.0f}"


def _num(value: float | None, digits: int = 0) -> str:
    return "–" if value is None else f"{value:,.{digits}f}"


def _ratio(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def judged(ratio: Ratio | None, bound: float, *, at_most: bool) -> str:
    """A target judged on its interval, not its point estimate.

    ``met`` only when the whole interval is on the right side of ``bound``, ``missed`` when it is
    wholly on the wrong side, else ``not shown``.
    """
    if ratio is None:
        return "not measured"
    sign = "≤" if at_most else "≥"
    if ratio.low is None or ratio.high is None:
        return f"not shown (one round, no interval; target {sign} {bound:g}×)"
    inside, outside = (
        (ratio.high <= bound, ratio.low > bound) if at_most else (ratio.low >= bound, ratio.high < bound)
    )
    verdict = "met" if inside else "missed" if outside else "not shown (the interval straddles it)"
    return f"{ratio.estimate:.2f}× [{ratio.low:.2f}, {ratio.high:.2f}], target {sign} {bound:g}×: {verdict}"


def _per_round(generator: dict[str, Any] | None, figure: str) -> list[float | None]:
    """One generator's ``figure`` in each round, in round order."""
    return [r.get(figure) for r in (generator or {}).get("rounds") or []]


def _pct(value: float | None, digits: int = 1) -> str:
    return "–" if value is None else f"{value:.{digits}%}"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]


def _interval(summary: dict[str, Any] | None, fmt: Callable[[float | None], str]) -> str:
    """``median [ci_low, ci_high]`` of a summary (``intervals.Summary.to_json``)."""
    if not summary:
        return "–"
    low, high = summary.get("ci_low"), summary.get("ci_high")
    interval = "" if low is None or high is None else f" [{fmt(low)}, {fmt(high)}]"
    return fmt(summary.get("median")) + interval


# --- one renderer per result file --------------------------------------------------------


def render_noise(doc: Document) -> list[str]:
    """The A/A series: each contender's throughput and P99 over rounds, and their paired ratio."""
    settings = doc.get("settings") or {}
    caption = (
        f"A/A series: `{doc['model']}` and an identical copy `{doc['copy']}` served side by side, "
        f"{doc.get('rounds_completed', settings.get('rounds'))} interleaved rounds of "
        f"{settings.get('duration_s', 0):g} s at concurrency {settings.get('concurrency')} "
        f"(batch {settings.get('batch_size', 1)}). Every difference between the two is noise."
    )
    rows = []
    for name, data in doc["contenders"].items():
        summary = data.get("summary") or {}
        throughput, p99 = summary.get("infer_per_s"), summary.get("p99_us")
        rows.append(
            [
                f"`{name}`",
                _interval(throughput, _num),
                _pct((throughput or {}).get("cv")),
                _interval(p99, _ms),
                _pct((p99 or {}).get("cv")),
            ]
        )
    header = ["model", "infer/s, median [95% CI]", "CV", "P99 ms, median [95% CI]", "CV"]
    paired = doc.get("paired") or {}
    parts = []
    for key, label in (("infer_per_s", "throughput"), ("p99_us", "P99")):
        ratio = paired.get(key) or {}
        if ratio.get("estimate") is None:
            parts.append(f"{label} –")
            continue
        low, high = ratio.get("ci_low"), ratio.get("ci_high")
        interval = "" if low is None or high is None else f" [{low:.3f}, {high:.3f}]"
        spread = ratio.get("log_sd")
        spread_text = "" if spread is None else f", per-round spread ±{spread:.1%} (s.d. of the log ratio)"
        verdict = "different (a false positive)" if ratio.get("significant") else "a tie"
        parts.append(f"{label} {ratio['estimate']:.3f}×{interval}{spread_text}, {verdict}")
    ratio_line = f"Paired ratio `{doc['model']}` / `{doc['copy']}` per round: " + "; ".join(parts) + "."
    return [caption, "", *_table(header, rows), "", ratio_line]


def render_pinning(doc: Document) -> list[str]:
    """``--cpus`` against not pinned: each setting's A/A noise, and pinned over not pinned."""
    settings = doc.get("settings") or {}
    other = doc.get("other_cpu_mean")
    caption = (
        f"`--cpus {settings.get('cpus')}` against not pinned on {settings.get('machine_cores')} cores: "
        f"`{doc['model']}` and an identical copy, each pinned and not, {doc.get('rounds_completed')} "
        f"interleaved rounds of {settings.get('duration_s', 0):g} s at concurrency "
        f"{settings.get('concurrency')}; other processes used {_num(other, 2) if other is not None else '–'} "
        "cores on average meanwhile."
    )
    rows = []
    for label, data in (doc.get("settings_measured") or {}).items():
        noise = data.get("noise") or {}
        called = [k for k, v in (data.get("aa_significant") or {}).items() if v]
        rows.append(
            [
                label,
                _pct(noise.get("infer_per_s_cv")),
                _pct(noise.get("p99_us_cv")),
                _pct(noise.get("infer_per_s_ratio_log_sd")),
                _pct(noise.get("p99_us_ratio_log_sd")),
                ", ".join(called) or "tie",
            ]
        )
    header = ["setting", "infer/s CV", "P99 CV", "A/A' infer/s spread", "A/A' P99 spread", "A/A' verdict"]
    between = doc.get("pinned_over_unpinned") or {}
    parts = [
        f"{label} {_paired(between.get(key))}"
        for key, label in (("infer_per_s", "throughput"), ("p99_us", "P99"))
    ]
    return [
        caption,
        "",
        *_table(header, rows),
        "",
        "Pinned over not pinned, per round: " + "; ".join(parts) + ".",
    ]


def render_run_overhead(doc: Document) -> list[str]:
    """What each load run costs beyond its warm-up and measured time, Locust kept up or started per run."""
    settings = doc.get("settings") or {}
    modes: dict[str, Any] = doc.get("modes") or {}
    names: dict[str, str] = settings.get("generators") or {}
    levels, rounds = settings.get("levels"), settings.get("rounds")
    warmup, measured = settings.get("warmup_s", 0), settings.get("duration_s", 0)
    caption = (
        f"{settings.get('repeats')} tests per mode, the modes in turn; each test {levels} concurrency, "
        f"{rounds} rounds (levels interleaved), each run {warmup:g} s warm-up + {measured:g} s measured."
    )
    rows = []
    for mode, figures in modes.items():
        rows.append(
            [
                names.get(mode, mode),
                str(figures.get("runs")),
                _num(figures.get("overhead_median_s"), 2) + " s",
                _num(figures.get("overhead_spread_s"), 2) + " s",
                f"{_num(figures.get('overhead_min_s'), 2)} / {_num(figures.get('overhead_max_s'), 2)} s",
                _num(figures.get("test_overhead_per_run_s"), 2) + " s",
            ]
        )
    header = ["Locust", "runs", "overhead per run, median", "s.d.", "least / most", "per run over each test"]
    return [caption, "", *_table(header, rows)]


def render_near_ties(doc: Document) -> list[str]:
    """Each near-tie tune: its wall time, its confirmation's rounds, why they stopped and the verdict."""
    summary = doc["summary"]
    wall = summary["wall_s"]
    caption = (
        f"`tritongen tune {doc['model']} --max-trials 3 --duration 2s` on the embedded server, "
        f"{doc['repeats']} runs: {wall['min']:.0f} / {wall['median']:.0f} / {wall['max']:.0f} s (least / "
        f"median / most; target each at most {summary['target_s'] / 60:g} min: "
        f"{'met' if summary['target_met'] else 'not met'})."
    )
    rows = []
    for number, run in enumerate(doc["runs"], 1):
        rounds = f"{run.get('rounds_completed')} of at most {run.get('rounds_cap')}"
        rows.append(
            [str(number), f"{run['wall_s']:.0f}", str(run.get("trials", "–")), rounds,
             str(run.get("stopped") or run.get("error") or "–"), str(run.get("verdict") or "–")]
        )  # fmt: skip
    header = ["run", "wall s", "trials", "confirmation rounds", "why the rounds stopped", "verdict"]
    return [caption, "", *_table(header, rows)]


def render_demo(doc: Document) -> list[str]:
    """``make demo``'s wall time, each step's, and what its rounds decided."""
    wall, target = float(doc["wall_s"]), float(doc["target_s"])
    caption = (
        f"`make demo` once installed: {wall / 60:.1f} min in all (target at most {target / 60:g} min: "
        f"{'met' if doc.get('meets_target') else 'not met'}); every verdict decided: "
        f"{'yes' if doc.get('all_decided') else 'no'}."
    )
    rows = [
        [f"{step['step']}" + (f" {step['model']}" if step.get("model") else ""), f"{step['seconds']:.0f} s"]
        for step in doc["steps"]
    ]
    if doc.get("conditions"):
        caption += f" Conditions: {doc['conditions']}."
    lines = [caption, "", *_table(["step", "time"], rows), ""]
    verdict_rows = []
    for name, found in (doc.get("verdicts") or {}).items():
        for pair in found["pairs"]:
            verdict_rows.append([name, str(found["rounds"]), pair["pair"], pair["text"]])
        for pair in found.get("reported") or []:
            verdict_rows.append([name, str(found["rounds"]), pair["pair"], f"{pair['text']} (reported only)"])
    return lines + _table(["rounds of", "rounds", "pair", "verdict"], verdict_rows)


def render_loadgen(doc: Document) -> list[str]:
    """Requests/s and CPU cost of each load generator against the same identity model."""
    generators: dict[str, Any] = doc["generators"]
    rounds = doc.get("rounds") or max((len(g.get("rounds") or []) for g in generators.values()), default=0)
    caption = (
        f"Identity model, {doc['instances']} instance(s), concurrency {doc['concurrency']}, "
        f"{rounds} interleaved round(s) of {doc['seconds']} s per generator; medians over rounds."
    )
    rows = [
        [
            GENERATOR_LABELS.get(name, name),
            _num(g["requests_per_s"]),
            _ratio(g.get("vs_wrk")),
            ", ".join(_ratio(r) for r in g.get("vs_wrk_per_round") or []) or "–",
            _num(g["cpu_s_per_1000_requests"], 3),
        ]
        for name, g in generators.items()
    ]
    header = ["generator", "req/s", "× wrk", "× wrk per round", "CPU-s / 1000 requests"]
    lines = [caption, "", *_table(header, rows)]
    compared: dict[str, Any] = (doc.get("verdict") or {}).get("current_vs_given") or {}
    if compared:
        parts = [
            f"{key}: {c['requests_per_s_ratio']:.2f}× the requests/s, "
            f"{c['cpu_s_per_1000_requests_ratio']:.2f}× the CPU per request"
            for key, c in compared.items()
        ]
        lines += ["", "Current locustfile against the given one, same rounds: " + "; ".join(parts) + "."]
    verdict = doc.get("verdict") or {}
    if verdict.get("kept_cpu_vs_wrk") is not None:
        kept, wrk = generators.get(verdict["kept_best"]), generators.get("wrk")
        cpu = paired_ratio(
            _per_round(kept, "cpu_s_per_1000_requests"), _per_round(wrk, "cpu_s_per_1000_requests")
        )
        lines += [
            "",
            f"A run in a Locust process kept up across runs ({GENERATOR_LABELS.get(verdict['kept_best'])}; "
            f"its CPU time during the run, its start-up paid once before): "
            f"{verdict['kept_vs_wrk']:.2f}× wrk's requests/s; CPU per request over wrk's, paired by round: "
            f"{judged(cpu, verdict['target_cpu_vs_wrk'], at_most=True)}.",
        ]
    return lines


def render_convert_speed(doc: Document) -> list[str]:
    """Convert and render+check times of the example models."""
    results: list[dict[str, Any]] = doc["results"]
    repeats = sorted({r["repeat"] for r in results})
    caption = f"Median of {', '.join(map(str, repeats))} runs per example model."
    rows = [[r["model"], _ms(r["convert_median_us"]), _ms(r["render_and_check_median_us"])] for r in results]
    return [caption, "", *_table(["model", "convert ms", "render + check ms"], rows)]


def render_llm(doc: Document) -> list[str]:
    """Tritongen against AIPerf on one vLLM server: each compared figure, CPU per token, start-up."""
    settings = doc.get("settings") or {}
    figures: dict[str, Any] = doc["figures"]
    caption = (
        f"{settings.get('server')}, {settings.get('endpoint')} completions, concurrency "
        f"{settings.get('concurrency')}, {settings.get('rounds')} interleaved round(s) of "
        f"{settings.get('seconds')} s per generator, {settings.get('output_tokens')} output tokens per "
        f"answer; medians over rounds; AIPerf {settings.get('aiperf')} with --use-server-token-count."
    )
    rows = []
    for label, entry in figures.items():
        if "ratio" not in entry:
            continue
        agree = "yes" if entry.get("agree") else "no"
        rows.append(
            [label, _num(entry["tritongen"], 2), _num(entry["aiperf"], 2), _ratio(entry["ratio"]), agree]
        )
    header = [
        "figure",
        "tritongen",
        "AIPerf",
        "tritongen / AIPerf",
        f"within {doc.get('agreement', 0.1):.0%}",
    ]
    own: list[tuple[str, str, int]] = [
        ("the server's own mean TTFT (ms)", "server_ttft_ms", 1),
        ("the server's own mean request latency (ms)", "server_e2e_ms", 1),
        ("the server's own mean inter-token latency (ms)", "server_itl_ms", 2),
        ("generator CPU-seconds per run", "cpu_s", 1),
        ("CPU-seconds per 1000 output tokens", "cpu_s_per_1000_tokens", 2),
        ("launch to first request (s)", "first_request_s", 1),
    ]
    extra = [
        [
            label,
            _num((figures.get(key) or {}).get("tritongen"), digits),
            _num((figures.get(key) or {}).get("aiperf"), digits),
        ]
        for label, key, digits in own
    ]
    return [
        caption,
        "",
        *_table(header, rows),
        "",
        *_table(["measured beside each run", "during tritongen's runs", "during AIPerf's runs"], extra),
        *_llm_wire_line(doc),
    ]


def _llm_wire_line(doc: Document) -> list[str]:
    """The streams of the tritongen runs on the loopback capture (``--wire``), medians over rounds."""
    walls = [((r.get("tritongen") or {}).get("wire") or {}) for r in doc.get("rounds") or []]
    walls = [w for w in walls if w.get("ttft_p50_ms")]
    if not walls:
        return []

    def median(figure: str, side: str) -> float:
        return float(statistics.median(w[figure][side] for w in walls))

    parts = [
        f"{label} {median(figure, 'wire'):.1f} ms (tritongen {median(figure, 'client'):.1f})"
        for label, figure in (("TTFT P50", "ttft_p50_ms"), ("P99", "ttft_p99_ms"),
                              ("gap P50", "itl_p50_ms"), ("P99", "itl_p99_ms"))
    ]  # fmt: skip
    shared = statistics.median(w.get("same_segment_share") or 0.0 for w in walls)
    return [
        "",
        "On the wire during tritongen's runs (`--wire`, medians over rounds): "
        + ", ".join(parts)
        + f"; {shared:.1%} of the gaps between events were within one TCP segment.",
    ]


def render_tune(doc: Document) -> list[str]:
    """Grid against adaptive search per model: trials, each one's choice, their head-to-head, wall time."""
    results: list[dict[str, Any]] = doc["results"]
    sizes = sorted({r["grid_size"] for r in results})
    duration = doc.get("duration_s")
    rounds = doc.get("rounds")
    caption = (
        f"Search space of {', '.join(map(str, sizes))} configs"
        + (f", {duration:g} s per trial" if duration is not None else "")
        + (
            f"; the configs each strategy chose and the baseline then measured in {rounds} interleaved "
            "rounds (median ± half the 95% interval; ratios paired by round)."
            if rounds
            else "."
        )
    )
    rows = [
        [
            MODEL_LABELS.get(r["model"], r["model"]),
            r["strategy"],
            str(r["concurrency"]),
            _num(r["slo_p99_ms"]),
            f"{r['trials']}/{r['grid_size']}",
            f"`{r.get('h2h_key') or r.get('best_key') or '–'}`",
            _plus_minus(r.get("h2h_infer_per_s")),
            _paired(r.get("h2h_vs_grid")) if r["strategy"] != "grid" else "–",
            _paired(r.get("h2h_vs_baseline")),
            str(r.get("decision") or "–"),
            _num(r["wall_s"]),
        ]
        for r in results
    ]
    header = ["model", "strategy", "concurrency", "SLO P99 ms", "trials", "chosen config", "infer/s",
              "vs grid's choice", "vs baseline", "tune decision", "wall s"]  # fmt: skip
    return [caption, "", *_table(header, rows)]


def _plus_minus(summary: dict[str, Any] | None) -> str:
    """``median ± half the interval`` of a summary (``intervals.Summary.to_json``)."""
    if not summary:
        return "–"
    median, low, high = summary["median"], summary.get("ci_low"), summary.get("ci_high")
    if low is None or high is None:
        return _num(median)
    return f"{_num(median)} ± {_num((high - low) / 2)}"


def _paired(ratio: dict[str, Any] | None) -> str:
    """``1.93× [1.45, 2.56]`` of a paired ratio (``intervals.Ratio.to_json``), ``(tie)`` when it holds 1."""
    if not ratio:
        return "–"
    if ratio.get("ci_low") is None:
        return f"{ratio['estimate']:.2f}×"
    tie = "" if ratio.get("significant") else " (tie)"
    return f"{ratio['estimate']:.2f}× [{ratio['ci_low']:.2f}, {ratio['ci_high']:.2f}]{tie}"


def render_soak(doc: Document) -> list[str]:
    """Load, errors, P99 per minute and memory growth of the soak."""
    minutes = [_ms(p) for p in doc["p99_us_per_minute"]]
    drift = doc.get("p99_drift")
    errors = str(doc["errors"])
    if doc.get("errors_by_kind"):
        errors += " (" + ", ".join(f"{k}: {v}" for k, v in sorted(doc["errors_by_kind"].items())) + ")"

    def rss(side: str, digits: int) -> str:
        sizes = doc[f"{side}_rss_bytes"]
        first, last = sizes["first_minute"] / 1e6, sizes["last_minute"] / 1e6
        return f"{first:,.{digits}f} MB → {last:,.{digits}f} MB ({doc[f'{side}_rss_growth']:+.1%})"

    rows = [
        ["model", f"`{doc['model']}`"],
        [
            "load",
            f"{_num(doc['target_req_per_s'])} req/s ({doc['fraction']:.0%} of {doc['max_req_per_s']:,.0f} at "
            f"c={doc['max_at_concurrency']}), {doc['requests']:,} requests in {doc['duration_s']:.0f} s, "
            f"achieved {_num(doc.get('achieved_req_per_s'))} req/s",
        ],
        ["errors", errors],
        [
            "P99 per minute",
            f"{', '.join(minutes)} ms (median {_ms(doc.get('p99_us_median_minute'))} ms; "
            f"first → last {'–' if drift is None else f'{drift:+.0%}'})",
        ],
        ["server RSS", rss("server", 0)],
        ["load-generator RSS", rss("generator", 1)],
        ["verdict", "passed" if doc.get("passed") else "failed"],
    ]
    return _table(["figure", "value"], rows)


def _model_label(model: str, seq: int | None) -> str:
    return MODEL_LABELS.get(model, model) + (f", seq {seq}" if seq else "")


def _tuning_text(model: str, tuning: dict[str, Any] | None) -> str:
    label = MODEL_LABELS.get(model, model)
    if not tuning:
        return f"{label} untuned"
    shape = " × ".join(str(d) for d in next(iter((tuning.get("shapes") or {"": ["?"]}).values())))
    cached = ", cached records" if tuning.get("cache_hit") else ""
    return (
        f"{label} tuned at {shape}: {tuning.get('trials')} MetaSchedule trials on "
        f"{tuning.get('tasks')} tasks in {(tuning.get('tune_s') or 0) / 60:.1f} min{cached}"
    )


def render_engines(doc: Document) -> list[str]:
    """In-process latency per model, batch and engine, with the ratio to ONNX Runtime (schema 1 or 2)."""
    if doc.get("schema") == ENGINES_V2:
        return render_engines_v2(doc)
    return render_engines_v1(doc)


def render_engines_v1(doc: Document) -> list[str]:
    """Schema 1: one median per model, batch and engine; TVM's symbolic or tuned library."""
    results: list[dict[str, Any]] = doc["results"]
    engines = list(dict.fromkeys(r["engine"] for r in results))
    tunings = doc.get("tvm_tuning") or {}
    caption = f"In-process, {doc['threads']} threads, median time per call."
    if tunings:
        caption += " TVM: " + "; ".join(_tuning_text(m, t) for m, t in tunings.items()) + "."
    shapes = list(dict.fromkeys((r["model"], r["seq"], r["batch"]) for r in results))
    rows = []
    for model, seq, batch in shapes:
        cells = [_model_label(model, seq), str(batch)]
        for engine in engines:
            row = next(
                (r for r in results if (r["model"], r["batch"], r["engine"]) == (model, batch, engine)), None
            )
            if row is None:
                cells.append("–")
                continue
            notes = [] if engine == "onnxruntime" else [f"{row['ratio_vs_onnxruntime']:.2f}×"]
            if row.get("library"):
                notes.append(f"{row['library']} library")
            cells.append(f"{_ms(row['median_us'])} ms" + (f" ({', '.join(notes)})" if notes else ""))
        rows.append(cells)
    header = ["model", "batch", *(ENGINE_LABELS.get(e, e) for e in engines)]
    errors = []
    for engine in engines:
        found = [
            r["max_abs_err"] for r in results if r["engine"] == engine and r.get("max_abs_err") is not None
        ]
        if found:
            errors.append(f"{ENGINE_LABELS.get(engine, engine)} {max(found):.1e}")
    lines = [caption, "", *_table(header, rows)]
    if errors:
        lines += ["", "Largest absolute error against the PyTorch source: " + ", ".join(errors) + "."]
    return lines


ENGINES_V2 = "tritongen.bench.engines/2"


def _bucket(name: str | None) -> str:
    return "symbolic library" if not name else "bucket " + name.replace("x", "×")


def _engines_tuning(tvm: dict[str, Any]) -> str:
    """``buckets 1×128, 8×128, 32×128; tuned 24.8 min, 1,234 trials`` (or ``untuned``)."""
    buckets = tvm.get("buckets") or {}
    first = buckets.get("batch_dim") or "batch"
    names = [
        "×".join(str(lib["dims"][d]) for d in sorted(lib["dims"], key=lambda d: (d != first, d)))
        for lib in buckets.get("libraries") or []
    ]
    text = "buckets " + ", ".join(names) if names else "symbolic library only"
    tuning = tvm.get("tuning")
    if not tuning:
        return f"{text}; untuned"
    cached = ", cached records" if tuning.get("cache_hit") else ""
    minutes = (tuning.get("tune_s") or 0) / 60
    return f"{text}; tuned {minutes:.1f} min, {tuning.get('trials', 0):,} MetaSchedule trials{cached}"


def _engine_cell(row: dict[str, Any] | None) -> str:
    if row is None:
        return "–"
    notes = [] if row["engine"] == "onnxruntime" else [f"{row['ratio_vs_onnxruntime']:.2f}×"]
    if row["engine"] == "tvm":
        notes.append(_bucket(row.get("bucket")))
    return f"{_ms(row['median_us'])} ms" + (f" ({', '.join(notes)})" if notes else "")


def _target_cell(entry: dict[str, Any] | None) -> str:
    if entry is None or entry.get("target") is None:
        return "–"
    return f"≤ {entry['target']:g}×: {entry.get('verdict') or '–'}"


def _padded_cell(entry: dict[str, Any] | None) -> str:
    if entry is None:
        return "–"
    return f"b{entry['batch']} × s{entry['seq']}: {_paired(entry['ratio'])}"


def _engines_model(doc: Document, model: str) -> list[str]:
    """One model's table: a column per batch, a row per engine, then the ratio, target and padded rows."""
    results = [r for r in doc["results"] if r["model"] == model]
    exact = [r for r in results if not r.get("padded")]
    batches = sorted({r["batch"] for r in exact})
    engines = list(dict.fromkeys(r["engine"] for r in results))
    ratios = [e for e in doc.get("ratios") or [] if e["model"] == model]
    exact_ratio = {e["batch"]: e for e in ratios if not e.get("padded")}
    tvm_bucket = {r["batch"]: r.get("bucket") for r in exact if r["engine"] == "tvm"}
    padded = {e.get("bucket"): e for e in ratios if e.get("padded")}

    def at(engine: str, batch: int) -> dict[str, Any] | None:
        return next((r for r in exact if (r["engine"], r["batch"]) == (engine, batch)), None)

    rows = [[ENGINE_LABELS.get(e, e), *(_engine_cell(at(e, b)) for b in batches)] for e in engines]
    rows.append(
        [
            "TVM / ONNX Runtime, paired [95% CI]",
            *(_paired((exact_ratio.get(b) or {}).get("ratio")) for b in batches),
        ]
    )
    if any(e.get("target") is not None for e in exact_ratio.values()):
        rows.append(["target", *(_target_cell(exact_ratio.get(b)) for b in batches)])
    if padded:
        cells = [_padded_cell(padded.get(tvm_bucket.get(b))) for b in batches]
        rows.append(["TVM / ONNX Runtime, padded request in the same bucket", *cells])
    seq = next((r["seq"] for r in exact if r.get("seq")), None)
    tvm = (doc.get("tvm") or {}).get(model) or {}
    title = f"**{_model_label(model, seq)}**" + (f" — TVM: {_engines_tuning(tvm)}." if tvm else "")
    return [title, "", *_table(["engine", *(f"batch {b}" for b in batches)], rows)]


def _engines_tasks(doc: Document, model: str, top: int = 3) -> str | None:
    """Where TVM's time goes when a target is not met: the largest tasks of each bucket."""
    verdicts = [e.get("verdict") for e in doc.get("ratios") or [] if e["model"] == model and e.get("target")]
    tasks: list[dict[str, Any]] = ((doc.get("tvm_tasks") or {}).get(model)) or []
    if not tasks or all(v == "met" for v in verdicts):
        return None
    parts = []
    for bucket in dict.fromkeys(t["bucket"] for t in tasks):
        largest = sorted((t for t in tasks if t["bucket"] == bucket), key=lambda t: -t["total_us"])[:top]
        shown = ", ".join(
            f"`{t['task']}` {_pct(t.get('share'), 0)} ({t['calls']} calls × {_num(t.get('best_us'), 1)} µs, "
            f"{t['trials']} trials)"
            for t in largest
        )
        parts.append(f"{bucket.replace('x', '×')}: {shown}")
    label = MODEL_LABELS.get(model, model)
    return (
        f"Where {label}'s TVM time goes (tuned tasks by calls × best kernel time, share of the bucket): "
        + "; ".join(parts)
        + "."
    )


def render_engines_v2(doc: Document) -> list[str]:
    """Schema 2: interleaved rounds, TVM over shape buckets, the paired ratio and the target's verdict."""
    caption = (
        f"In-process, {doc['threads']} threads, median time per call over {doc.get('rounds')} interleaved "
        "rounds; TVM is the served wrapper, and the bucket that served each shape is named. "
        "TVM / ONNX Runtime is paired by round (geometric mean [95% CI]); a target is met when the "
        "whole interval is within it."
    )
    lines = [caption]
    models = list(dict.fromkeys(r["model"] for r in doc["results"]))
    for model in models:
        lines += ["", *_engines_model(doc, model)]
        where = _engines_tasks(doc, model)
        if where:
            lines += ["", where]
    errors = []
    for engine in dict.fromkeys(r["engine"] for r in doc["results"]):
        found = [
            r["max_abs_err"]
            for r in doc["results"]
            if r["engine"] == engine and r.get("max_abs_err") is not None
        ]
        if found:
            errors.append(f"{ENGINE_LABELS.get(engine, engine)} {max(found):.1e}")
    if errors:
        lines += ["", "Largest absolute error against the PyTorch source: " + ", ".join(errors) + "."]
    return lines


def render_precision(doc: Document) -> list[str]:
    """Latency, throughput and drift of MiniLM-L6 in FP32 and each INT8 variant, served."""
    rows: list[dict[str, Any]] = doc["rows"]
    caption = (
        f"Sequence length {doc['seq']}, {doc['duration_s']:g} s per load level; static INT8 calibrated "
        f"on {doc['calibration_sentences']} sentences, drift measured on {doc['held_out_sentences']} "
        f"others; auto mixed precision budget: 1 − mean cosine ≤ {doc['max_error_cosine']:g}."
    )
    table = []
    for row in rows:
        ok = row["status"] == "ok"
        measured = [
            _num(row.get("p50_ms_b1"), 1),
            _num(row.get("p99_ms_b1"), 1),
            _num(row.get("infer_per_s_b32")),
            _ratio(row.get("speedup_b32")),
            _ratio(row.get("speedup_b1_p50")),
        ]
        mean, low = row.get("cosine_mean"), row.get("cosine_min")
        cosine = "–" if mean is None else f"{mean:.4f}"
        if mean is not None and low is not None and low != mean:
            cosine += f" ({low:.4f})"
        kept = "–" if row.get("precision", "fp32") == "fp32" else str(row.get("kept_fp32", 0))
        if not ok:
            kept += f" ({row['status']})"
        memory = _num(row.get("peak_mem_mb"))
        table.append(
            [
                row.get("variant") or row["model"],
                *(measured if ok else ["–"] * len(measured)),
                cosine,
                _num(row.get("rel_rms_err"), 3),
                kept,
                memory if ok else "–",
            ]
        )
    header = ["variant", "P50 ms b1", "P99 ms b1", "infer/s b32", "× FP32 b32", "× FP32 b1 P50",
              "cosine mean (min)", "rel RMS", "FP32 nodes", "memory MB"]  # fmt: skip
    lines = [caption, "", *_table(header, table)]
    for row in rows:
        if row.get("search_steps"):
            lines += [
                "",
                f"{row.get('variant') or row['model']}: {row.get('kept_fp32', 0)} nodes kept in FP32 "
                f"after {row['search_steps']} search steps; building it took {_num(row.get('convert_s'))} s.",
            ]
    return lines


SHM_PROTOCOLS = {"http": "HTTP", "grpc": "gRPC"}


def render_shared_memory(doc: Document) -> list[str]:
    """Large tensors in the requests or through system shared memory: throughput and CPU per request."""
    settings = doc.get("settings") or {}
    caption = (
        f"Python-backend identity model, FP32 in and out, {doc['tensor_mib']:g} MiB each way per request; "
        f"concurrency {settings.get('concurrency')}, one load process, "
        f"{doc.get('rounds_completed', settings.get('rounds'))} interleaved rounds of "
        f"{settings.get('duration_s', 0):g} s per contender; median [95% CI] over rounds. CPU: milliseconds "
        "of CPU time per request of the load generator (the Locust process) and of the server "
        "(`tritonserver` and its Python-backend stub)."
    )

    def cpu(value: float | None) -> str:
        return _num(value, 3 if value is not None and value < 1 else 2)

    rows = []
    for name, data in doc["contenders"].items():
        protocol, _, kind = name.partition("_")
        summary = data.get("summary") or {}
        rows.append(
            [
                SHM_PROTOCOLS.get(protocol, protocol),
                "system shared memory" if kind == "system" else "in the request",
                _interval(summary.get("infer_per_s"), _num),
                _interval(summary.get("p99_us"), _ms),
                _interval(summary.get("generator_cpu_ms_per_request"), cpu),
                _interval(summary.get("server_cpu_ms_per_request"), cpu),
            ]
        )
    header = ["protocol", "tensors", "infer/s", "P99 ms", "generator CPU ms/req", "server CPU ms/req"]
    lines = [caption, "", *_table(header, rows)]
    for protocol, ratios in (doc.get("paired") or {}).items():
        parts = [
            f"{label} {_paired(ratios.get(key))}"
            for key, label in (
                ("infer_per_s", "throughput"),
                ("generator_cpu_ms_per_request", "generator CPU per request"),
                ("server_cpu_ms_per_request", "server CPU per request"),
            )
        ]
        label = SHM_PROTOCOLS.get(protocol, protocol)
        lines += ["", f"{label}, shared memory / in the request, paired by round: " + "; ".join(parts) + "."]
    if doc.get("status", "ok") != "ok":
        reason = doc.get("reason") or "no reason given"
        lines += ["", f"The rounds stopped early ({doc['status']}): {reason}."]
    return lines


def render_validation(doc: Document) -> list[str]:
    """Throughput with and without checking every response against ``validation_data``."""
    settings = doc.get("settings") or {}
    caption = (
        f"The example MLP (`{doc.get('model')}`), concurrency {settings.get('concurrency')}, "
        f"{settings.get('entries')} data entries sent round-robin, with and without their expected "
        f"outputs; {doc.get('rounds_completed', settings.get('rounds'))} interleaved rounds of "
        f"{settings.get('duration_s', 0):g} s per contender; median [95% CI] over rounds. Target: "
        f"validated / plain at least {settings.get('target_ratio', 0.9):g}."
    )
    rows = []
    for protocol, figures in (doc.get("ratios") or {}).items():
        contenders = doc.get("contenders") or {}
        plain = (contenders.get(f"{protocol}_plain") or {}).get("summary")
        checked = (contenders.get(f"{protocol}_validated") or {}).get("summary")
        rows.append(
            [
                SHM_PROTOCOLS.get(protocol, protocol),
                _interval(plain, _num),
                _interval(checked, _num),
                _paired(figures.get("ratio")),
                "yes" if figures.get("meets_target") else "no",
                "yes" if figures.get("all_validated_and_matching") else "no",
            ]
        )
    header = ["protocol", "plain infer/s", "validated infer/s", "validated / plain", "target met"]
    header.append("all matched")
    lines = [caption, "", *_table(header, rows)]
    if doc.get("status", "ok") != "ok":
        reason = doc.get("reason") or "no reason given"
        lines += ["", f"The rounds stopped early ({doc['status']}): {reason}."]
    return lines


TRACE_LABELS = {"untraced": "no trace", "traced_1": "every request traced", "traced_10": "one in 10 traced"}


def render_server_trace(doc: Document) -> list[str]:
    """The same load untraced and with ``--server-trace`` at two rates: the cost of tracing."""
    settings = doc.get("settings") or {}
    caption = (
        f"The example MLP (`{doc.get('model')}`) over HTTP at concurrency {settings.get('concurrency')}, "
        f"{settings.get('rounds')} interleaved rounds of {settings.get('duration_s', 0):g} s per contender; "
        "median [95% CI] over rounds; traced / untraced paired by round (an interval holding 1 is a tie)."
    )
    rows = []
    for name, data in (doc.get("contenders") or {}).items():
        summary = data.get("summary") or {}
        ratios = (doc.get("paired") or {}).get(name) or {}
        joined = [r.get("joined") for r in data.get("rounds", [])]
        rows.append(
            [
                TRACE_LABELS.get(name, name),
                _interval(summary.get("infer_per_s"), _num),
                _interval(summary.get("p50_us"), _ms),
                _interval(summary.get("p99_us"), _ms),
                _paired(ratios.get("infer_per_s")) if ratios else "–",
                _paired(ratios.get("p50_us")) if ratios else "–",
                f"{sum(j for j in joined if j):,}" if any(joined) else "–",
            ]
        )
    header = ["contender", "infer/s", "P50 ms", "P99 ms", "infer/s ratio", "P50 ratio", "requests joined"]
    return [caption, "", *_table(header, rows)]


def render_wire(doc: Document) -> list[str]:
    """``loadtest --wire``: the reported latency against the wire's plus the client's own time."""
    settings = doc.get("settings") or {}
    ratio = doc.get("captured_throughput_ratio")
    caption = (
        f"The example MLP (`{doc.get('model')}`) at concurrency {settings.get('concurrency')}, "
        f"{settings.get('rounds')} interleaved rounds of {settings.get('duration_s', 0):g} s each; µs, "
        "median [95% CI] over rounds. Client: its own time after the response arrived (kernel receive "
        "stamps; over gRPC the library owns the socket: reported - wire); gap: reported - (wire + client), "
        "within max(2%, 100 µs) in the rounds counted"
        + (f"; HTTP throughput captured / uncaptured {_paired(ratio)}." if ratio else ".")
    )
    rows = []
    for name, label in (("http", "HTTP"), ("grpc", "gRPC")):
        summary = ((doc.get("contenders") or {}).get(name) or {}).get("summary") or {}
        matched = [(r.get("matched") or 0, r.get("recorded") or 0) for r in doc["contenders"][name]["rounds"]]
        for key, figure in (("p50", "P50"), ("p99", "P99")):
            client = summary.get(f"client_{key}_us") or summary.get(f"reported_minus_wire_{key}_us")
            rows.append(
                [
                    f"{label} {figure}",
                    _interval(summary.get(f"reported_{key}_us"), _num),
                    _interval(summary.get(f"wire_{key}_us"), _num),
                    _interval(client, _num),
                    _interval(summary.get(f"gap_{key}_us"), _num),
                    summary.get(f"within_{key}") or "–",
                    f"{sum(m for m, _ in matched):,} of {sum(r for _, r in matched):,}",
                ]
            )
    header = ["run", "reported", "wire", "client", "gap", "within", "requests on the wire"]
    return [caption, "", *_table(header, rows)]


@dataclass(frozen=True)
class Block:
    """One block of the page: the result file ``bench/results/{name}.json`` and its renderer."""

    name: str
    script: str
    render: Callable[[Document], list[str]]

    @property
    def file(self) -> str:
        """The result file, relative to the repository."""
        return f"bench/results/{self.name}.json"


BLOCKS = (
    Block("noise", "bench/noise.py", render_noise),
    Block("loadgen", "bench/loadgen.py", render_loadgen),
    Block("convert_speed", "bench/convert_speed.py", render_convert_speed),
    Block("tune", "bench/tune.py", render_tune),
    Block("soak", "bench/soak.py", render_soak),
    Block("engines", "bench/engines.py", render_engines),
    Block("precision", "bench/precision.py", render_precision),
    Block("shared_memory", "bench/shared_memory.py", render_shared_memory),
    Block("validation", "bench/validation.py", render_validation),
    Block("pinning", "bench/pinning.py", render_pinning),
    Block("run_overhead", "bench/run_overhead.py", render_run_overhead),
    Block("demo", "bench/demo.py", render_demo),
    Block("llm", "bench/llm.py", render_llm),
    Block("loadgen-engine", "bench/loadgen.py", render_loadgen),
    Block("near_ties", "bench/near_ties.py", render_near_ties),
    Block("server_trace", "bench/server_trace.py", render_server_trace),
    Block("wire", "bench/wire.py", render_wire),
)


# --- provenance and noise lines ----------------------------------------------------------


def _machine(provenance: dict[str, Any]) -> str:
    return f"{provenance.get('cpu') or 'an unknown CPU'}, {provenance.get('cores') or '?'} cores"


def check_provenance(doc: Document, block: Block) -> None:
    """Refuse a result whose figures cannot be traced to a commit: no provenance, no commit, or a dirty tree.

    Raises:
        TablesError: one line saying what is wrong and how to measure it again.
    """
    facts = doc.get("provenance") or {}
    again = f"measure it again from a clean, committed tree with `python {block.script}`"
    if not facts.get("commit"):
        raise TablesError(f"{block.file} names no commit it was measured on: {again}")
    if facts.get("dirty"):
        raise TablesError(
            f"{block.file} was measured on commit {facts['commit'][:7]} with uncommitted changes: {again}"
        )


def check_in_history(results: Path = RESULTS) -> None:
    """Refuse a committed result whose commit is not in this checkout's history (HEAD and before).

    Raises:
        TablesError: the first such file, in one line.
    """
    for block in BLOCKS:
        doc = _load(results / f"{block.name}.json")
        commit = ((doc or {}).get("provenance") or {}).get("commit")
        if commit and not _is_ancestor(commit):
            raise TablesError(
                f"{block.file} names commit {commit[:7]}, which is not in this checkout's history: "
                f"measure it again from a clean, committed tree with `python {block.script}`"
            )


def _is_ancestor(commit: str) -> bool:
    """Whether ``commit`` is HEAD or one of its ancestors."""
    found = subprocess.run(
        ["git", "merge-base", "--is-ancestor", commit, "HEAD"], cwd=ROOT, capture_output=True, check=False
    )
    return found.returncode == 0


def provenance_line(doc: Document, block: Block) -> str:
    """Where, when and how the figures were measured.

    Raises:
        TablesError: the result names no commit, or one with uncommitted changes.
    """
    check_provenance(doc, block)
    facts = doc["provenance"]
    commit = str(facts["commit"])[:7]
    packages = facts.get("packages") or {}
    versions = [f"{name} {packages[name]}" for name in VERSIONS if name in packages]
    command = str(facts.get("command") or "").replace(f"{ROOT}/", "")
    return (
        f"Measured {str(facts.get('date') or '?')[:10]} on {_machine(facts)}, commit {commit}, "
        f"Python {facts.get('python') or '?'}"
        + "".join(f", {v}" for v in versions)
        + f": `{command}` ({block.file})."
    )


def noise_line(noise: Document | None, doc: Document) -> str:
    """The noise floor, from the A/A series: the CV of throughput and P99 between rounds."""
    if noise is None:
        return "Noise floor on this machine: not measured yet (run `python bench/noise.py`)."
    cvs: dict[str, list[float]] = {"infer_per_s": [], "p99_us": []}
    for data in (noise.get("contenders") or {}).values():
        for key, found in cvs.items():
            cv = ((data.get("summary") or {}).get(key) or {}).get("cv")
            if cv is not None:
                found.append(float(cv))
    spread = {key: ("–" if not v else f"±{max(v):.1%}") for key, v in cvs.items()}
    here, there = doc.get("provenance") or {}, noise.get("provenance") or {}
    where = "on this machine"
    if (here.get("cpu"), here.get("cores")) != (there.get("cpu"), there.get("cores")):
        where = f"on {_machine(there)}"
    rounds = noise.get("rounds_completed", (noise.get("settings") or {}).get("rounds"))
    return (
        f"Noise floor {where}: throughput {spread['infer_per_s']}, P99 {spread['p99_us']} "
        f"(coefficient of variation over {rounds} A/A rounds, bench/results/noise.json)."
    )


# --- the page ---------------------------------------------------------------------------


def _load(path: Path) -> Document | None:
    if not path.is_file():
        return None
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise TablesError(f"{path}: not readable JSON ({e})") from e
    if not isinstance(doc, dict):
        raise TablesError(f"{path}: not a JSON object")
    return doc


def render_block(block: Block, results: Path = RESULTS) -> str:
    """The block's generated Markdown (without its markers)."""
    doc = _load(results / f"{block.name}.json")
    if doc is None:
        return f"No committed result: run `python {block.script}` (it writes {block.file})."
    try:
        lines = block.render(doc)
    except (KeyError, TypeError, ValueError) as e:
        raise TablesError(f"{block.file}: cannot render the table ({type(e).__name__}: {e})") from e
    lines += ["", provenance_line(doc, block), "", noise_line(_load(results / "noise.json"), doc)]
    return "\n".join(lines)


def _markers(name: str) -> tuple[str, str]:
    return f"<!-- bench:{name} -->", f"<!-- /bench:{name} -->"


def _span(text: str, name: str, page: str) -> tuple[int, int]:
    """Where the block, its markers included, starts and ends in ``text`` (the page ``page``)."""
    start, end = _markers(name)
    at = text.find(start)
    until = text.find(end, at + len(start)) if at >= 0 else -1
    if at < 0 or until < 0:
        raise TablesError(f"{page} has no {start} … {end} block")
    return at, until + len(end)


def _generated(block: Block, results: Path) -> str:
    start, end = _markers(block.name)
    return f"{start}\n{render_block(block, results)}\n{end}"


def _name(page: Path) -> str:
    """The page as messages name it: relative to the repository where it lies inside it."""
    return str(page.relative_to(ROOT)) if page.is_relative_to(ROOT) else str(page)


def render_page(text: str, results: Path = RESULTS, page: Path = PAGE) -> str:
    """``text`` (the page ``page``) with every benchmark block regenerated from ``results``."""
    for block in BLOCKS:
        begin, end = _span(text, block.name, _name(page))
        text = text[:begin] + _generated(block, results) + text[end:]
    return text


def stale_blocks(text: str, results: Path = RESULTS, page: Path = PAGE) -> list[str]:
    """The names of the blocks of ``text`` (the page ``page``) that differ from what ``results`` give."""
    stale = []
    for block in BLOCKS:
        begin, end = _span(text, block.name, _name(page))
        if text[begin:end] != _generated(block, results):
            stale.append(block.name)
    return stale


# --- README's summary -------------------------------------------------------------------

README = ROOT / "README.md"
SUMMARY = "bench-summary"
"""README's block: the headline figures of a few results, each linking its table on the page."""


ANCHORS = {
    "run_overhead": "what-a-run-costs-beyond-its-measured-time-benchrun_overheadpy",
    "pinning": "server-and-load-apart-benchpinningpy",
    "loadgen": "load-generators-benchloadgenpy",
    "demo": "the-demo-benchdemopy",
    "llm": "language-models-tritongen-beside-aiperf-benchllmpy",
}
"""The headings of docs/benchmarks.md that README's rows link (a test checks every link of README)."""


def _link(text: str, name: str) -> str:
    return f"[{text}](docs/benchmarks.md#{ANCHORS[name]})"


def _summary_overhead(doc: Document) -> str:
    modes = doc.get("modes") or {}
    kept, fresh = (modes.get(m) or {} for m in ("kept", "fresh"))
    return (
        f"{_num(kept.get('overhead_median_s'), 2)} s per run with Locust kept up across runs, "
        f"{_num(fresh.get('overhead_median_s'), 2)} s with a new Locust per run (target at most 0.3 s)"
    )


def _summary_pinning(doc: Document) -> str:
    measured = doc.get("settings_measured") or {}
    parts = []
    for label, data in measured.items():
        noise = data.get("noise") or {}
        parts.append(
            f"{label}: throughput ±{_pct(noise.get('infer_per_s_ratio_log_sd'))}, "
            f"P99 ±{_pct(noise.get('p99_us_ratio_log_sd'))}"
        )
    between = (doc.get("pinned_over_unpinned") or {}).get("infer_per_s")
    return (
        f"per-round spread of an A/A pair, {'; '.join(parts)}; pinned over not pinned: throughput "
        f"{_paired(between)}"
    )


def _summary_loadgen(doc: Document) -> str:
    generators = doc.get("generators") or {}
    kept_name = next((name for name in generators if "kept" in name), None)
    kept = (doc.get("verdict") or {}).get("kept_best") or kept_name
    cpu = paired_ratio(
        _per_round(generators.get(kept), "cpu_s_per_1000_requests"),
        _per_round(generators.get("wrk"), "cpu_s_per_1000_requests"),
    )
    vs_wrk = (generators.get(kept) or {}).get("vs_wrk")
    return f"{_ratio(vs_wrk)}× wrk's requests/s; CPU per request over wrk's {judged(cpu, 1.5, at_most=True)}"


def _summary_demo(doc: Document) -> str:
    wall = float(doc["wall_s"])
    decided = "every verdict decided" if doc.get("all_decided") else "not every verdict decided"
    return f"{wall / 60:.1f} min (target at most {float(doc['target_s']) / 60:g} min), {decided}"


def _summary_llm(doc: Document) -> str:
    figures: dict[str, Any] = doc["figures"]

    def short(label: str) -> str:
        return label.split(" (")[0].split(":")[0]

    compared = {label: entry for label, entry in figures.items() if "ratio" in entry}
    ratios = [
        f"{short(label)} " + (f"{_ratio(e['ratio'])}×" if e["ratio"] is not None else "not compared (near 0)")
        for label, e in compared.items()
    ]
    cpu, first = figures.get("cpu_s_per_1000_tokens") or {}, figures.get("first_request_s") or {}
    agree = all(entry.get("agree") for entry in figures.values() if "ratio" in entry)
    return (
        f"tritongen / AIPerf medians: {', '.join(ratios)}; {'all' if agree else 'not all'} within "
        f"{doc.get('agreement', 0.1):.0%}; CPU-s per 1000 output tokens {_num(cpu.get('tritongen'), 2)} "
        f"against {_num(cpu.get('aiperf'), 2)}; first request after {_num(first.get('tritongen'), 1)} s "
        f"against {_num(first.get('aiperf'), 1)} s"
    )


SUMMARY_ROWS: tuple[tuple[str, str, Callable[[Document], str]], ...] = (
    ("run_overhead", "what a run costs beyond its measured time", _summary_overhead),
    ("pinning", "A/A noise, server and load pinned apart or not", _summary_pinning),
    ("loadgen", "load generator against wrk", _summary_loadgen),
    ("demo", "`make demo`, once installed", _summary_demo),
    ("llm", "tritongen beside AIPerf on one vLLM server", _summary_llm),
)
"""README's rows: each result's name, what it measured, and its figures' text."""


def render_summary(results: Path = RESULTS) -> str:
    """README's block: one row per result, its headline figures and where its table is."""
    rows = ["| measured | figures |", "|---|---|"]
    for name, label, render in SUMMARY_ROWS:
        doc = _load(results / f"{name}.json")
        if doc is None:
            rows.append(f"| {name} | no committed result (bench/results/{name}.json) |")
            continue
        try:
            rows.append(f"| {_link(label, name)} | {render(doc)} |")
        except (KeyError, TypeError, ValueError) as e:
            raise TablesError(f"bench/results/{name}.json: cannot render README's row ({e})") from e
    start, end = f"<!-- {SUMMARY} -->", f"<!-- /{SUMMARY} -->"
    return "\n".join([start, *rows, "", "Generated from bench/results/ by `make bench-tables`.", end])


def render_readme(text: str, results: Path = RESULTS) -> str:
    """README's ``text`` with its summary block regenerated."""
    start, end = f"<!-- {SUMMARY} -->", f"<!-- /{SUMMARY} -->"
    at = text.find(start)
    until = text.find(end, at + len(start)) if at >= 0 else -1
    if at < 0 or until < 0:
        raise TablesError(f"README.md has no {start} … {end} block")
    return text[:at] + render_summary(results) + text[until + len(end) :]


def main(argv: list[str] | None = None) -> int:
    """Rewrite the page's benchmark blocks, or with ``--check`` report those that differ."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 when a block differs")
    parser.add_argument("--page", type=Path, default=PAGE, help="the Markdown page (docs/benchmarks.md)")
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument(
        "--readme", type=Path, help="README with its summary block (default: README.md with the default page)"
    )
    args = parser.parse_args(argv)
    readme_path = args.readme or (README if args.page == PAGE else None)
    try:
        text = args.page.read_text(encoding="utf-8")
        readme = readme_path.read_text(encoding="utf-8") if readme_path else ""
        if args.results.resolve() == RESULTS.resolve():  # the committed results name commits of this history
            check_in_history(args.results)
        if args.check:
            stale = stale_blocks(text, args.results, args.page)
            if readme_path and render_readme(readme, args.results) != readme:
                print(
                    f"README.md: {SUMMARY} differs from {args.results.name}/; run make bench-tables",
                    file=sys.stderr,
                )
                return 1
            if stale:
                names = ", ".join(f"bench:{name}" for name in stale)
                print(
                    f"{_name(args.page)}: {names} differs from what {args.results.name}/ gives; "
                    "run make bench-tables",
                    file=sys.stderr,
                )
                return 1
            return 0
        updated = render_page(text, args.results, args.page)
    except (OSError, TablesError) as e:
        print(f"bench/tables.py: {e}", file=sys.stderr)
        return 1
    if updated != text:
        args.page.write_text(updated, encoding="utf-8")
        print(f"updated {_name(args.page)}")
    summary = render_readme(readme, args.results) if readme_path else readme
    if readme_path and summary != readme:
        readme_path.write_text(summary, encoding="utf-8")
        print(f"updated {_name(readme_path)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
