"""How a measurement ends as a gate: passed, interrupted, failed with one error, or over its P99 SLO.

The gates are decided here, from the typed results, for ``loadtest`` and ``perf-analyzer``
alike: the run's status (interrupted, aborted), responses that differed from the expected
outputs, the share of failed requests (``--max-error-rate``), a level that did not stabilise,
and the P99 SLO (``--slo-p99-ms``; over rounds, each level's median). A command turns the
:class:`Verdict` into its lines and its exit code.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tritongen.errors import ServerError, TritongenError
from tritongen.loadtest.result import LoadTestReport, RunResult

EXIT_SLO_MISSED = 1
EXIT_INTERRUPTED = 130

LevelText = Callable[[RunResult], str]
"""How a workflow names a run's level in its messages (``c=8``; ``concurrency 8``)."""


@dataclass(frozen=True)
class SloMiss:
    """The runs (or, over rounds, the levels) whose P99 went over the SLO, and the worst of them."""

    slo_p99_ms: float
    missed: int
    what: str
    """``run(s) above P99``, or ``level(s) with a median P99 over N rounds above``."""
    worst: str
    """The level of the worst P99, as the workflow names it."""
    worst_p99_us: float

    def text(self) -> str:
        """``2 run(s) above P99 5 ms (worst c=8: 7.125 ms)``."""
        return (
            f"{self.missed} {self.what} {self.slo_p99_ms:g} ms "
            f"(worst {self.worst}: {self.worst_p99_us / 1000:.3f} ms)"
        )


@dataclass(frozen=True)
class Verdict:
    """How a measurement ends: the lines it says whatever the outcome, and the gate that failed, if any."""

    interrupted: bool = False
    """Ctrl-C or SIGTERM: the results so far were written."""
    failure: TritongenError | None = None
    """The first gate that failed, as the error a user sees (aborted, mismatches, errors, unstable)."""
    slo_miss: SloMiss | None = None
    notes: tuple[str, ...] = ()
    """Lines said before the failure (perf_analyzer's "went over the set limit")."""

    @property
    def passed(self) -> bool:
        """Whether every gate passed."""
        return not self.interrupted and self.failure is None and self.slo_miss is None

    @property
    def exit_code(self) -> int:
        """0 when passed; 130 interrupted; the failure's own code; 1 for a missed SLO."""
        if self.interrupted:
            return EXIT_INTERRUPTED
        if self.failure is not None:
            return self.failure.exit_code
        return EXIT_SLO_MISSED if self.slo_miss is not None else 0


def ended_early(report: LoadTestReport, what: str) -> Verdict | None:
    """The verdict of a run that did not finish (interrupted, or aborted with its reason); else ``None``."""
    if report.status == "interrupted":
        return Verdict(interrupted=True)
    if report.status == "aborted":
        reason = next((r.reason for r in report.runs if r.reason), "the run stopped early")
        return Verdict(
            failure=ServerError(f"{what} aborted: {reason}", "partial results were written; check the server")
        )
    return None


def first_failure(*failures: TritongenError | None) -> TritongenError | None:
    """The first gate of ``failures`` that failed."""
    return next((failure for failure in failures if failure is not None), None)


def error_rate_failure(
    runs: Sequence[RunResult], max_error_rate: float, level: LevelText
) -> ServerError | None:
    """The error of the run with the largest share of failed requests above ``max_error_rate``, if any."""
    failing = [r for r in runs if r.errors and r.errors > max_error_rate * r.requests]
    if not failing:
        return None
    worst = max(failing, key=lambda r: r.errors / max(r.requests, 1))
    kinds = ", ".join(f"{kind}: {n}" for kind, n in sorted(worst.errors_by_kind.items()))
    main = min(worst.errors_by_kind, key=lambda kind: (-worst.errors_by_kind[kind], kind))
    first = worst.error_messages.get(main)
    return ServerError(
        f"{level(worst)}: {worst.errors / max(worst.requests, 1):.1%} of requests failed ({kinds}), "
        f"above --max-error-rate {max_error_rate:g}" + (f"; the first {main}: {first}" if first else ""),
        "results were written; the JSON has each error kind's count and first message, the server log more",
    )


def slo_miss(report: LoadTestReport, slo_p99_ms: float | None, level: LevelText) -> SloMiss | None:
    """The runs over ``slo_p99_ms``; in rounds, the levels whose median P99 is (one noisy round does not)."""
    if slo_p99_ms is None:
        return None
    if report.rounds > 1:
        what = f"level(s) with a median P99 over {report.rounds} rounds above"
        figures = [
            (f"c={lv.level:g}" if lv.mode == "concurrency" else f"{lv.level:g}/s", p99.median)
            for lv in report.levels()
            if (p99 := lv.latency_us.get("p99"))
        ]
    else:
        what = "run(s) above P99"
        figures = [(level(r), r.latency_us["p99"]) for r in report.runs if r.latency_us]
    missed = [(where, p99_us) for where, p99_us in figures if p99_us > slo_p99_ms * 1000]
    if not missed:
        return None
    where, worst_us = max(missed, key=lambda m: m[1])
    return SloMiss(slo_p99_ms, len(missed), what, where, worst_us)
