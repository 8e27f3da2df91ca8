"""What a tune is asked, how long it will take, and the tune directory it claims.

A tune directory records the tune that measured its trials (``tune-request.json``): a
``--resume`` of another tune's directory is refused before anything is reloaded or written.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tritongen.errors import ConfigError
from tritongen.intervals import (
    DEFAULT_CONFIDENCE,
    DEFAULT_ROUNDS,
    check_confidence,
    check_rounds,
)
from tritongen.io.files import atomic_write_text
from tritongen.loadtest.background import BackgroundSpec
from tritongen.loadtest.spec import RUN_OVERHEAD_S, LoadSpec, seconds_text
from tritongen.stopping import MIN_ROUNDS, StopRule
from tritongen.triton.model_config import ModelConfig
from tritongen.tune.confirm import DEFAULT_FINALISTS
from tritongen.tune.space import SearchSpace
from tritongen.tune.strategy import SearchStrategy, make_strategy

REQUEST_FILE = "tune-request.json"

RELOAD_S = 2.0
"""What a live reload costs, roughly (Triton swaps a config in about 1.4 s)."""


@dataclass(frozen=True)
class TuneRequest:
    """What to tune, against what, with which load, and how surely to decide."""

    model: str
    space: SearchSpace
    load: LoadSpec
    slo_p99_ms: float | None
    strategy: str = "adaptive"
    max_trials: int | None = None
    max_memory_mb: float | None = None
    out_dir: Path = Path("tune")
    seed: int = 0
    rounds: int = DEFAULT_ROUNDS
    """Confirmation rounds (1: a quick look, nothing is significant); with ``stopping``, at most."""
    finalists: int = DEFAULT_FINALISTS
    confidence: float = DEFAULT_CONFIDENCE
    background: BackgroundSpec | None = None
    """Other models' traffic kept running for the whole tune (trials and rounds), if any."""
    stopping: StopRule | None = None
    """``--rounds auto``: the confirmation's rounds stop once each finalist is decided (or at a cap)."""

    def check(self) -> None:
        """Reject settings that cannot work, before anything is measured or written.

        Raises:
            ConfigError: an illegal space, rounds below 1, finalists below 1, a
                confidence level outside (0, 1), a stopping rule that cannot decide or a
                background load that cannot run.
        """
        self.space.check()
        check_rounds(self.rounds)
        if self.stopping is not None:
            self.stopping.check()
        check_confidence(self.confidence)
        if not isinstance(self.finalists, int) or self.finalists < 1:
            raise ConfigError(f"--finalists {self.finalists} must be at least 1", "e.g. --finalists 3")
        for measured in dict.fromkeys((self.model, self.load.model)):
            if self.background is not None:
                self.background.check(measured)

    def around(self, base: ModelConfig) -> TuneRequest:
        """This tune of the model whose config is ``base``: the space made around that config, checked.

        Raises:
            ConfigError: an illegal space or settings, or a model without batching.
        """
        request = replace(self, space=self.space.around(base))
        if base.max_batch_size == 0:
            raise ConfigError(
                f"'{self.model}' has max_batch_size 0: there is no batching to tune",
                "convert the model with a dynamic batch dim",
            )
        request.check()
        return request

    def make_strategy(self) -> SearchStrategy:
        """The search strategy this tune asks for.

        Raises:
            ConfigError: an unknown strategy or a budget below one trial.
        """
        return make_strategy(
            self.strategy,
            self.space,
            self.max_trials,
            self.seed,
            slo_p99_ms=self.slo_p99_ms,
            max_memory_mb=self.max_memory_mb,
        )

    def claim(self) -> dict[str, Any]:
        """What a trial directory records about the tune that measured it (see :func:`check_claim`)."""
        return {
            "model": self.model,
            "load_model": self.load.model,
            "background": None if self.background is None else self.background.to_json(),
            "slo_p99_ms": self.slo_p99_ms,
            "batch_size": self.load.batch_size,
            "levels": list(self.load.levels),
            "mode": self.load.mode,
            "shape": None if self.load.shape is None else self.load.shape.describe(),
            "arrival": self.load.arrival
            + ("" if self.load.arrival_cv is None else f":{self.load.arrival_cv:g}"),
            "rounds": self.rounds_text,
            "finalists": self.finalists,
            "confidence": self.confidence,
        }

    @property
    def rounds_text(self) -> int | str:
        """``--rounds`` as given: the number, or ``auto``."""
        return "auto" if self.stopping is not None else self.rounds


