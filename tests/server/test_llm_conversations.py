"""``loadtest --sessions``: chat sessions against the real server, each turn sending the history so far."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tritongen.cli.main import app
from tritongen.server.local import LocalTritonServer

from support.text_model import recording_text_model

pytestmark = pytest.mark.slow
runner = CliRunner()
WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"]


def test_each_turn_sends_the_history_so_far(
    triton_server: LocalTritonServer, served_repository: Path, tmp_path: Path
) -> None:
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("".join(json.dumps({"text": f"{word} {n}"}) + "\n" for n, word in enumerate(WORDS)))
    record, out = tmp_path / "seen.jsonl", tmp_path / "run.json"
    with recording_text_model(triton_server, served_repository, record) as model:
        result = runner.invoke(
            app,
            ["loadtest", model, "--url", triton_server.http_url, "--metrics-url", triton_server.metrics_url,
             "--api", "triton-generate", "--prompts", str(prompts), "--output-tokens", "3",
             "--sessions", "2", "--turns", "3", "--think-time", "20", "--duration", "3s", "--warmup", "0.5s",
             "--max-duration", "3s", "--json", str(out)],
            env={"COLUMNS": "200"},
        )  # fmt: skip
    assert result.exit_code == 0, result.stdout + result.stderr
    texts = [json.loads(line)["text"] for line in record.read_text().splitlines()]
    by_turn: dict[int, int] = {}
    for text in texts:
        lines = text.split("\n")
        assert len(lines) in (1, 3, 5)  # a turn: the earlier messages and answers, then its new message
        by_turn[len(lines) // 2 + 1] = by_turn.get(len(lines) // 2 + 1, 0) + 1
        for asked, answer in zip(lines[0::2], lines[1::2], strict=False):
            words = asked.split() if asked is lines[0] else (lines[0] + " " + asked).split()
            assert answer.split() and set(answer.split()) <= set(" ".join(lines).split())
            assert answer.split()[0] == words[0]  # the model echoes the input's first words: its answer
    assert by_turn[1] >= by_turn.get(3, 0) > 0 and by_turn[2] > 0
    (run,) = json.loads(out.read_text())["runs"]
    assert run["concurrency"] == 2 and run["errors"] == 0
    first, later = run["latencies_us"]["ttft_first_turn"], run["latencies_us"]["ttft_later_turns"]
    assert first["p50"] > 0 and later["p50"] > 0
    assert "sessions: first turns' TTFT" in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--turns", "3"], "--turns applies with --sessions"),
        (["--sessions", "2", "--concurrency", "4"], "--concurrency does not apply"),
        (["--sessions", "2", "--think-time", "-5"], "--think-time must not be negative"),
        (["--sessions", "2", "--turns", "zero"], "--turns 'zero' is not MEAN[:SD]"),
    ],
)
def test_bad_session_options_are_refused(
    triton_server: LocalTritonServer, args: list[str], message: str
) -> None:
    result = runner.invoke(
        app, ["loadtest", "text_tokens", "--url", triton_server.http_url, "--api", "triton-generate",
              "--prompts", "missing.jsonl", *args],
    )  # fmt: skip
    assert result.exit_code == 1
    assert message in " ".join((result.stdout + result.stderr).split())
