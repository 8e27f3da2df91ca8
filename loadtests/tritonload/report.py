"""The run's final report: merged figures with the server's own, as lines, JSON and a results line.

At the end of a test the master (or a lone local runner) prints the merged figures with the
server's (statistics API: queue and compute time, batch size) and its CPU and GPU utilisation
(:mod:`.utilisation`), writes them as a ``tritongen.loadtest/1`` document (``--triton-json``,
what ``tritongen report`` renders) and appends them to ``--triton-results`` as one ``summary``
line. :class:`~.master.MasterReport` decides when; this module makes the figures and the text.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import tempfile
from dataclasses import dataclass
from typing import Any

from .arrivals import gaps_cv
from .options import TritonOptions
from .payloads import batch_rows, read_steps
from .recording import Collector
from .request_data import split_step
from .shared import (
    CONFIDENCE,
    KERNEL_LATENCY,
    LATENCY_KEYS,
    SCHEMA,
    SERVER_KEYS,
    client_overhead,
    histogram_moments,
    is_stable_figures,
    latency_figures,
    token_source,
)


def say(line: str) -> None:
    """Print one line of the master's."""
    print(f"tritongen: {line}", flush=True)


def stats_counters(entries: list[dict[str, Any]]) -> dict[str, int]:
    """Cumulative counters over the model's versions: inferences, executions, and ns and count per phase."""
    counters: dict[str, int] = {}

    def add(key: str, value: Any) -> None:
        counters[key] = counters.get(key, 0) + int(value or 0)

    for entry in entries:
        add("inferences", entry.get("inference_count"))
        add("executions", entry.get("execution_count"))
        for phase in SERVER_KEYS:
            figures = entry.get("inference_stats", {}).get(phase, {})
            add(f"{phase}_ns", figures.get("ns"))
            add(f"{phase}_count", figures.get("count"))
    return counters


def server_breakdown(
    before: dict[str, int], after: dict[str, int]
) -> tuple[dict[str, float | None], float | None]:
    """µs per request in each phase and the mean batch between two snapshots (as the package's)."""

    def delta(key: str) -> int:
        return after.get(key, 0) - before.get(key, 0)

    server_us = {
        phase: delta(f"{phase}_ns") / delta(f"{phase}_count") / 1000 if delta(f"{phase}_count") > 0 else None
        for phase in SERVER_KEYS
    }
    executions = delta("executions")
    return server_us, (max(1.0, delta("inferences") / executions) if executions > 0 else None)


def is_stable(windows: list[dict[str, float | None]]) -> bool:
    """The last complete windows agree within 10% on throughput and on P99 (the package's rule)."""
    return is_stable_figures([float(w["qps"] or 0.0) for w in windows], [w["p99_us"] for w in windows])


def one_round(value: float) -> dict[str, Any]:
    """A figure measured once, as a level summary holds it (no interval)."""
    return {
        "median": value,
        "ci_low": None,
        "ci_high": None,
        "cv": None,
        "mean": value,
        "rounds": 1,
        "confidence": CONFIDENCE,
        "values": [value],
    }


def level_of(run: dict[str, Any]) -> dict[str, Any]:
    """The document's ``levels`` entry of its one run."""
    ok = run["status"] == "ok"
    latency = run["latency_us"] if ok and run["latency_us"] else {}
    concurrency = run["mode"] == "concurrency"
    return {
        "mode": run["mode"],
        "concurrency" if concurrency else "target_rate": run["concurrency" if concurrency else "target_rate"],
        "rounds": 1 if ok else 0,
        "infer_per_s": one_round(run["infer_per_s"]) if ok else None,
        "qps": one_round(run["qps"]) if ok else None,
        "latency_us": {k: one_round(v) for k, v in latency.items() if k != "max"},
    }


@dataclass(frozen=True)
class ServerFigures:
    """What the report adds from the server: the statistics API and the metrics endpoint."""

    server_us: dict[str, float | None] | None
    avg_batch: float | None
    cpu: dict[str, Any] | None
    gpu: dict[str, Any] | None
    rows: int
    """Rows per request (the batch dim where the model batches, else 1)."""


def request_rows(options: TritonOptions, max_batch: int | None) -> int:
    """Rows per request: the request data's batch dim (or ``--triton-batch-size``) where the model batches."""
    if max_batch == 0:
        return 1
    if options.inputs:
        try:
            first = split_step(read_steps(options.inputs, "--triton-inputs")[0])[0]
            return batch_rows(first, max_batch or 1)
        except Exception:  # a master without the workers' data: the option's value
            return options.batch_size
    return options.batch_size


