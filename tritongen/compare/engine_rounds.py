"""Compare's deciding figures: every engine loaded, measured in interleaved rounds, then judged.

Each round measures the P99 of single requests of every engine, then the throughput of every
engine at the concurrency its ramp chose, the order rotating (A B C, B C A, C A B, …), so the
machine's drift falls on all engines alike and their ratios are paired per round. With
``--rounds auto`` the rounds stop once every pair of the deciding figures is decided.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable
from dataclasses import dataclass

from tritongen.client.repository import RepositoryControl
from tritongen.compare import decisions
from tritongen.compare.measure import MeasureSettings, ServerHandle, engine_spec, trace_spec
from tritongen.compare.result import CompareReport, EngineResult, LatencyRun
from tritongen.errors import TritongenError, first_line
from tritongen.loadtest.result import RunResult
from tritongen.loadtest.rounds import Contender, Rounds, measure_rounds
from tritongen.loadtest.runner import Progress

Say = Callable[[str], None]
Update = Callable[[CompareReport], None]

FIGURES_B1 = {"p99_ms_b1": "p99", "p50_ms_b1": "p50"}
"""Figures of the batch-1 runs, in ms, from the runs' latency percentiles."""


Ramped = list[tuple[EngineResult, dict[str, tuple[int, ...]]]]
"""Engines their ramp measured without failure, each with the input shapes it is sent."""


@dataclass(frozen=True)
class RoundsPlan:
    """How the rounds measure and what they decide on: the settings, ``--decide`` and ``--rank-by``."""

    settings: MeasureSettings
    decide: tuple[str, ...]
    rank_by: str


@dataclass(frozen=True)
class Listeners:
    """Whom the measurement tells as it goes, and the event that stops it."""

    say: Say
    progress: Callable[[Progress], None] | None
    update: Update
    stop: threading.Event | None


def measure_engine_rounds(
    plan: RoundsPlan,
    report: CompareReport,
    server: ServerHandle,
    control: RepositoryControl,
    engines: Ramped,
    listeners: Listeners,
) -> None:
    """The deciding figures, every engine loaded, measured in rounds, the order rotating (A B C, B C A, …).

    Each round measures the P99 of single requests of every engine, then the throughput of
    every engine at the concurrency its ramp chose, so drift of the machine falls on all
    engines alike and their ratios can be taken per round.
    """
    settings, rule = plan.settings, plan.settings.stopping
    figures = decisions.decided_figures(plan.decide, plan.rank_by)
    engines = _load_all(control, engines)
    state = {"deciding": ""}

    def started(number: int, total: int, name: str) -> None:
        of = f"{number} (at most {total})" if rule is not None else f"{number}/{total}"
        listeners.say(f"round {of}: {_round_labels(engines)[name]}{state['deciding']}")

    def done(rounds: Rounds) -> None:
        _apply_rounds(engines, rounds, settings.confidence)
        listeners.update(report)

    def decided(_: Rounds) -> bool:  # after done(): the engines' round figures are this round's
        assert rule is not None
        verdicts = decisions.pair_verdicts(
            [e for e, _ in engines], rule, settings.confidence, figures=figures
        )
        state["deciding"] = f"; {decisions.progress_text(verdicts)}"
        return all(v.decision is not None for _, v in verdicts)

    rounds = measure_rounds(
        _round_contenders(server, settings, engines),
        settings.rounds,
        listeners.progress,
        listeners.stop,
        on_start=started,
        on_round=done,
        until=decided if rule is not None else None,
        max_s=rule.max_minutes * 60 if rule is not None and rule.max_minutes else None,
        busy_repeats=rule.busy_repeats if rule is not None else 0,
    )
    _apply_rounds(engines, rounds, settings.confidence)
    if rule is not None:
        given = report.settings.get("stopping") or {}
        found = decisions.record([e for e, _ in engines], rounds, rule, settings.confidence, figures)
        report.settings["stopping"] = {**given, **found}
    if rounds.status == "interrupted":
        report.status = "interrupted"
    elif rounds.status == "aborted":
        report.status = "aborted"
        for engine, _ in engines:
            engine.reason = f"the server stopped answering in round {rounds.completed + 1}: {rounds.reason}"
    for engine, _ in engines:
        with contextlib.suppress(TritongenError):
            control.unload(engine.model)


