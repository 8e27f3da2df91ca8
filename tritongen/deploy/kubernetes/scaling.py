"""The autoscaling signal: what Triton's own counters say about a replica's backlog, in PromQL.

Two signals, both derived from Triton's cumulative counters on its metrics port and both 0
when a replica is idle (so that scale-down follows once the load stops):

- ``queue-time``: the average time a request waited in the scheduler's queue over the
  window, in µs (``nv_inference_queue_duration_us`` over ``nv_inference_request_success``);
- ``queue-ratio``: queue time over compute time (``nv_inference_queue_duration_us`` over
  ``nv_inference_compute_infer_duration_us``): how many "requests' worth" of work is waiting.

The same expression feeds prometheus-adapter's rule (a Pods metric for an ``autoscaling/v2``
HPA), KEDA's Prometheus trigger and the test that checks the signal against a real
Prometheus scraping the embedded server.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass
from typing import Any

from tritongen.errors import ConfigError

# A rate below this (per second) counts as idle: the ratio is then 0 rather than 0/0.
_IDLE_RATE = 1e-6
_WINDOW = re.compile(r"^(\d+(ms|s|m|h))+$")


@dataclass(frozen=True)
class ScalingSignal:
    """One scaling signal: its PromQL parts, the metric name it is served as, and its unit."""

    name: str
    metric: str
    numerator: str
    denominator: str
    unit: str
    default_target: float
    description: str
    gauges: tuple[str, ...] = ()
    """A gauge signal's series (``name{labels}``), the first present taken; empty: a ratio of rates."""


SIGNALS: dict[str, ScalingSignal] = {
    "queue-time": ScalingSignal(
        name="queue-time",
        metric="tritongen_queue_time_per_request_us",
        numerator="nv_inference_queue_duration_us",
        denominator="nv_inference_request_success",
        unit="µs",
        default_target=10_000.0,
        description="average queue time per request (µs)",
    ),
    "queue-ratio": ScalingSignal(
        name="queue-ratio",
        metric="tritongen_queue_to_compute_ratio",
        numerator="nv_inference_queue_duration_us",
        denominator="nv_inference_compute_infer_duration_us",
        unit="",
        default_target=1.0,
        description="queue time over compute time",
    ),
}


def signal_for(name: str) -> ScalingSignal:
    """The signal called ``name``.

    Raises:
        ConfigError: no such signal.
    """
    try:
        return SIGNALS[name]
    except KeyError:
        raise ConfigError(f"unknown scaling signal {name!r}", f"use one of: {', '.join(SIGNALS)}") from None


def duration_seconds(text: str, option: str) -> float:
    """A Prometheus duration (``15s``, ``1m``, ``1m30s``) in seconds.

    Raises:
        ConfigError: not a Prometheus duration, or zero.
    """
    if not _WINDOW.match(text):
        raise ConfigError(f"{option} {text!r} is not a Prometheus duration", "write e.g. 15s, 1m or 2m")
    seconds = 0.0
    for amount, unit in re.findall(r"(\d+)(ms|s|m|h)", text):
        seconds += int(amount) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[unit]
    if seconds <= 0:
        raise ConfigError(f"{option} {text} is zero", "write e.g. 15s, 1m or 2m")
    return seconds


def check_window(text: str, scrape_s: float, scrape_text: str) -> str:
    """Check the rate window against the scrape interval and return it.

    A rate needs two samples in its window: over a shorter window the signal vanishes
    between scrapes and the autoscaler sees no value.

    Raises:
        ConfigError: not a Prometheus duration, or shorter than two scrape intervals.
    """
    seconds = duration_seconds(text, "--scale-window")
    if seconds < 2 * scrape_s:
        raise ConfigError(
            f"--scale-window {text} holds fewer than two scrapes (--scrape-interval {scrape_text}), "
            "so the rate would vanish between scrapes",
            f"use at least {_duration_text(2 * scrape_s)}; Prometheus advises 4 x the scrape interval "
            f"({_duration_text(4 * scrape_s)})",
        )
    return text


def _duration_text(seconds: float) -> str:
    return f"{seconds:g}s" if seconds < 60 or seconds % 60 else f"{seconds / 60:g}m"


def signal_expression(signal: ScalingSignal, selector: str, window: str, by: str | None = None) -> str:
    """PromQL for ``signal`` over the series matching ``selector``, summed over models.

    With ``by`` the sums keep those labels (one value per pod for the adapter); without it,
    the value is the request-weighted average over every selected pod.
    """
    group = f" by ({by})" if by else ""
    if signal.gauges:  # per pod its sum; over the pods their average
        parts = [f"{'sum' if by else 'avg'}{group}({_with_selector(g, selector)})" for g in signal.gauges]
        return parts[0] if len(parts) == 1 else " or ".join(f"({part})" for part in parts)

    def rate(series: str) -> str:
        return f"sum{group}(rate({series}{{{selector}}}[{window}]))"

    return f"{rate(signal.numerator)} / clamp_min({rate(signal.denominator)}, {_IDLE_RATE:g})"


