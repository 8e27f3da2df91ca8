"""vLLM's figures over a run's span, from the sampler's scrapes: gauges' mean and max, counters' increase."""

from __future__ import annotations

import pytest

from tritongen.metrics.prometheus import Sample
from tritongen.metrics.vllm import PREFIX, vllm_figures, vllm_text


def _sample(when: float, running: float, usage: float, queries: float, hits: float) -> Sample:
    values = {"requests_running": running, "requests_waiting": 0.0, "kv_cache_usage": usage,
              "preemptions": 0.0, "prefix_cache_queries": queries, "prefix_cache_hits": hits}  # fmt: skip
    return Sample(time=when, values={PREFIX + k: v for k, v in values.items()})


def test_gauges_average_inside_and_counters_grow_from_the_sample_before() -> None:
    samples = [_sample(t, running=t, usage=t / 10, queries=100 * t, hits=10 * t) for t in range(10)]
    figures = vllm_figures(samples, 3.5, 6.5)  # samples 4, 5, 6 inside; 3 before
    assert figures is not None and figures["samples"] == 3
    assert figures["requests_running_mean"] == pytest.approx(5) and figures["requests_running_max"] == 6
    assert figures["kv_cache_usage_max"] == pytest.approx(0.6)
    assert figures["prefix_cache_queries"] == 300 and figures["prefix_cache_hits"] == 30
    assert figures["prefix_cache_hit_rate"] == pytest.approx(0.1) and figures["preemptions"] == 0
    assert "prefix-cache hits 10.0%" in vllm_text(figures)


def test_no_vllm_figures_in_the_span_give_none() -> None:
    triton = [Sample(time=1.0, values={"cpu_util": 0.5})]
    assert vllm_figures(triton, 0.0, 2.0) is None
    assert vllm_figures([_sample(5.0, 1, 0, 0, 0)], 0.0, 2.0) is None
    only = vllm_figures([_sample(1.0, 1, 0, 0, 0)], 0.0, 2.0)
    assert only is not None and only["prefix_cache_hit_rate"] is None and only["prefix_cache_queries"] == 0
