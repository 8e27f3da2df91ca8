"""vLLM's server figures from its Prometheus endpoint (``/metrics`` under the base URL), over a run.

The sampler scrapes the endpoint once a second (:class:`~tritongen.metrics.prometheus.MetricsSampler`
with :func:`parse_vllm_metrics`); a run's figures are the gauges' mean and max over its
measured span (requests running, requests waiting, KV-cache use as a fraction) and the
counters' increase over it (preemptions, prefix-cache queries and hits, in tokens, and the
hit rate they give). Every label set (models, engines) is summed.
"""

from __future__ import annotations

from typing import Any

from tritongen.metrics.prometheus import Sample, parse_metrics

GAUGES = {
    "vllm:num_requests_running": "requests_running",
    "vllm:num_requests_waiting": "requests_waiting",
    "vllm:kv_cache_usage_perc": "kv_cache_usage",
    "vllm:gpu_cache_usage_perc": "kv_cache_usage",  # the name before vLLM 0.10
}
COUNTERS = {
    "vllm:num_preemptions_total": "preemptions",
    "vllm:prefix_cache_queries_total": "prefix_cache_queries",
    "vllm:prefix_cache_hits_total": "prefix_cache_hits",
}
"""Sample names (a counter's with its ``_total``) -> the figure each one gives."""
PREFIX = "vllm_"
"""What the figures are called in a sample's values (beside Triton's)."""


def parse_vllm_metrics(text: str) -> dict[str, float]:
    """The vLLM figures in Prometheus text, each summed over its label sets (``vllm_<figure>``)."""
    from prometheus_client.parser import text_string_to_metric_families

    found: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            figure = GAUGES.get(sample.name) or COUNTERS.get(sample.name)
            if figure is not None:
                key = PREFIX + figure
                found[key] = found.get(key, 0.0) + float(sample.value)
    return found


def parse_triton_and_vllm_metrics(text: str) -> dict[str, float]:
    """Triton's figures and vLLM's where a model publishes them (the local vLLM model, the vLLM backend)."""
    return {**parse_metrics(text), **parse_vllm_metrics(text)}


def vllm_figures(samples: list[Sample], start: float, end: float) -> dict[str, Any] | None:
    """The server's figures between two wall-clock times (None: no vLLM figure was scraped then).

    Gauges: ``<figure>_mean`` and ``<figure>_max``; counters: their increase from the last
    sample before ``start`` (else the first inside) to the last inside; ``prefix_cache_hit_rate``
    (hits over queries, None without queries).
    """
    inside = [s for s in samples if start <= s.time <= end and any(k.startswith(PREFIX) for k in s.values)]
    if not inside:
        return None
    before = [s for s in samples if s.time < start and any(k.startswith(PREFIX) for k in s.values)]
    first = before[-1] if before else inside[0]
    figures: dict[str, Any] = {"samples": len(inside)}
    for figure in dict.fromkeys(GAUGES.values()):
        values = [s.values[PREFIX + figure] for s in inside if PREFIX + figure in s.values]
        figures[f"{figure}_mean"] = sum(values) / len(values) if values else None
        figures[f"{figure}_max"] = max(values) if values else None
    for figure in COUNTERS.values():
        key = PREFIX + figure
        last = next((s.values[key] for s in reversed(inside) if key in s.values), None)
        base = first.values.get(key)
        figures[figure] = None if last is None or base is None else max(0.0, last - base)
    queries, hits = figures["prefix_cache_queries"], figures["prefix_cache_hits"]
    figures["prefix_cache_hit_rate"] = hits / queries if queries and hits is not None else None
    return figures


def vllm_text(figures: dict[str, Any]) -> str:
    """One line of a run's vLLM figures."""

    def pair(figure: str, form: str) -> str:
        mean, peak = figures.get(f"{figure}_mean"), figures.get(f"{figure}_max")
        return "–" if mean is None else f"mean {mean:{form}} max {peak:{form}}"

    rate = figures.get("prefix_cache_hit_rate")
    preemptions = figures.get("preemptions")
    return (
        f"vLLM: running {pair('requests_running', '.1f')}, waiting {pair('requests_waiting', '.1f')}, "
        f"KV cache {pair('kv_cache_usage', '.1%')}, "
        f"preemptions {'–' if preemptions is None else f'{preemptions:.0f}'}, "
        f"prefix-cache hits {'–' if rate is None else f'{rate:.1%}'}"
    )
