"""A run's result from its measured windows: throughput, latency, the server's figures, its kind's own.

The measured windows are merged (one histogram, one set of counters); the server's figures
come from its counters at the span's edges (:mod:`.server_counters`) and its metrics endpoint
(:class:`~tritongen.metrics.prometheus.MetricsSampler`); an open loop adds its schedule, a
sampled machine its other processes' CPU, and the load's kind its own figures.
"""

from __future__ import annotations

from typing import Any

from tritongen.io.loadgen_shared import (
    ARRIVAL_GAPS,
    CLIENT_SPLIT,
    KERNEL_LATENCY,
    client_overhead,
    histogram_moments,
)
from tritongen.loadtest.arrivals import achieved_cv, cv_warning
from tritongen.loadtest.failures import first_messages
from tritongen.loadtest.kinds.base import RunView
from tritongen.loadtest.model_run import ModelRun, judge_stability
from tritongen.loadtest.result import RunResult
from tritongen.loadtest.server_counters import ServerCounters
from tritongen.loadtest.spec import LoadSpec
from tritongen.loadtest.timeslices import schedule_fidelity, stage_figures, timeslice_figures
from tritongen.loadtest.windows import Window, extra_summaries, latency_summary, merge, window_latency
from tritongen.metrics.other_cpu import OtherCpu
from tritongen.metrics.prometheus import MetricsSampler

LATE_FRACTION_WARNING = 0.01


def run_result(
    run: ModelRun,
    measured: list[Window],
    start: int | None,
    t0: float,
    outcome: tuple[str, str | None],
    counters: ServerCounters | None,
) -> RunResult:
    """The result of ``run`` over ``measured``, the windows from ``start`` on the grid of ``t0``.

    ``outcome``: how the level ended, and why. The result holds the run's figures and its
    kind's; ``counters`` (None: the server has no statistics API) give the server's.
    """
    spec, window_s, rows = run.spec, run.window_s, run.test.requests.rows
    status, reason = outcome
    elapsed = len(measured) * window_s
    total = merge(measured) if measured else Window(0)
    start_index = start if start is not None else 0
    end_index = start_index + len(measured)
    server = counters.breakdown(spec.model, start_index, end_index) if counters and measured else None
    span = (t0 + start_index * window_s, t0 + end_index * window_s)
    qps = total.ok / elapsed if elapsed else 0.0
    result = RunResult(
        mode=spec.mode,
        concurrency=int(run.level) if spec.mode == "concurrency" else None,
        target_rate=run.level if spec.mode == "rate" else None,
        batch_size=run.test.requests.rows,
        duration_s=elapsed,
        requests=total.ok + total.error_count,
        errors=total.error_count,
        errors_by_kind=dict(sorted(total.errors.items())),
        error_messages=first_messages(run.watch.log.windows),
        qps=qps,
        infer_per_s=qps
        * (spec.shape.rows_per_request(rows, run.test.requests.interface.batched) if spec.shape else rows),
        latency_us=latency_summary(total.histogram) if total.ok else None,
        latencies_us=extra_summaries(total),
        counts=dict(sorted(total.counts.items())),
        server_us=server.server_us() if server else None,
        avg_batch=server.avg_batch if server else None,
        server_models=counters.models(spec.model, start_index, end_index) if counters and measured else {},
        stable=judge_stability(spec, measured, window_s)[0],
        client_us=client_split(total),
        client_overhead_us=client_overhead(total.histogram, total.extra.get(KERNEL_LATENCY)),
        latency_stddev_us=histogram_moments(total.histogram)[1] if total.ok else None,
        stability_latency_us=window_latency(total, spec.stability_percentile),
        gpu=_gpu_figures(run.test.sampler, span),
        cpu=_as_dict(run.test.sampler.summary("cpu", *span)),
        status=status,
        reason=reason,
        processes=run.processes,
        round=run.round,
        windows=[
            {"index": w.index, "qps": w.ok / window_s, "p99_us": w.p99_us(), "errors": w.error_count}
            for w in measured
        ],
    )
    _add_slices(result, spec, measured, window_s)
    _add_figures(run, result, total, span)
    return result


def _add_slices(result: RunResult, spec: LoadSpec, measured: list[Window], window_s: float) -> None:
    """The run's figures per ``--timeslice`` and per stage of its shape, where asked."""
    if spec.timeslice_s is not None:
        result.timeslices = timeslice_figures(measured, window_s, spec.timeslice_s)
    if spec.shape is not None:
        result.stages = stage_figures(measured, window_s, spec.shape.stages())


def _gpu_figures(sampler: MetricsSampler, span: tuple[float, float]) -> dict[str, Any] | None:
    """The GPU summary of the span, with each GPU the metrics endpoint reported (``by_uuid``)."""
    figures = _as_dict(sampler.summary("gpu", *span))
    by_uuid = sampler.gpu_devices(*span)
    if figures is not None and by_uuid:
        figures["by_uuid"] = by_uuid
    return figures