def worker_figures(collector: Collector) -> dict[str, dict[str, Any]]:
    """Each worker's part: ``requests``, ``errors``, ``ok``, ``lost``, ``lost_at_s``, ``histogram``."""
    figures: dict[str, dict[str, Any]] = {}
    for worker, part in sorted(collector.parts.items()):
        lost_at = collector.lost.get(worker)
        figures[worker] = {
            "requests": part.ok + part.errors,
            "errors": part.errors,
            "ok": part.ok,
            "lost": lost_at is not None,
            "lost_at_s": None if lost_at is None else round(lost_at - collector.started_at, 3),
            "histogram": base64.b64encode(part.hist.encode()).decode() if part.ok else "",
        }
    return figures


def run_result(
    collector: Collector, options: TritonOptions, users: int, server: ServerFigures
) -> dict[str, Any]:
    """The run as the package's ``RunResult`` holds it (every field)."""
    duration = max(collector.end() - collector.began(), 1e-6)
    ok, failed = collector.total.get_total_count(), sum(collector.errors.values())
    qps = ok / duration
    status, reason = _status(collector, ok + failed)
    rate = options.user_rate > 0
    windows = [collector.kept[index] for index in sorted(collector.kept)]
    complete = [w for w in windows[1:] if int(w["index"] or 0) not in collector.partial]
    return {
        "mode": "rate" if rate else "concurrency",
        "concurrency": None if rate else users,
        "target_rate": options.user_rate * users if rate else None,
        "batch_size": server.rows,
        "duration_s": round(duration, 3),
        "requests": ok + failed,
        "errors": failed,
        "errors_by_kind": dict(sorted(collector.errors.items())),
        "error_messages": {
            kind: collector.messages[kind] for kind in sorted(collector.errors) if kind in collector.messages
        },
        "qps": qps,
        "infer_per_s": qps * server.rows,
        "latency_us": latency_figures(collector.total) if ok else None,
        "server_us": server.server_us,
        "avg_batch": server.avg_batch,
        "stable": is_stable(complete),
        "gpu": server.gpu,
        "cpu": server.cpu,
        "status": status,
        "reason": reason,
        "processes": max(1, len(collector.parts)),
        "achieved_rate": collector.sent / duration if rate else None,
        "arrival_cv": gaps_cv(collector.counts) if rate else None,
        "late_sends": collector.late,
        "max_send_lag_us": collector.max_lag_us,
        "held_back_sends": collector.held_back,
        "max_hold_us": collector.max_hold_us,
        "warnings": [],
        "windows": windows,
        "round": 1,
        **_further_figures(collector, options, duration, users, ok),
    }


def _status(collector: Collector, requests: int) -> tuple[str, str | None]:
    """How the run ended: ``ok``, ``aborted`` (no request) or ``interrupted``, and why."""
    if collector.interrupted:
        return "interrupted", "told to quit while the test ran"
    return ("ok", None) if requests else ("aborted", "no requests")


def _further_figures(
    collector: Collector, options: TritonOptions, duration: float, users: int, ok: int
) -> dict[str, Any]:
    """The rest of a ``RunResult``: further latencies and counts, a kind's figures, the workers' parts."""
    return {
        "models": {},
        "server_models": {},
        "latencies_us": {
            k: latency_figures(h) for k, h in sorted(collector.extra.items()) if h.get_total_count()
        },
        "counts": dict(sorted(collector.counts.items())),
        "streaming": bool(options.streaming),
        "responses_per_s": None,
        "responses_per_request": None,
        "sequences_per_s": None,
        "requests_per_sequence": None,
        "other_cpu": None,
        "other_cpu_max": None,
        "busy": False,
        "client_us": None,
        "client_overhead_us": client_overhead(collector.total, collector.extra.get(KERNEL_LATENCY)),
        "latency_stddev_us": histogram_moments(collector.total)[1] if ok else None,
        "stability_latency_us": float(collector.total.get_value_at_percentile(99.0)) if ok else None,
        "validation": collector.validation(),
        **llm_figures(collector, duration, users, ok),
        "llm_server": None,  # vLLM's figures: tritongen samples them, this report does not
        "server_trace": None,  # the server's trace: tritongen joins it, this report does not
        "wire": None,  # loadtest --wire: tritongen captures the wire and checks it, this report does not
        "timeslices": [],  # --timeslice: tritongen slices the windows it reads, this report does not
        "schedule": None,  # how late the sends left: tritongen reads it from the windows (send_lag is above)
        "stages": [],  # a shape's stages: tritongen lays out the schedule and slices it, this report does not
        "workers": worker_figures(collector),
    }