@dataclass(frozen=True)
class TunePlan:
    """How much a tune will measure at most, and roughly how long that takes."""

    trials: int
    """Search trials at most, the current config included."""
    contenders: int
    """Configs in the confirmation: the finalists (at most) and the current config."""
    rounds: int
    """Confirmation rounds; with ``auto``, at most."""
    seconds: float
    """With every run measured for ``--duration`` (``auto``: decided in the fewest rounds)."""
    max_seconds: float
    """With every run waiting the longest for stable figures (``--max-duration``, 3 × duration);
    ``auto``: in every round up to its caps."""
    auto: bool = False

    def text(self) -> str:
        """``about 6 min (up to 14 min …): 24 trials, then 4 configs × 5 rounds``."""
        rounds = f"{self.rounds} round" + ("s" if self.rounds != 1 else "")
        if self.auto:
            rounds = f"{MIN_ROUNDS} to {self.rounds} rounds, until each finalist is decided"
        when = f"about {seconds_text(self.seconds)}"
        if seconds_text(self.max_seconds) != seconds_text(self.seconds):
            why = "at the caps" if self.auto else "while runs wait to be stable"
            when += f" (up to {seconds_text(self.max_seconds)} {why})"
        return f"{when}: {self.trials} trials, then {self.contenders} configs × {rounds}"


def plan(request: TuneRequest) -> TunePlan:
    """How long a tune takes: trials × (levels × (warm-up + duration + overhead) + reload), then the rounds.

    Raises:
        ConfigError: an unknown strategy or a budget below one trial.
    """
    strategy = request.make_strategy()
    trials = strategy.max_trials + 1
    contenders = min(request.finalists, strategy.max_trials) + 1
    levels = len(request.load.levels)
    rule = request.stopping

    def total(measured_s: float, rounds: int, cap_s: float | None = None) -> float:
        level_s = request.load.warmup_s + measured_s + RUN_OVERHEAD_S
        round_s = contenders * (level_s + RELOAD_S)
        confirming = rounds * round_s if cap_s is None else min(rounds * round_s, cap_s + round_s)
        return trials * (levels * level_s + RELOAD_S) + confirming

    cap_s = rule.max_minutes * 60 if rule is not None and rule.max_minutes else None
    return TunePlan(
        trials=trials,
        contenders=contenders,
        rounds=request.rounds,
        seconds=total(request.load.duration_s, MIN_ROUNDS if rule is not None else request.rounds),
        max_seconds=total(request.load.effective_max_duration_s, request.rounds, cap_s),
        auto=rule is not None,
    )


def check_claim(request: TuneRequest) -> None:
    """Refuse to resume a directory of another tune (model, SLO, load, rounds, finalists, confidence).

    Reads only: nothing is written, so a refused ``--resume`` leaves the directory as it was.

    Raises:
        ConfigError: the directory holds another tune's trials.
    """
    path = request.out_dir / REQUEST_FILE
    if not path.is_file():
        return
    try:
        theirs = json.loads(path.read_text(encoding="utf-8"))
    except ValueError:
        theirs = None
    mine = request.claim()
    if not isinstance(theirs, dict):
        theirs = {}
    search = ("model", "slo_p99_ms", "batch_size", "levels", "mode", "shape")
    if any(theirs.get(k) != mine[k] for k in search) or theirs.get("arrival", "constant") != mine["arrival"]:
        shown = {k: theirs.get(k) for k in (*search, "arrival") if k in theirs}
        raise ConfigError(
            f"{request.out_dir} holds trials of another tune ({shown})",
            "resume with the same model, SLO and load, or pick a new --out directory",
        )
    if theirs.get("load_model", theirs.get("model")) != mine["load_model"]:
        raise ConfigError(
            f"{request.out_dir} holds trials of {mine['model']} under the load of "
            f"'{theirs.get('load_model', theirs.get('model'))}'",
            "resume with the same model under load, or pick a new --out directory",
        )
    if theirs.get("background") != mine["background"]:
        raise ConfigError(
            f"{request.out_dir} holds trials measured under another background load "
            f"({theirs.get('background')})",
            "resume with the same --background, or pick a new --out directory",
        )
    decided = ("rounds", "finalists", "confidence")
    if "rounds" in theirs and any(theirs.get(k) != mine[k] for k in decided):
        was = " ".join(f"--{k} {theirs.get(k)}" for k in decided)
        raise ConfigError(
            f"{request.out_dir} was tuned with {was}",
            "resume with the same --rounds, --finalists and --confidence, or pick a new --out directory",
        )


def claim_directory(request: TuneRequest) -> None:
    """Mark ``out_dir`` as this tune's (see :func:`check_claim`).

    Raises:
        ConfigError: the directory holds another tune's trials.
    """
    check_claim(request)
    request.out_dir.mkdir(parents=True, exist_ok=True)
    path = request.out_dir / REQUEST_FILE
    mine = request.claim()
    if path.is_file():
        try:
            if json.loads(path.read_text(encoding="utf-8")) == mine:
                return
        except ValueError:
            pass
    # New, or written before rounds were recorded (its search trials are still valid).
    atomic_write_text(path, json.dumps(mine, indent=2) + "\n")
