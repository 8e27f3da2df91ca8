"""The console report in perf_analyzer's words: its settings block, a block per level, the closing lines.

Latencies are whole microseconds as perf_analyzer prints them. Plain HTTP requests are timed
in parts (writing the request, waiting for the response, reading it); where the transport times
a request only whole (gRPC, streams, shared memory), the HTTP or gRPC time line says so instead
of printing zeros as figures.
"""

from __future__ import annotations

from typing import Any

from tritongen.loadtest.result import RunResult
from tritongen.loadtest.validation import validation_lines
from tritongen.perfanalyzer.options import PaOptions
from tritongen.perfanalyzer.sweep import ModelFacts, Sweep

PERCENTILES = (("p50", 50), ("p90", 90), ("p95", 95), ("p99", 99))


def settings_lines(options: PaOptions, facts: ModelFacts) -> list[str]:
    """``*** Measurement Settings ***`` and what the sweep will do."""
    mode = "count_windows" if options.count_windows else "time_windows"
    lines = ["*** Measurement Settings ***", f"  Batch size: {options.batch_size}", "  Service Kind: TRITON"]
    lines.append(f'  Using "{mode}" mode for stabilization')
    latency = "average latency" if options.percentile is None else f"p{options.percentile} latency"
    lines.append(f"  Stabilizing using {latency} and throughput (within {options.stability_percentage:g}%)")
    if options.count_windows:
        lines.append(f"  Minimum number of samples in each window: {options.request_count}")
    else:
        lines.append(f"  Measurement window: {options.measurement_ms} msec")
    levels = options.levels()
    if len(levels) > 1:
        lines.append(f"  Latency limit: {options.latency_threshold_ms:g} msec")
        limit = "concurrent requests" if options.mode == "concurrency" else "requests per seconds"
        end = options.request_rate or options.concurrency
        if end is not None and end.end:
            what = "Concurrency" if options.mode == "concurrency" else "Request Rate"
            lines.append(f"  {what} limit: {end.end:g} {limit}")
    lines += _search_lines(options)
    if options.mode == "rate":
        kind = "poisson" if options.distribution == "poisson" else "uniform"
        lines.append(f"  Using {kind} distribution on request generation")
        lines.append(
            f"  Using {'asynchronous' if options.asynchronous else 'synchronous'} calls for inference"
        )
        if not options.asynchronous:
            lines.append(
                f"  Max threads: {options.max_threads} (at most {options.max_threads} requests in flight)"
            )
    if facts.decoupled:
        lines.append("  Detected decoupled model, using the final response for measuring latency")
    if facts.sequence:
        lines.append("  Detected sequence model: each concurrent request is one sequence in flight")
    return [*lines, ""]


def _search_lines(options: PaOptions) -> list[str]:
    """``--binary-search``: what is searched, and for what."""
    chosen = options.request_rate or options.concurrency
    if not options.binary_search or chosen is None:
        return []
    what = "concurrency" if options.mode == "concurrency" else "request rate"
    return [
        f"  Using binary search on {what} from {chosen.start:g} to {chosen.end:g} "
        f"(precision {chosen.step:g}) for the highest within {options.latency_threshold_ms:g} msec"
    ]


def level_lines(run: RunResult, options: PaOptions) -> list[str]:
    """One level: its ``Client:`` and ``Server:`` blocks (and each window with ``-v``)."""
    head = (
        f"Request concurrency: {run.concurrency}"
        if run.mode == "concurrency"
        else f"Request Rate: {run.target_rate:g} inference requests per seconds"
    )
    lines = [head]
    if options.verbose:
        lines += [
            f"  Pass [{i + 1}] throughput: {_num(w.get('qps'))} requests/sec. "
            f"p99 latency: {_us(w.get('p99_us'))} usec"
            for i, w in enumerate(run.windows)
        ]
    lines += _client_lines(run, options)
    lines += _server_lines(run, options.model)
    return lines + [f"  {line}" for line in validation_lines(run.validation)]


def level_text(run: RunResult) -> str:
    """A level as perf_analyzer names it: ``concurrency 8`` or ``request rate 500``."""
    return (
        f"concurrency {run.concurrency}" if run.mode == "concurrency" else f"request rate {run.target_rate:g}"
    )


