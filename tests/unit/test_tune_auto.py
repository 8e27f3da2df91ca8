"""``tune --rounds auto``: the options refused in one line, and the verdicts that stop the confirmation.

The confirmation's decisions are each finalist's throughput over the current config's, paired
by round; the rounds stop once every finalist still in the running is decided by
:func:`tritongen.stopping.judge` at the level spent at that look. The figures here are
synthetic (seeded), judged as ``measure_rounds`` would have measured them.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tritongen.cli.main import app
from tritongen.client.address import ServerAddress
from tritongen.loadtest.result import RunResult
from tritongen.loadtest.rounds import Rounds
from tritongen.loadtest.spec import LoadSpec
from tritongen.report.tune_tables import tune_table
from tritongen.stopping import FUTILITY_FROM, MIN_ROUNDS, Ending, StopRule, judge, record, spent_confidence
from tritongen.tune.confirm import Confirmation, Entry
from tritongen.tune.confirm import judge as judge_rounds
from tritongen.tune.document import TuneDocument
from tritongen.tune.report import TuneReport
from tritongen.tune.request import TuneRequest, check_claim, claim_directory, plan
from tritongen.tune.space import Candidate, Current, SearchSpace

from support.cli_output import error_line

runner = CliRunner()
RULE = StopRule(max_rounds=20, margin=0.05)
CURRENT = Current(16, dynamic_batching=False)
QUICK = Candidate(16, None, 500, 1)
SAME = Candidate(16, None, 0, 1)
BROKEN = Candidate(16, (8, 16), 2000, 2)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--rounds", "auto", "--max-rounds", "1"), "--rounds auto with --max-rounds 1: it decides from 3"),
        (("--max-rounds", "2"), "--rounds auto with --max-rounds 2"),  # auto is tune's default
        (("--equivalence", "60%"), "--equivalence 60% is outside (0, 50%)"),
        (("--rounds", "auto", "--equivalence", "0"), "--equivalence 0 is outside (0, 50%)"),
        (("--rounds", "auto", "--max-minutes", "0"), "--max-minutes 0 must be positive"),
        (("--rounds", "often"), "--rounds 'often' is neither a number nor auto"),
    ],
)
def test_tune_refuses_a_rule_that_cannot_decide(tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    out = tmp_path / "out"
    result = runner.invoke(app, ["tune", "m", "--repo", str(tmp_path / "repo"), *args, "--out", str(out)])
    assert result.exit_code == 1
    assert message in error_line(result.stderr)
    assert not out.exists()  # nothing read, nothing measured


def test_a_number_of_rounds_ignores_the_rule() -> None:
    # A count keeps working as before: the caps and margin of auto are not read.
    result = runner.invoke(app, ["tune", "m", "--repo", "/nonexistent", "--rounds", "3", "--max-rounds", "1"])
    assert result.exit_code == 1
    assert "--max-rounds" not in error_line(result.stderr)


def _run(infer_per_s: float, number: int, failed: bool = False) -> RunResult:
    return RunResult(
        mode="concurrency", concurrency=8, target_rate=None, batch_size=1, duration_s=1.0,
        requests=int(infer_per_s), errors=5 if failed else 0, errors_by_kind={"timeout": 5} if failed else {},
        qps=infer_per_s, infer_per_s=infer_per_s,
        latency_us={"p50": 2e3, "p90": 3.2e3, "p95": 3.6e3, "p99": 4e3, "p999": 4.8e3, "mean": 2e3},
        server_us=None, avg_batch=None, stable=True, gpu=None, cpu=None, round=number,
    )  # fmt: skip


def _rounds(gains: dict[Candidate | Current, float], n: int, cv: float, seed: int = 0) -> Rounds:
    """``n`` rounds of the current config (1,000/s) and finalists ``gain`` times faster, noise ``cv``."""
    rng = random.Random(seed)
    runs: dict[str, list[RunResult]] = {c.key: [] for c in gains}
    for number in range(1, n + 1):
        speed = rng.uniform(0.8, 1.1)  # drift of the machine, shared by the round
        for contender, gain in gains.items():
            value = 1000.0 * gain * speed * rng.gauss(1.0, cv)
            runs[contender.key].append(_run(value, number, failed=contender == BROKEN and number == 2))
    return Rounds(runs=runs, completed=n)


def _judge(rounds: Rounds, final: bool = False, rule: StopRule | None = RULE) -> Confirmation:
    entries = [Entry(key, CURRENT if key == CURRENT.key else _by_key(key), 8.0) for key in rounds.runs]
    asked = rule.max_rounds if rule is not None else rounds.completed
    return judge_rounds(rounds, entries, asked, slo_p99_ms=10.0, rule=rule, final=final)


def _by_key(key: str) -> Candidate:
    return next(c for c in (QUICK, SAME, BROKEN) if c.key == key)


def _first(rounds: Rounds, n: int) -> Rounds:
    """The first ``n`` rounds of ``rounds``."""
    return Rounds(runs={key: runs[:n] for key, runs in rounds.runs.items()}, completed=n)


def _until_decided(gains: dict[Candidate | Current, float], cv: float, seed: int) -> Confirmation:
    """Add rounds until the confirmation is decided or at the cap, as the tune's rounds do."""
    every = _rounds(gains, RULE.max_rounds, cv, seed)
    for n in range(1, RULE.max_rounds):
        if _judge(_first(every, n)).decided:
            so_far = _first(every, n)
            so_far.stopped_by = "decided"
            return _judge(so_far, final=True)
    return _judge(every, final=True)