def _with_selector(series: str, selector: str) -> str:
    """``name{labels}`` with the selector's matchers added to its own."""
    name, _, labels = series.partition("{")
    matchers = ",".join(part for part in (labels.rstrip("}"), selector) if part)
    return f"{name}{{{matchers}}}"


def adapter_rules(signal: ScalingSignal, window: str) -> dict[str, Any]:
    """prometheus-adapter configuration serving ``signal`` as a Pods metric named ``signal.metric``."""
    series = signal.gauges[0].partition("{")[0] if signal.gauges else signal.numerator
    return {
        "rules": [
            {
                "seriesQuery": f'{series}{{namespace!="",pod!=""}}',
                "resources": {
                    "overrides": {"namespace": {"resource": "namespace"}, "pod": {"resource": "pod"}}
                },
                "name": {"matches": f"^{series}$", "as": signal.metric},
                "metricsQuery": signal_expression(signal, "<<.LabelMatchers>>", window, by="<<.GroupBy>>"),
            }
        ]
    }


def adapter_query(rule: dict[str, Any], label_matchers: str, group_by: str) -> str:
    """The query prometheus-adapter sends for ``rule``: its template with the matchers filled in."""
    query = str(rule["metricsQuery"])
    return query.replace("<<.LabelMatchers>>", label_matchers).replace("<<.GroupBy>>", group_by)


def keda_query(signal: ScalingSignal, selector: str, window: str) -> str:
    """The query of KEDA's Prometheus trigger: one value, the average over the selected pods.

    The ScaledObject uses ``metricType: Value``: desired replicas = current × value / target.
    """
    return signal_expression(signal, selector, window)


def quantity(value: float) -> str:
    """A Kubernetes quantity for a target value (above 0): whole units from 100 up, else milli-units."""
    if value >= 100 or (value >= 1 and float(value).is_integer()):
        return str(round(value))
    milli = max(1, round(value * 1000))
    return f"{milli}m"


@dataclass(frozen=True)
class ScalingTarget:
    """The value the autoscaler holds each replica at, and where it came from (one line)."""

    value: float
    source: str


def scaling_target(signal: ScalingSignal, tune_doc: dict[str, Any] | None) -> ScalingTarget:
    """The target: the tuned config's measured signal at its SLO load, else the documented default.

    From a ``tritongen.tune`` document it takes the best config's confirmation runs (or its
    search trial when nothing was confirmed) and the median of their server-side queue time
    (or queue/compute ratio) per request at the load the tune was run at.
    """
    default = ScalingTarget(
        signal.default_target, f"default {signal.description} target {signal.default_target:g}"
    )
    if tune_doc is None:
        return default
    best = tune_doc.get("best") or {}
    key = best.get("key")
    runs = _best_runs(tune_doc, key)
    values = [v for v in (_signal_value(signal, run) for run in runs) if v is not None and v > 0]
    if not values:
        return ScalingTarget(default.value, f"{default.source} (the tune result has no queue time for {key})")
    level = _level(runs[0])
    value = statistics.median(values)
    model = tune_doc.get("model", "?")
    return ScalingTarget(
        value,
        f"tune of {model}: config {key}, median {signal.description} {value:.4g} over {len(values)} "
        f"run(s) at {level} (its SLO p99 {tune_doc.get('slo_p99_ms')} ms)",
    )


def _best_runs(doc: dict[str, Any], key: Any) -> list[dict[str, Any]]:
    contenders = ((doc.get("confirmation") or {}).get("contenders") or {}) if key else {}
    runs = list((contenders.get(key) or {}).get("runs") or [])
    if runs:
        return runs
    for trial in [doc.get("baseline") or {}, *(doc.get("trials") or [])]:
        if trial.get("key") == key:
            return list(((trial.get("result") or {}).get("runs")) or [])
    return []


def _signal_value(signal: ScalingSignal, run: dict[str, Any]) -> float | None:
    server = run.get("server_us") or {}
    queue = server.get("queue")
    if queue is None:
        return None
    if signal.name == "queue-time":
        return float(queue)
    compute = server.get("compute_infer")
    return float(queue) / float(compute) if compute else None


def _level(run: dict[str, Any]) -> str:
    if run.get("mode") == "rate":
        return f"{run.get('target_rate')} requests/s"
    return f"concurrency {run.get('concurrency')}"
