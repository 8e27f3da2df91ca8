"""The token plots of an LLM load test: one point per level, the median of its rounds."""

from __future__ import annotations

from pathlib import Path

import pytest

from tritongen.loadtest.result import LoadTestReport, RunResult
from tritongen.report.llm_plots import is_llm_report, plot_tokens, tokens_figure


def _run(concurrency: int, ttft_ms: float, tokens_per_s: float, status: str = "ok") -> RunResult:
    ms = {"p50": ttft_ms * 1000, "p99": ttft_ms * 2000}
    run = RunResult(
        "concurrency", concurrency, None, 1, 2.0, 10, 0, {}, 5.0, 5.0, ms, None, None, True, None, None
    )
    run.status = status
    run.ttft_us, run.itl_us = ms, {k: v / 10 for k, v in ms.items()}
    run.output_tokens_per_s = tokens_per_s
    return run


def test_each_level_is_the_median_of_its_finished_rounds(tmp_path: Path) -> None:
    report = LoadTestReport(model="text", protocol="http", url="x", rounds=3)
    report.runs = [
        _run(1, 10, 100), _run(4, 20, 300), _run(1, 12, 110), _run(4, 40, 330),
        _run(1, 11, 90), _run(4, 30, 310), _run(4, 999, 1, status="aborted"),
    ]  # fmt: skip
    assert is_llm_report(report)
    fig = tokens_figure(report)
    latency, tokens = fig.axes[:2]
    series = {c.get_label(): c.lines[0] for ax in (latency, tokens) for c in ax.containers}
    assert {"TTFT P50", "TTFT P99", "ITL P50", "ITL P99", "output tokens/s"} <= set(series)
    ttft_p50 = series["TTFT P50"]
    assert list(ttft_p50.get_xdata()) == [1, 4]
    assert list(ttft_p50.get_ydata()) == pytest.approx([11.0, 30.0])  # ms; the aborted round left out
    assert list(series["output tokens/s"].get_ydata()) == pytest.approx([100.0, 310.0])
    path = plot_tokens(report, tmp_path / "tokens.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_tensor_load_is_not_plotted_as_tokens() -> None:
    report = LoadTestReport(model="m", protocol="http", url="x")
    run = _run(1, 1, 1)
    run.ttft_us = None
    report.runs = [run]
    assert not is_llm_report(report)