def test_nothing_is_decided_before_the_first_look() -> None:
    early = _judge(_rounds({CURRENT: 1.0, QUICK: 1.9}, MIN_ROUNDS - 1, cv=0.01))
    quick = early.finalists[0]
    assert quick.verdict is not None and quick.verdict.decision is None and not early.decided
    assert not quick.beats_current  # 1.9x at two rounds is not yet a decision


def test_a_real_gain_stops_the_rounds_at_the_first_look_and_wins_at_the_spent_level() -> None:
    confirmation = _until_decided({CURRENT: 1.0, QUICK: 1.9}, cv=0.02, seed=1)
    assert confirmation.completed == MIN_ROUNDS and confirmation.finished
    quick = confirmation.finalists[0]
    assert quick.verdict is not None and quick.verdict.decision == "different"
    assert quick.ratio is not None and quick.ratio.confidence == pytest.approx(
        spent_confidence(MIN_ROUNDS, last=RULE.max_rounds)
    )
    assert confirmation.winner is quick
    found = confirmation.stopping_record()
    assert found is not None and found["stopped"] == "every pair decided" and found["rounds"] == MIN_ROUNDS
    assert found["confidence"] == pytest.approx(1 - 0.05 / (RULE.max_rounds - MIN_ROUNDS + 1))
    assert [p["decision"] for p in found["pairs"]] == ["different"]
    assert found["pairs"][0]["pair"] == f"throughput: {QUICK.key} vs current"


def test_an_equal_finalist_is_equivalent_and_the_current_config_stays() -> None:
    confirmation = _until_decided({CURRENT: 1.0, SAME: 1.0}, cv=0.001, seed=2)
    same = confirmation.finalists[0]
    assert same.verdict is not None and same.verdict.decision == "equivalent"
    assert confirmation.completed < RULE.max_rounds and confirmation.winner is None
    assert same.verdict.text().startswith("equivalent within 5%: ")


def test_a_tie_not_yet_equivalent_is_dropped_at_the_first_look_it_cannot_beat_the_current_config() -> None:
    """±0.5% a round: by round 3 the spent interval is still wider than ±5%, but the cap could not
    show a gain either: tune's one-sided question is answered, the rounds end there."""
    confirmation = _until_decided({CURRENT: 1.0, SAME: 1.0}, cv=0.005, seed=2)
    same = confirmation.finalists[0]
    assert confirmation.completed == FUTILITY_FROM["greater"] == MIN_ROUNDS and confirmation.winner is None
    assert same.verdict is not None and same.verdict.decision == "unresolvable"
    assert same.verdict.resolvable is not None and same.verdict.resolvable < 0.05