def _add_figures(run: ModelRun, result: RunResult, total: Window, span: tuple[float, float]) -> None:
    """What an open loop, a sampled machine and the load's kind add to a result; the stability warning."""
    if run.spec.mode == "rate":
        _add_schedule_figures(result, total, run.level, run.spec)
        if run.spec.shape is None:  # a shape's rate changes: its gaps' CV is no arrival process's
            _add_arrival_figures(result, total, run.spec)
    if run.other_cpu is not None:
        _add_other_cpu(result, run.other_cpu.summary(*span), run.spec.other_cpu_limit)
    run.test.kind.add_figures(result, RunView(run.users(), span, run.test.sampler))
    shaped = run.spec.shape is not None  # a ramp, stages, a trace: its load changes on purpose
    if (
        result.status == "ok" and not result.stable and total.ok and not shaped
    ):  # nothing succeeded: errors say
        result.warnings.append(
            f"not stable: the last {3} windows differ by more than 10% in throughput or P99 "
            f"after {result.duration_s:.0f} s (raise --max-duration or reduce noise)"
        )


def client_split(total: Window) -> dict[str, float] | None:
    """The mean send, wait and receive µs of the successful requests, where the transport timed them."""
    sums = [total.counts.get(name) for name in CLIENT_SPLIT]
    if not total.ok or any(value is None for value in sums):
        return None
    return {
        key: float(value or 0) / total.ok for key, value in zip(("send", "wait", "recv"), sums, strict=True)
    }


def _as_dict(summary: Any) -> dict[str, Any] | None:
    return summary.as_dict() if summary is not None else None


def _add_other_cpu(result: RunResult, other: OtherCpu | None, limit: float) -> None:
    """Other processes' CPU during the measured time, and the flag and warning when it was above ``limit``."""
    if other is None:
        return
    result.other_cpu, result.other_cpu_max = round(other.mean, 3), round(other.max, 3)
    result.busy = other.mean > limit or other.max > limit
    if result.busy:
        result.warnings.append(
            f"other processes used {other.mean:.2f} cores on average (up to {other.max:.2f} in one second) "
            f"during this run, above {limit:g}: the machine was busy and the figures may be disturbed"
        )


def _add_schedule_figures(result: RunResult, total: Window, target: float, spec: LoadSpec) -> None:
    """An open-loop run's schedule: the rate achieved, how late its sends left, held-back sends, warnings."""
    result.achieved_rate = total.sent / result.duration_s if result.duration_s else 0.0
    result.schedule = schedule_fidelity(total, spec.shape.describe() if spec.shape else None)
    result.late_sends = total.late
    result.max_send_lag_us = total.max_lag_us
    result.held_back_sends = total.held_back
    result.max_hold_us = total.max_hold_us
    result.warnings += _schedule_warnings(result, target)


def _add_arrival_figures(result: RunResult, total: Window, spec: LoadSpec) -> None:
    """The CV of the gaps between sends achieved, and a warning when it drifted from the one asked."""
    result.arrival_cv = achieved_cv(total.counts)
    warning = cv_warning(
        spec.arrival, spec.arrival_cv, result.arrival_cv, total.counts.get(ARRIVAL_GAPS[0], 0)
    )
    if warning is not None:
        result.warnings.append(warning)


def _schedule_warnings(result: RunResult, target: float) -> list[str]:
    warnings = []
    achieved = result.achieved_rate or 0.0
    if achieved < 0.95 * target:
        warnings.append(
            f"the generator sent {achieved:.0f}/s of the {target:g}/s asked: it could not keep the schedule "
            "(use more --processes); latency still counts from the scheduled times"
        )
    sent = max(1, result.requests)
    fidelity = result.schedule or {}
    if fidelity.get("kept") is False:
        warnings.append(
            "the generator did not keep the schedule: its sends left "
            f"{fidelity['lateness_us']['p99'] / 1000:.1f} ms late at P99 (over 10 ms): the load was "
            "shaped by the generator, not the schedule (a busy machine?)"
        )
    elif result.late_sends > LATE_FRACTION_WARNING * sent:
        warnings.append(
            f"{result.late_sends} requests left more than 1 ms late "
            f"(max {result.max_send_lag_us / 1000:.1f} ms): "
            "the generator is near its limit"
        )
    if result.held_back_sends:
        warnings.append(
            f"{result.held_back_sends} sends were held back: the requests in flight had reached the "
            f"in-flight cap, so they went out when one finished, up to {result.max_hold_us / 1000:.0f} ms "
            "late (the server stalled or is slower than the rate asked); their latency counts from "
            "the scheduled times"
        )
    return warnings