def _load_all(control: RepositoryControl, engines: Ramped) -> Ramped:
    """Load every engine for the rounds; those that do not load beside the others fail and are left out."""
    loaded = []
    for engine, shapes in engines:
        try:
            control.load(engine.model)
        except TritongenError as e:  # measured alone, but it does not load beside the others
            engine.status = "failed"
            engine.reason = f"could not be loaded for the rounds: {first_line(e, 300)}"
            continue
        loaded.append((engine, shapes))
    return loaded


def _round_contenders(server: ServerHandle, settings: MeasureSettings, engines: Ramped) -> list[Contender]:
    """Each engine's P99 at batch 1 (``model|b1``), then its throughput (``model|b32``), then its trace.

    With ``--trace``, each engine's P99 under the recorded requests (``model|trace``) comes last.
    """
    traced = [(e, spec) for e, shapes in engines if (spec := trace_spec(server, settings, e.model, shapes))]
    return (
        [
            Contender(f"{e.model}|b1", engine_spec(server, settings, e.model, 1, 1, shapes))
            for e, shapes in engines
        ]
        + [
            Contender(
                f"{e.model}|b32",
                engine_spec(
                    server, settings, e.model, e.batch_size_throughput or 1, e.concurrency_b32 or 1, shapes
                ),
            )
            for e, shapes in engines
        ]
        + [Contender(f"{e.model}|trace", spec) for e, spec in traced]
    )


def _round_labels(engines: Ramped) -> dict[str, str]:
    """How each contender of the rounds is named in messages, e.g. ``ONNX Runtime, throughput``."""
    return {
        f"{e.model}|{kind}": f"{e.label}, {what}"
        for e, _ in engines
        for kind, what in (("b1", "P99 at batch 1"), ("b32", "throughput"), ("trace", "the trace replayed"))
    }


def _apply_rounds(engines: Ramped, rounds: Rounds, confidence: float) -> None:
    """Each engine's figures from its runs so far: per round, and their medians and intervals."""
    for engine, _ in engines:
        b1 = rounds.runs.get(f"{engine.model}|b1", [])
        b32 = rounds.runs.get(f"{engine.model}|b32", [])
        engine.rounds = min(len(b1), len(b32))
        engine.latency_runs = [r for r in engine.latency_runs if r.figure == "ramp"]
        engine.latency_runs += [LatencyRun("p99_ms_b1", r) for r in b1]
        engine.latency_runs += [LatencyRun("infer_per_s_b32", r) for r in b32]
        figures: dict[str, list[float | None]] = {
            name: rounds.figures(f"{engine.model}|b1", functools.partial(_ms, key=key))
            for name, key in FIGURES_B1.items()
        }
        figures["infer_per_s_b1"] = rounds.figures(f"{engine.model}|b1", lambda r: r.infer_per_s)
        figures["infer_per_s_b32"] = rounds.figures(f"{engine.model}|b32", lambda r: r.infer_per_s)
        figures["p99_ms_b32"] = rounds.figures(f"{engine.model}|b32", functools.partial(_ms, key="p99"))
        traced = rounds.runs.get(f"{engine.model}|trace", [])
        if traced:  # --trace: each round's P50 and P99 under the recorded requests
            engine.latency_runs += [LatencyRun("p99_ms_trace", r) for r in traced]
            for name, key in (("p99_ms_trace", "p99"), ("p50_ms_trace", "p50")):
                figures[name] = rounds.figures(f"{engine.model}|trace", functools.partial(_ms, key=key))
        engine.round_figures = figures
        engine.summarise(confidence)
        errors = sum(r.errors for r in b1 + b32 + traced)
        ramp_errors = sum(r.run.errors for r in engine.latency_runs if r.figure == "ramp")
        engine.errors = ramp_errors + errors
        if engine.errors:
            engine.status = "failed"
            engine.reason = f"{engine.errors} request(s) failed under load"


def _ms(run: RunResult, key: str) -> float | None:
    return run.latency_us[key] / 1000 if run.latency_us else None