def test_noise_the_cap_cannot_resolve_ends_the_rounds_early_with_the_interval_reached() -> None:
    """±30% a round: no 20 rounds could show a 3% gain, so the finalist is dropped within a few."""
    confirmation = _until_decided({CURRENT: 1.0, SAME: 1.03}, cv=0.3, seed=3)
    same = confirmation.finalists[0]
    assert confirmation.completed < 8 and confirmation.finished
    assert same.verdict is not None and same.verdict.decision == "unresolvable"
    assert same.verdict.text().startswith("no difference this machine can resolve (±")
    assert confirmation.winner is None
    found = confirmation.stopping_record()
    assert found is not None and found["stopped"] == "every pair decided"
    assert [p["decision"] for p in found["pairs"]] == ["unresolvable"]


def test_a_finalist_still_in_doubt_at_the_cap_is_undecided() -> None:
    """At the cap nothing is projected: what is not decided there is undecided."""
    rule = StopRule(max_rounds=FUTILITY_FROM["both"], margin=0.05)
    every = _rounds({CURRENT: 1.0, SAME: 1.03}, rule.max_rounds, 0.3, seed=3)
    same = _judge(every, final=True, rule=rule).finalists[0]
    assert same.verdict is not None and same.verdict.decision == "undecided"
    assert same.verdict.text().startswith("undecided: ")


def test_a_finalist_that_missed_a_round_holds_no_round_open() -> None:
    # BROKEN failed round 2: it can never be chosen, so only QUICK's decision is waited for.
    confirmation = _judge(_rounds({CURRENT: 1.0, QUICK: 1.9, BROKEN: 1.0}, MIN_ROUNDS, cv=0.02, seed=4))
    quick, broken = confirmation.finalists
    assert quick.verdict is not None and quick.verdict.decision == "different"
    assert broken.missed_a_round and not broken.eligible and confirmation.decided
    assert confirmation.verdicts[1][0] == f"throughput: {BROKEN.key} vs current (out: a round failed)"


def test_a_finalist_that_cannot_beat_the_current_config_is_dropped_and_its_verdict_stands() -> None:
    """SAME is a tie and cannot beat the current config from the first look: the rounds that follow
    measure the current config and QUICK (still open) alone; SAME's verdict rests on its rounds."""
    every = _rounds({CURRENT: 1.0, SAME: 1.0, QUICK: 1.08}, 8, cv=0.02, seed=6)
    first = _judge(_first(every, MIN_ROUNDS))
    same, quick = first.finalists
    assert same.verdict is not None and same.verdict.decision in ("equivalent", "unresolvable")
    assert quick.verdict is not None and quick.verdict.decision is None and not first.decided
    assert first.measured_next == {CURRENT.key, QUICK.key}
    later = Rounds(
        runs={**every.runs, SAME.key: every.runs[SAME.key][:MIN_ROUNDS]}, completed=8, stopped_by="decided"
    )
    confirmation = _judge(later, final=True)
    dropped, kept = confirmation.finalists
    assert (
        dropped.verdict == same.verdict and dropped.ratio is not None and dropped.ratio.rounds == MIN_ROUNDS
    )
    assert kept.ratio is not None and kept.ratio.rounds == 8 and kept.beats_current
    assert confirmation.winner is kept and confirmation.measured_next == {CURRENT.key, QUICK.key}


def _applied(gain: float, trials: int, seed: int) -> float:
    """The share of simulated ``--rounds auto`` confirmations (two finalists, one ``gain`` faster) applied."""
    applied = 0
    for trial in range(trials):
        gains: dict[Candidate | Current, float] = {CURRENT: 1.0, QUICK: gain, SAME: 1.0}
        applied += _until_decided(gains, cv=0.05, seed=seed * 100_000 + trial).winner is not None
    return applied / trials


