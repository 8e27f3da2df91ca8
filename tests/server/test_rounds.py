"""Interleaved rounds on the real server: an identical copy is a tie, a slower copy is found slower.

The sleep models answer after a fixed sleep (12 ms, an identical 12 ms copy, 18 ms), so the
truth is known: a copy that sleeps 50% longer serves fewer requests per second at
concurrency 1 (about 12 + o versus 18 + o ms per request, o the path's ~1 ms overhead),
and two identical copies differ only by the machine's noise.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tritongen.cli.main import app
from tritongen.client.address import ServerAddress
from tritongen.intervals import paired_ratio
from tritongen.loadtest.rounds import Contender, measure_rounds
from tritongen.loadtest.spec import LoadSpec
from tritongen.server.local import LocalTritonServer

pytestmark = pytest.mark.slow
ROUNDS = 4


def _spec(server: LocalTritonServer, model: str) -> LoadSpec:
    return LoadSpec(
        model=model,
        address=ServerAddress.parse(server.http_url, metrics_url=server.metrics_url),
        levels=(1,),
        duration_s=1.0,
        warmup_s=0.5,
        window_s=0.5,
    )


def test_identical_copy_is_a_tie_and_a_slower_copy_is_found_slower(triton_server: LocalTritonServer) -> None:
    names = ("sleep_const", "sleep_const_copy", "sleep_const_slow")
    started: list[tuple[int, str]] = []
    rounds = measure_rounds(
        [Contender(name, _spec(triton_server, name)) for name in names],
        ROUNDS,
        on_start=lambda number, _total, name: started.append((number, name)),
    )
    assert rounds.status == "ok" and rounds.completed == ROUNDS
    # Each round starts one place further on: A B C, B C A, C A B, …
    assert started == [(n, names[(i + n - 1) % 3]) for n in range(1, ROUNDS + 1) for i in range(3)]
    assert [r.round for r in rounds.runs["sleep_const"]] == list(range(1, ROUNDS + 1))

    def throughput(name: str) -> list[float | None]:
        return rounds.figures(name, lambda run: run.infer_per_s)

    same = paired_ratio(throughput("sleep_const_copy"), throughput("sleep_const"))
    slower = paired_ratio(throughput("sleep_const_slow"), throughput("sleep_const"))
    assert same is not None and slower is not None and same.rounds == slower.rounds == ROUNDS
    # The slower copy: found slower, with an interval that excludes 1 (truth ≈ 13/19 ≈ 0.68).
    assert slower.significant and slower.high is not None and slower.high < 1
    assert 0.55 < slower.estimate < 0.8
    # The identical copy: its interval holds 1 at a strict level; at 95% it is narrow around 1.
    strict = paired_ratio(throughput("sleep_const_copy"), throughput("sleep_const"), confidence=0.999)
    assert strict is not None and not strict.significant, strict.text()
    assert 0.9 < same.estimate < 1.1


def test_loadtest_rounds_interleave_levels_and_summarise_each(
    triton_server: LocalTritonServer, tmp_path: Path
) -> None:
    runner = CliRunner()
    result = runner.invoke(
        app,
        ["loadtest", "sleep_const", "--url", triton_server.http_url,
         "--metrics-url", triton_server.metrics_url, "--concurrency", "1,2",
         "--duration", "1s", "--warmup", "0.5s", "--rounds", "3",
         "--json", str(tmp_path / "r.json"), "--html", str(tmp_path / "r.html")],
        env={"COLUMNS": "200"},
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    assert "2 level(s) × 3 round(s), levels interleaved: 6 runs" in result.stderr  # the cost, said first
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["rounds"] == 3 and doc["confidence"] == 0.95
    assert [(r["concurrency"], r["round"]) for r in doc["runs"]] == [
        (1, 1),
        (2, 1),
        (1, 2),
        (2, 2),
        (1, 3),
        (2, 3),
    ]
    levels = {level["concurrency"]: level for level in doc["levels"]}
    assert set(levels) == {1, 2}
    for concurrency, level in levels.items():
        runs = [r for r in doc["runs"] if r["concurrency"] == concurrency]
        figure = level["infer_per_s"]
        assert level["rounds"] == 3 and figure["values"] == [r["infer_per_s"] for r in runs]
        assert figure["ci_low"] <= figure["median"] <= figure["ci_high"] and figure["cv"] >= 0
        p99 = level["latency_us"]["p99"]
        assert sorted(p99["values"]) == sorted(r["latency_us"]["p99"] for r in runs)
    # Two requests in flight on one 12 ms instance do not serve more than one: the server is the limit.
    assert levels[2]["latency_us"]["p50"]["median"] > levels[1]["latency_us"]["p50"]["median"]
    assert "over 3 rounds" in result.stdout and " ± " in result.stdout
    html = (tmp_path / "r.html").read_text()
    assert "over 3 rounds" in html and html.count("data:image/png;base64,") == 1


def test_rounds_and_confidence_are_checked_before_anything_runs(tmp_path: Path) -> None:
    runner = CliRunner()
    for args, message in (
        (["--rounds", "0"], "--rounds 0 must be at least 1"),
        (["--confidence", "0"], "--confidence 0.0 is not a level between 0 and 1"),
        (["--confidence", "1"], "--confidence 1.0 is not a level between 0 and 1"),
    ):
        out = tmp_path / "never.json"
        result = runner.invoke(app, ["loadtest", "m", "--url", "127.0.0.1:9", "--json", str(out), *args])
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert result.exit_code == 1 and len(lines) == 1 and message in lines[0], result.stderr
        assert not out.exists()