def unstable_line(run: RunResult, options: PaOptions) -> str:
    """perf_analyzer's line (on stderr) for a level that did not stabilise."""
    level = level_text(run)
    windows = f"{options.max_trials} measurement windows"
    return (
        f"Failed to obtain stable measurement within {windows} for {level}. "
        "Please try to increase the --measurement-interval."
    )


def _client_lines(run: RunResult, options: PaOptions) -> list[str]:
    latency = run.latency_us or {}
    lines = [
        "  Client: ",
        f"    Request count: {run.requests}",
        f"    Throughput: {_num(run.infer_per_s)} infer/sec",
        f"    Avg latency: {_us(latency.get('mean'))} usec "
        f"(standard deviation {_us(run.latency_stddev_us)} usec)",
    ]
    lines += [f"    {name} latency: {_us(latency.get(name))} usec" for name, _ in PERCENTILES]
    if options.percentile is not None and options.percentile not in dict(PERCENTILES).values():
        lines.append(f"    p{options.percentile} latency: {_us(run.stability_latency_us)} usec")
    if run.errors:
        lines.append(f"    Failed requests: {run.errors} {dict(sorted(run.errors_by_kind.items()))}")
    protocol = "gRPC" if options.protocol == "grpc" else "HTTP"
    split = run.client_us
    if split is None:
        lines.append(
            f"    Avg {protocol} time: {_us(latency.get('mean'))} usec (send, wait and receive together: "
            "the load generator times these requests whole)"
        )
    else:
        ends = split["send"] + split["recv"]
        lines.append(
            f"    Avg {protocol} time: {_us(ends + split['wait'])} usec (send/recv {_us(ends)} usec "
            f"+ response wait {_us(split['wait'])} usec)"
        )
    return lines


def _server_lines(run: RunResult, model: str) -> list[str]:
    figures = run.server_model_figures().get(model)
    if figures is None:
        return ["  Server: ", "    not available (the statistics API gave no figures for the measured time)"]
    queue = float(figures.queue_us or 0.0)
    parts = [
        float(figures.phase_us(phase) or 0.0)
        for phase in ("compute_input", "compute_infer", "compute_output")
    ]
    request = figures.request_us
    overhead = max(0.0, float(request) - queue - sum(parts)) if request is not None else None
    return [
        "  Server: ",
        f"    Inference count: {figures.inferences}",
        f"    Execution count: {figures.executions}",
        f"    Successful request count: {figures.requests}",
        f"    Avg request latency: {_us(request)} usec (overhead {_us(overhead)} usec "
        f"+ queue {_us(queue)} usec "
        f"+ compute input {_us(parts[0])} usec + compute infer {_us(parts[1])} usec + compute output "
        f"{_us(parts[2])} usec)",
    ]


def summary_lines(sweep: Sweep) -> list[str]:
    """``Inferences/Second vs. Client Average Batch Latency`` and a line per level."""
    options = sweep.options
    latency = "Average" if options.percentile is None else f"p{options.percentile}"
    lines = [f"Inferences/Second vs. Client {latency} Batch Latency"]
    for run in sweep.report.runs:
        level = (
            f"Concurrency: {run.concurrency}"
            if run.mode == "concurrency"
            else f"Request Rate: {run.target_rate:g}"
        )
        lines.append(
            f"{level}, throughput: {_num(run.infer_per_s)} infer/sec, "
            f"latency {_us(run.stability_latency_us)} usec"
        )
    return lines + _found_lines(sweep)


def _found_lines(sweep: Sweep) -> list[str]:
    """``--binary-search``: the highest level found within the limit."""
    options = sweep.options
    if not options.binary_search or sweep.report.status != "ok":
        return []
    what = "concurrency" if options.mode == "concurrency" else "request rate"
    limit = f"{options.latency_threshold_ms:g} msec"
    if sweep.best is None:
        return [f"Binary search: no {what} in the range is within {limit}"]
    return [f"Binary search: the highest {what} within {limit} is {sweep.best:g}"]


def threshold_line(sweep: Sweep) -> str | None:
    """perf_analyzer's line (on stderr) when a level went over ``-l``."""
    if sweep.over_threshold is None:
        return None
    return f"Measured latency went over the set limit of {sweep.options.latency_threshold_ms:g} msec."


def _us(value: Any) -> str:
    return "–" if value is None else str(int(float(value)))


def _num(value: Any) -> str:
    return "–" if value is None else f"{float(value):.6g}"
