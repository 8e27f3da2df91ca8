"""One measurement of a trial: an LLM load test at the tune's load level, reduced to what decides.

The objective is goodput: requests per second that met every ``--slo`` limit (TTFT, the
longest gap, the whole request). The P99 of TTFT and ITL, tokens per second and errors are
kept beside it, and whether other processes were busy during the run.
"""

from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass
from typing import Any

from tritongen.loadtest.result import RunResult
from tritongen.loadtest.runner import run_load_test
from tritongen.loadtest.spec import LoadSpec


@dataclass(frozen=True)
class LlmMeasurement:
    """What one run measured (``failed``: why it measured nothing)."""

    goodput_per_s: float
    requests_per_s: float
    ttft_p99_us: float | None
    itl_p99_us: float | None
    output_tokens_per_s: float
    errors: int
    busy: bool = False
    failed: str | None = None

    @classmethod
    def of(cls, run: RunResult) -> LlmMeasurement:
        """The figures of a finished run."""
        failed = run.reason if run.status not in ("ok",) else None
        return cls(
            goodput_per_s=run.goodput_per_s or 0.0,
            requests_per_s=run.qps,
            ttft_p99_us=(run.ttft_us or {}).get("p99"),
            itl_p99_us=(run.itl_us or {}).get("p99"),
            output_tokens_per_s=run.output_tokens_per_s or 0.0,
            errors=run.errors,
            busy=run.busy,
            failed=failed,
        )

    @classmethod
    def failure(cls, reason: str) -> LlmMeasurement:
        """A trial that measured nothing."""
        return cls(
            goodput_per_s=0.0,
            requests_per_s=0.0,
            ttft_p99_us=None,
            itl_p99_us=None,
            output_tokens_per_s=0.0,
            errors=0,
            failed=reason,
        )

    def text(self) -> str:
        """``goodput 12.3/s, TTFT p99 45.6 ms, ITL p99 7.8 ms, 456 tokens/s``."""
        if self.failed:
            return f"failed: {self.failed}"
        ttft = f"{self.ttft_p99_us / 1000:.1f} ms" if self.ttft_p99_us is not None else "–"
        itl = f"{self.itl_p99_us / 1000:.1f} ms" if self.itl_p99_us is not None else "–"
        return (
            f"goodput {self.goodput_per_s:.2f}/s, TTFT p99 {ttft}, ITL p99 {itl}, "
            f"{self.output_tokens_per_s:.0f} tokens/s" + (", busy" if self.busy else "")
        )

    def to_json(self) -> dict[str, Any]:
        """The figures by name."""
        return dataclasses.asdict(self)


def measure(spec: LoadSpec, model: str, stop: threading.Event | None = None) -> LlmMeasurement:
    """One run of ``spec``'s level on ``model``."""
    report = run_load_test(dataclasses.replace(spec, model=model, rounds=1), stop=stop)
    if not report.runs:
        return LlmMeasurement.failure(f"no run: the load test ended {report.status}")
    return LlmMeasurement.of(report.runs[-1])
