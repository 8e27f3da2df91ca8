"""The tune of a local vLLM model: the baseline, each trial restarted and measured, the best confirmed.

1. The server: the embedded one started on the repository with the model (its start timed),
   or a running one in explicit model-control mode.
2. The baseline: the model as its config has it, measured once.
3. The trials: the sibling reloaded with each candidate's settings (the restart timed; an engine
   that refuses them is a failed trial with the engine's own error), measured once.
4. The confirmation: the best trial by goodput against the baseline, side by side, in
   interleaved rounds (a number, or ``auto`` until the pair is decided); it replaces the
   baseline only when its goodput is greater beyond the noise.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tritongen.client.address import ServerAddress
from tritongen.convert.llm.formats import LLM_START_TIMEOUT_S
from tritongen.errors import ConfigError, ModelLoadError
from tritongen.intervals import Ratio, paired_ratio
from tritongen.loadtest.spec import LoadSpec
from tritongen.server.embedded import lint_before_serving
from tritongen.server.local import LocalTritonServer
from tritongen.stopping import StopRule, Verdict, judge
from tritongen.triton.proto import read_config
from tritongen.tune.llm.measure import LlmMeasurement, measure
from tritongen.tune.llm.space import EngineCandidate, EngineSpace, current_settings, pick
from tritongen.tune.llm.trials import Sibling

Say = Callable[[str], None]


@dataclass(frozen=True)
class LlmTuneRequest:
    """What a tune of a local vLLM model is asked for."""

    model: str
    repo: Path
    spec: LoadSpec
    """The load of every measurement: an LLM load at one level (its model is set per run)."""
    space: EngineSpace
    max_trials: int | None = None
    seed: int = 0
    rounds: int = 3
    """Confirmation rounds (the cap with ``rule``)."""
    rule: StopRule | None = None
    url: str | None = None
    """A running server (HTTP ``host:port``) in explicit model-control mode; None: the embedded one."""
    admin_key: str | None = None


@dataclass(frozen=True)
class LlmTrial:
    """One trial: the settings, the engine's restart, what it measured."""

    candidate: EngineCandidate
    reload_s: float | None
    measurement: LlmMeasurement


@dataclass
class Confirmation:
    """The best trial against the baseline in interleaved rounds."""

    finalist: EngineCandidate
    baseline_goodput: list[float] = field(default_factory=list)
    finalist_goodput: list[float] = field(default_factory=list)
    runs: list[dict[str, object]] = field(default_factory=list)
    ratio: Ratio | None = None
    verdict: Verdict | None = None
    reload_s: float = 0.0
    """The finalist's reload before the rounds (0 when the sibling already had it)."""

    @property
    def wins(self) -> bool:
        """Whether the finalist's goodput is greater than the baseline's beyond the noise."""
        return self.ratio is not None and self.ratio.low is not None and self.ratio.low > 1.0


@dataclass
class LlmTuneReport:
    """Everything the tune measured, and its winner."""

    model: str
    baseline: EngineCandidate
    baseline_measurement: LlmMeasurement | None = None
    trials: list[LlmTrial] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    confirmation: Confirmation | None = None
    winner: EngineCandidate | None = None
    server_start_s: float | None = None
    wall_s: float = 0.0

    @property
    def best_trial(self) -> LlmTrial | None:
        """The trial with the most goodput (none failed, some goodput), ties to lower TTFT P99."""
        usable = [t for t in self.trials if not t.measurement.failed and t.measurement.goodput_per_s > 0]
        if not usable:
            return None
        return max(usable, key=lambda t: (t.measurement.goodput_per_s, -(t.measurement.ttft_p99_us or 0.0)))

    @property
    def reload_total_s(self) -> float:
        """Seconds spent restarting engines (every trial's, and the finalist's before its rounds)."""
        trials = sum(t.reload_s or 0.0 for t in self.trials)
        return trials + (self.confirmation.reload_s if self.confirmation else 0.0)


def run_llm_tune(request: LlmTuneRequest, say: Say, stop: threading.Event | None = None) -> LlmTuneReport:
    """Tune the engine settings of ``request.model`` (see the module).

    Raises:
        TritongenError: not a local vLLM model, nothing to try, or the server cannot start.
    """
    started = time.perf_counter()
    model_dir = request.repo / request.model
    base = read_config(model_dir / "config.pbtxt")
    current, max_model_len = current_settings(base.parameters)
    candidates, skipped = request.space.candidates(max_model_len, current)
    trials = pick(candidates, request.max_trials, request.seed)
    if not trials:
        raise ConfigError(
            "no engine settings to try besides the model's own" + (f" ({skipped[0]})" if skipped else ""),
            "try other --max-num-seqs, --max-num-batched-tokens, --chunked-prefill or --prefix-caching",
        )
    report = LlmTuneReport(request.model, current, skipped=skipped)
    with _serving(request, say) as (url, grpc_url, metrics_url, start_s):
        report.server_start_s = start_s
        load_url = grpc_url if request.spec.protocol == "grpc" else url
        given_metrics = request.spec.address.given_metrics_url or metrics_url
        address = ServerAddress.parse(load_url, request.spec.protocol, given_metrics)
        spec = dataclasses.replace(request.spec, address=address)
        sibling = Sibling(url, model_dir, base, request.admin_key)
        with sibling.present():
            say("measuring the baseline (the model's config)")
            report.baseline_measurement = measure(spec, request.model, stop)
            for number, candidate in enumerate(trials, 1):
                say(f"trial {number}/{len(trials)}: {candidate.key}, restarting the engine")
                report.trials.append(_trial(sibling, spec, candidate, stop))
                say(f"trial {number}/{len(trials)}: {candidate.key}: {report.trials[-1].measurement.text()}")
            best = report.best_trial
            if best is not None:
                report.confirmation = _confirm(request, spec, sibling, best.candidate, say, stop)
    report.winner = (
        report.confirmation.finalist
        if report.confirmation is not None and report.confirmation.wins
        else current
    )
    report.wall_s = time.perf_counter() - started
    return report