def llm_figures(collector: Collector, duration: float, users: int, ok: int) -> dict[str, Any]:
    """An LLM load's token figures, as the package derives them (None for other loads)."""
    counts, extra = collector.counts, collector.extra
    llm = "output_tokens" in counts
    tokens_per_s = counts.get("output_tokens", 0) / duration if llm else None
    usage, counted = counts.get("usage_counted", 0), counts.get("tokenizer_counted", 0)

    def figures(name: str) -> dict[str, Any] | None:
        hist = extra.get(name)
        return latency_figures(hist) if hist is not None and hist.get_total_count() else None

    return {
        "ttft_us": figures("ttft"),
        "itl_us": figures("itl"),
        "tpot_us": figures("tpot"),
        "e2e_us": latency_figures(collector.total) if llm and ok else None,
        "output_tokens_per_s": tokens_per_s,
        "output_tokens_per_s_per_user": tokens_per_s / users if tokens_per_s is not None and users else None,
        "goodput_per_s": counts.get("slo_met", 0) / duration if llm else None,
        "output_token_source": token_source(usage, counted, ok) if llm else None,
    }


def report_document(options: TritonOptions, url: str, run: dict[str, Any]) -> dict[str, Any]:
    """The ``tritongen.loadtest/1`` document of one run (``tritongen report`` renders it)."""
    import platform

    return {
        "schema": SCHEMA,
        "tritongen_version": None,
        "written_by": "locustfile",
        "model": options.model,
        "protocol": options.protocol,
        "url": url,
        "status": run["status"],
        "rounds": 1,
        "confidence": CONFIDENCE,
        "shared_memory": options.shared_memory,
        "host": {"machine": platform.machine(), "python": platform.python_version()},
        "runs": [run],
        "levels": [level_of(run)],
    }


def figures_text(figures: dict[str, Any] | None) -> str:
    """CPU or GPU utilisation and peak memory in words."""
    if figures is None:
        return "no figures"
    parts = []
    if figures["util_mean"] is not None:
        parts.append(f"util mean {figures['util_mean'] * 100:.1f} %, max {figures['util_max'] * 100:.1f} %")
    if figures["mem_max_bytes"] is not None:
        parts.append(f"memory peak {figures['mem_max_bytes'] / 2**30:.2f} GiB")
    return "; ".join(parts)


def report_lines(run: dict[str, Any], options: TritonOptions, url: str) -> list[str]:
    """The report's lines after the summary line."""
    load = (
        f"concurrency {run['concurrency']}"
        if run["mode"] == "concurrency"
        else f"{run['target_rate']:g} req/s"
    )
    errors = ", ".join(f"{kind} {n}" for kind, n in run["errors_by_kind"].items())
    lines = [
        f"tritongen report: {options.model} at {url} ({options.protocol}), {load}, "
        f"batch {run['batch_size']}, {run['duration_s']:.1f} s, {len(run['workers'])} worker(s)",
        f"  requests    {run['requests']} (ok {run['requests'] - run['errors']}, errors {run['errors']}"
        + (f": {errors})" if errors else ")"),
        f"  throughput  {run['qps']:.1f} successful req/s, {run['infer_per_s']:.1f} inferences/s",
    ]
    latency = run["latency_us"]
    names = {"p999": "p99.9"}
    lines.append(
        "  latency µs  " + "  ".join(f"{names.get(k, k)} {latency[k]:.0f}" for k in LATENCY_KEYS)
        if latency
        else "  latency µs  no successful request"
    )
    server = run["server_us"]
    if server is None:
        lines.append("  server µs   no statistics")
    else:
        phases = "  ".join(
            f"{phase.replace('_', ' ')} " + ("-" if server[phase] is None else f"{server[phase]:.1f}")
            for phase in SERVER_KEYS
        )
        batch = "-" if run["avg_batch"] is None else f"{run['avg_batch']:.2f}"
        lines.append(f"  server µs   {phases}; avg batch {batch}")
    lines.append(f"  cpu         {figures_text(run['cpu'])}")
    lines.append(f"  gpu         {figures_text(run['gpu'])}")
    parts = ", ".join(f"{worker} {part['requests']}" for worker, part in run["workers"].items())
    lines.append(f"  workers     {parts or 'none'}")
    lines.append(f"  stable      {'yes' if run['stable'] else 'no'} (the last 3 complete windows within 10%)")
    return lines


def write_document(path: str, document: dict[str, Any]) -> None:
    """Write ``--triton-json`` whole or not at all; a failure is one line."""
    temp = ""
    try:
        handle, temp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)), prefix=".tritongen-")
        with os.fdopen(handle, "w") as out:
            out.write(json.dumps(document, indent=2) + "\n")
        os.replace(temp, path)
    except OSError as e:
        say(f"cannot write --triton-json {path}: {e.strerror or e}")
        if temp:
            with contextlib.suppress(OSError):
                os.unlink(temp)
        return
    say(f"wrote {path}")
