"""``--rounds auto``: the options refused in one line, and the verdicts that stop compare's rounds."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from tritongen.cli.main import app
from tritongen.compare import decisions
from tritongen.compare.result import CompareReport, EngineResult
from tritongen.errors import ConfigError
from tritongen.loadtest.rounds import Rounds
from tritongen.stopping import MIN_ROUNDS, StopRule, parse_margin, parse_rounds

from support.cli_output import error_line

runner = CliRunner()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--rounds", "auto", "--max-rounds", "1"), "--rounds auto with --max-rounds 1: it decides from 3"),
        (("--equivalence", "60%"), "--equivalence 60% is outside (0, 50%)"),
        (("--equivalence", "0"), "--equivalence 0 is outside (0, 50%)"),
        (("--equivalence", "lots"), "--equivalence 'lots' is not a share"),
        (("--rounds", "many"), "--rounds 'many' is neither a number nor auto"),
        (("--rounds", "auto", "--max-minutes", "0"), "--max-minutes 0 must be positive"),
        (("--busy-repeats", "-1"), "--busy-repeats -1 must not be negative"),
    ],
)
def test_compare_refuses_a_rule_that_cannot_decide(
    tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    source = tmp_path / "m.onnx"
    source.write_bytes(b"not read: the options are checked first")
    out = tmp_path / "out"
    result = runner.invoke(app, ["compare", str(source), *args, "--out", str(out)])
    assert result.exit_code == 1
    assert message in error_line(result.stderr)
    assert not out.exists()  # nothing built, nothing measured


def test_loadtest_takes_a_number_of_rounds(tmp_path: Path) -> None:
    result = runner.invoke(app, ["loadtest", "m", "--rounds", "auto", "--json", str(tmp_path / "x.json")])
    assert result.exit_code == 1
    assert "--rounds auto is compare's" in error_line(result.stderr)
    assert not (tmp_path / "x.json").exists()


def test_the_options_read_as_written() -> None:
    assert parse_rounds("auto") == "auto" and parse_rounds("AUTO ") == "auto" and parse_rounds("4") == 4
    assert parse_rounds(None) is None
    assert parse_margin("5%") == pytest.approx(0.05) and parse_margin("0.1") == pytest.approx(0.1)
    assert "cap 20 rounds or 10 min" in StopRule(20, 10.0, 0.05).text()


def _engines(truth: dict[str, float], n: int, cv: float, seed: int = 0) -> tuple[list[EngineResult], Rounds]:
    """Engines whose true throughput is ``truth[model]`` after ``n`` rounds with noise ``cv`` (seeded)."""
    rng = np.random.default_rng(seed)
    engines = [EngineResult(format=model.split("_")[-1], model=model) for model in truth]
    for engine in engines:
        engine.round_figures = {"p99_ms_b1": [], "infer_per_s_b32": []}
    for _ in range(n):
        for engine in engines:
            engine.round_figures["p99_ms_b1"].append(1.0 * float(np.exp(rng.normal(0, cv))))
            engine.round_figures["infer_per_s_b32"].append(
                truth[engine.model] * float(np.exp(rng.normal(0, cv)))
            )
    return engines, Rounds(runs={}, completed=n)


def test_pairs_are_open_until_the_first_look_then_decided() -> None:
    rule = StopRule(max_rounds=20, margin=0.05)
    engines, _ = _engines({"m_onnx": 2000, "m_tvm": 1000}, MIN_ROUNDS - 1, 0.02)
    early = decisions.pair_verdicts(engines, rule, 0.95)
    assert len(early) == 2 and all(v.decision is None for _, v in early)
    assert "pair(s) open" in decisions.progress_text(early)
    engines, _ = _engines({"m_onnx": 2000, "m_tvm": 1000}, 8, 0.02)
    later = decisions.pair_verdicts(engines, rule, 0.95)
    verdicts = {name.split(":")[0]: v for name, v in later}
    # Twice the throughput is a difference; the same P99 (2% noise) is equivalent within 5%.
    assert verdicts["throughput"].decision == "different" and verdicts["throughput"].ratio is not None
    assert verdicts["throughput"].ratio.low is not None and verdicts["throughput"].ratio.low > 1.5
    assert verdicts["P99 at batch 1"].decision == "equivalent"
    assert decisions.progress_text(later) == "every pair decided"


def test_the_record_says_why_the_rounds_stopped_and_judges_at_the_spent_level() -> None:
    rule = StopRule(max_rounds=4, margin=0.05)
    engines, rounds = _engines({"m_onnx": 1000, "m_tvm": 1000}, 4, 0.3)  # noisy: nothing decided in 4
    found = decisions.record(engines, rounds, rule, 0.95)
    assert found["stopped"] == "--max-rounds 4 reached" and found["rounds"] == 4
    assert found["confidence"] == pytest.approx(1 - 0.05 / 2)  # an equal share of each of looks 3 and 4
    assert {p["decision"] for p in found["pairs"]} <= {"undecided", "different", "equivalent"}
    report = CompareReport(source="m", name="m", hardware={}, settings={"stopping": found}, engines=engines)
    assert report.verdict_confidence() == pytest.approx(found["confidence"])
    rounds.stopped_by = "decided"
    assert decisions.record(engines, rounds, rule, 0.95)["stopped"] == "every pair decided"
    assert decisions.record(engines[:1], rounds, rule, 0.95)["stopped"] == "one engine: no pair to decide"


def test_rounds_decide_the_ranked_figure_and_report_the_other() -> None:
    """Ranked by throughput, a noisy P99 leaves nothing open; its pairs are reported with their interval."""
    rule = StopRule(max_rounds=8, margin=0.05)
    engines, rounds = _engines({"m_onnx": 2000, "m_tvm": 1000}, 5, 0.02)
    for engine in engines:  # a P99 too noisy for any decision in 5 rounds
        engine.round_figures["p99_ms_b1"] = (
            [1.0, 2.0, 0.5, 1.5, 0.8] if engine.model == "m_onnx" else [1.0] * 5
        )
    figures = decisions.decided_figures((), "throughput")
    assert figures == ("infer_per_s_b32",)
    deciding = decisions.pair_verdicts(engines, rule, 0.95, figures=figures)
    assert [name.split(":")[0] for name, _ in deciding] == ["throughput"]
    assert decisions.progress_text(deciding) == "every pair decided"
    both = decisions.pair_verdicts(
        engines, rule, 0.95, figures=decisions.decided_figures(("latency", "throughput"), "x")
    )
    # That P99 spreads ±50% a round: no cap of 8 rounds could resolve it, so it is not held open.
    p99 = [verdict for name, verdict in both if name.startswith("P99 at batch 1")]
    assert [v.decision for v in p99] == ["unresolvable"]
    assert decisions.progress_text(both) == "every pair decided"
    found = decisions.record(engines, rounds, rule, 0.95, figures)
    assert [p["pair"].split(":")[0] for p in found["pairs"]] == ["throughput"]
    assert [p["decision"] for p in found["other_pairs"]] == ["unresolvable"]
    assert found["decided_on"] == ["throughput"] and found["rule"].endswith(", on throughput")
    assert decisions.decided_figures((), "memory") == ("p99_ms_b1",)
    with pytest.raises(ConfigError, match="--decide memory: rounds decide only latency and throughput"):
        decisions.decided_figures(("memory",), "throughput")


def test_compare_refuses_an_unknown_figure_to_decide(tmp_path: Path) -> None:
    source = tmp_path / "m.onnx"
    source.write_bytes(b"not read: the request is checked first")
    out = tmp_path / "out"
    result = runner.invoke(app, ["compare", str(source), "--decide", "speed", "--out", str(out)])
    assert result.exit_code == 1
    assert "--decide speed: rounds decide only latency and throughput" in error_line(result.stderr)
    assert not out.exists()