def test_stopping_early_keeps_the_error_rate_and_finds_a_real_gain() -> None:
    # Two finalists equal to the current config: each is applied with a chance of at most
    # (1 - 0.95) / 2 over all looks, 5% for both (the bound leaves two standard errors of 150).
    assert _applied(1.0, trials=150, seed=5) <= 0.09
    assert _applied(1.2, trials=50, seed=6) >= 0.9


def test_the_rounds_stopped_when_the_last_round_decided_everything() -> None:
    decided = judge([1.2, 1.21, 1.19], [1.0, 1.0, 1.0], final=True)
    ending = Ending(completed=3)  # the count ran out on the round that decided
    assert record(RULE, [("a", decided)], ending, 0.95)["stopped"] == "every pair decided"
    assert record(RULE, [], ending, 0.95)["stopped"] == "no pair to decide"
    assert record(RULE, [("a", decided)], Ending(2, status="interrupted"), 0.95)["stopped"] == (
        "rounds interrupted"
    )


def _request(tmp: Path, **changes: object) -> TuneRequest:
    load = LoadSpec(
        model="m", address=ServerAddress.parse("localhost:8000"), levels=(8,), duration_s=2.0, warmup_s=1.0
    )
    fields: dict[str, object] = {
        "model": "m",
        "space": SearchSpace((16,), (None,), (0, 500), (1,)),
        "load": load,
        "slo_p99_ms": 10.0,
        "strategy": "grid",
        "out_dir": tmp,
        "rounds": RULE.max_rounds,
        "stopping": RULE,
        **changes,
    }
    return TuneRequest(**fields)  # type: ignore[arg-type]


def test_the_report_records_the_stopping_and_the_verdict_its_level(tmp_path: Path) -> None:
    report = TuneReport(request=_request(tmp_path))
    report.confirmation = _until_decided({CURRENT: 1.0, QUICK: 1.9}, cv=0.02, seed=1)
    doc = json.loads(json.dumps(report.to_json()))
    assert doc["rounds"] == "auto" and doc["decision"] == "apply"
    stopping = doc["confirmation"]["stopping"]
    assert stopping["stopped"] == "every pair decided" and stopping["rounds"] == 3
    assert stopping["max_rounds"] == 20 and stopping["margin"] == 0.05 and "rule" in stopping
    assert doc["confirmation"]["contenders"][QUICK.key]["decision"] == "different"
    assert "at 99.72% (the level spent at round 3: --rounds auto keeps 95%)" in doc["verdict"]
    notes = tune_table(TuneDocument.from_json(doc)).notes
    assert any(
        n.startswith("--rounds auto: 3 round(s), every pair decided; pairs judged at 99.72%") for n in notes
    )
    assert f"throughput: {QUICK.key} vs current: different: " in "\n".join(notes)


def test_the_keep_verdict_names_the_best_finalists_decision(tmp_path: Path) -> None:
    report = TuneReport(request=_request(tmp_path))
    report.confirmation = _until_decided({CURRENT: 1.0, SAME: 1.0}, cv=0.001, seed=2)
    assert report.decision == "keep"
    assert f"(best finalist {SAME.key}: equivalent within 5%: " in report.verdict()


def test_auto_is_claimed_as_auto_and_planned_between_the_first_look_and_the_cap(tmp_path: Path) -> None:
    request = _request(tmp_path / "t")
    claim_directory(request)
    assert json.loads((tmp_path / "t" / "tune-request.json").read_text())["rounds"] == "auto"
    with pytest.raises(Exception, match="was tuned with --rounds auto"):
        check_claim(_request(tmp_path / "t", rounds=5, stopping=None))
    cost = plan(request)
    assert cost.rounds == 20 and cost.auto
    assert "then 3 configs × 3 to 20 rounds, until each finalist is decided" in cost.text()
    assert "at the caps" in cost.text() and cost.max_seconds > cost.seconds


def test_a_rule_that_cannot_decide_is_refused_by_the_request(tmp_path: Path) -> None:
    with pytest.raises(Exception, match="--max-rounds 2"):
        _request(tmp_path, rounds=2, stopping=StopRule(max_rounds=2)).check()