@contextlib.contextmanager
def _serving(request: LlmTuneRequest, say: Say) -> Iterator[tuple[str, str, str | None, float | None]]:
    """The server's HTTP, gRPC and metrics addresses, and how long it took to start (None: a running one)."""
    if request.url is not None:
        yield request.url, ServerAddress.parse(request.url).beside("grpc").url, None, None
        return
    lint_before_serving(request.repo, [request.model])
    say("starting the embedded Triton server (the engine takes minutes to start on a CPU)")
    started = time.perf_counter()
    server = LocalTritonServer(
        request.repo,
        http_port=0,
        grpc_port=0,
        metrics_port=0,
        models=[request.model],
        load_timeout_s=LLM_START_TIMEOUT_S,
    )
    server.start()
    try:
        metrics = server.metrics_url
        yield server.http_url, server.grpc_url, metrics, time.perf_counter() - started
    finally:
        server.stop()


def _trial(
    sibling: Sibling, spec: LoadSpec, candidate: EngineCandidate, stop: threading.Event | None
) -> LlmTrial:
    """Restart the sibling's engine with ``candidate``, measure it; an engine that refuses fails the trial."""
    try:
        reload_s = sibling.load(candidate)
    except ModelLoadError as e:
        reason = next(iter(e.reasons.values()), e.message)
        return LlmTrial(
            candidate, reload_s=None, measurement=LlmMeasurement.failure(f"did not load: {reason}")
        )
    return LlmTrial(candidate, reload_s, measure(spec, sibling.name, stop))


def _confirm(
    request: LlmTuneRequest,
    spec: LoadSpec,
    sibling: Sibling,
    finalist: EngineCandidate,
    say: Say,
    stop: threading.Event | None,
) -> Confirmation:
    """The finalist against the baseline, in rounds that alternate which runs first."""
    confirmation = Confirmation(finalist)
    if sibling.loaded != finalist:
        say(f"confirming: restarting the engine with {finalist.key}")
        confirmation.reload_s = sibling.load(finalist)
    rule = request.rule
    deadline = time.monotonic() + rule.max_minutes * 60 if rule and rule.max_minutes else None
    repeats = rule.busy_repeats if rule else 0
    while len(confirmation.baseline_goodput) < request.rounds:
        number = len(confirmation.baseline_goodput) + 1
        pair = _round(spec, request.model, sibling.name, number, stop)
        if any(m.busy for m in pair) and repeats > 0:
            repeats -= 1
            say(f"round {number}: other processes were busy, measured again")
            continue
        _record(confirmation, number, pair)
        confirmation.verdict = _verdict(confirmation, request, rule)
        say(f"round {number}: {finalist.key} over the baseline: {confirmation.verdict.text()}")
        if rule is not None and confirmation.verdict.decision is not None:
            break
        if (deadline is not None and time.monotonic() > deadline) or (stop is not None and stop.is_set()):
            break
    confirmation.ratio = paired_ratio(confirmation.finalist_goodput, confirmation.baseline_goodput)
    if confirmation.verdict is not None and confirmation.verdict.ratio is not None:
        confirmation.ratio = confirmation.verdict.ratio
    return confirmation


def _round(
    spec: LoadSpec, baseline: str, finalist: str, number: int, stop: threading.Event | None
) -> tuple[LlmMeasurement, LlmMeasurement]:
    """One round: both measured, the baseline first in odd rounds; (baseline, finalist)."""
    if number % 2:
        first = measure(spec, baseline, stop)
        return first, measure(spec, finalist, stop)
    second = measure(spec, finalist, stop)
    return measure(spec, baseline, stop), second


def _record(confirmation: Confirmation, number: int, pair: tuple[LlmMeasurement, LlmMeasurement]) -> None:
    baseline, finalist = pair
    confirmation.baseline_goodput.append(baseline.goodput_per_s)
    confirmation.finalist_goodput.append(finalist.goodput_per_s)
    confirmation.runs.append(
        {"round": number, "baseline": baseline.to_json(), "finalist": finalist.to_json()}
    )


def _verdict(confirmation: Confirmation, request: LlmTuneRequest, rule: StopRule | None) -> Verdict:
    """The finalist over the baseline after the rounds so far: can it be shown greater?"""
    final = len(confirmation.baseline_goodput) >= request.rounds
    return judge(
        confirmation.finalist_goodput,
        confirmation.baseline_goodput,
        margin=rule.margin if rule else 0.05,
        final=final,
        last=request.rounds if rule else None,
        side="greater",
    )
