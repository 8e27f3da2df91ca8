"""The figures an LLM comparison ranks on, round by round, and the decision on goodput."""

from __future__ import annotations

import statistics
from collections.abc import Callable

from tritongen.compare.llm.contenders import TRITON, VLLM, LlmCompareReport
from tritongen.loadtest.result import RunResult
from tritongen.stopping import DEFAULT_EQUIVALENCE, StopRule, Verdict, judge

FIGURES: dict[str, Callable[[RunResult], float | None]] = {
    "goodput_per_s": lambda r: r.goodput_per_s,
    "output_tokens_per_s": lambda r: r.output_tokens_per_s,
    "ttft_p50_us": lambda r: (r.ttft_us or {}).get("p50"),
    "ttft_p99_us": lambda r: (r.ttft_us or {}).get("p99"),
    "itl_p50_us": lambda r: (r.itl_us or {}).get("p50"),
    "itl_p99_us": lambda r: (r.itl_us or {}).get("p99"),
}
"""Each figure, from a run."""
HIGHER_IS_BETTER = ("goodput_per_s", "output_tokens_per_s")


def series(report: LlmCompareReport, key: str, figure: str) -> list[float | None]:
    """A contender's figure, round by round."""
    return [FIGURES[figure](run) for run in report.contenders[key].runs]


def goodput_verdict(report: LlmCompareReport, rule: StopRule | None, final: bool, last: int) -> Verdict:
    """Triton's goodput over vLLM's server's after the rounds so far."""
    return judge(
        series(report, TRITON, "goodput_per_s"),
        series(report, VLLM, "goodput_per_s"),
        margin=rule.margin if rule else DEFAULT_EQUIVALENCE,
        final=final,
        last=last if rule else None,
    )


def median(values: list[float | None]) -> float | None:
    """The median of the figures measured (None: none)."""
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None
