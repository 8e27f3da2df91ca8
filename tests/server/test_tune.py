"""``tritongen tune`` against the real embedded server: live reloads, results, resume, apply."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tritongen.cli.main import app
from tritongen.client.control import ModelControl
from tritongen.server.local import LocalTritonServer
from tritongen.triton.proto import parse_config_text

from support.cli_output import error_line
from support.loads import QUICK_RUNS

runner = CliRunner()
MODEL = "mlp_onnx"
# The mechanics of a tune, not its figures.
FAST = [*QUICK_RUNS, "--concurrency", "4"]
QUICK_LOOK = ["--rounds", "1", "--finalists", "1"]  # the least confirmation: one round of one finalist


def _tune(server: LocalTritonServer, repo: Path, *args: str | Path) -> tuple[int, str, str]:
    result = runner.invoke(
        app, ["tune", MODEL, "--repo", str(repo), "--url", server.http_url, *FAST, *[str(a) for a in args]]
    )
    return result.exit_code, result.stdout, result.stderr


def _served_batching(server: LocalTritonServer) -> Any:
    control = ModelControl(server.http_url, MODEL)
    try:
        return control.served_config().get("dynamic_batching")
    finally:
        control.close()


def test_grid_tune_measures_every_legal_config_and_restores_the_model(
    triton_server: LocalTritonServer, served_repository: Path, tmp_path: Path
) -> None:
    before = _served_batching(triton_server)
    out = tmp_path / "tune"
    code, stdout, stderr = _tune(
        triton_server, served_repository, "--slo-p99-ms", "500", "--max-batch-size", "8,32",
        "--preferred-batch-sizes", "4,8;16", "--max-queue-delay-us", "200", "--instances", "1",
        "--strategy", "grid", "--out", out, "--json", tmp_path / "t.json", "--plot", tmp_path / "t.png",
        "--rounds", "auto", "--max-rounds", "3", "--finalists", "1",
        "--busy-repeats", "0",  # the tests beside this one would have every round measured again
    )  # fmt: skip
    assert code == 0, stderr
    data = json.loads((tmp_path / "t.json").read_text())
    assert data["schema"] == "tritongen.tune/2" and data["model"] == MODEL and data["strategy"] == "grid"
    assert data["rounds"] == "auto" and data["confidence"] == 0.95
    keys = [t["key"] for t in data["trials"]]
    assert keys == ["mb8-pb4.8-qd200-i1", "mb32-pb4.8-qd200-i1", "mb32-pb16-qd200-i1"]
    assert [s["reason"] for s in data["skipped"]] == ["preferred batch sizes 16 exceed max_batch_size 8"]
    # The baseline is the model's config.pbtxt as it is, measured like any trial.
    current = data["baseline"]["key"]
    assert current == "current-mb32-pb4.8.16-qd500-i1" and data["baseline"]["config"]["current"] is True
    assert (out / "trials" / current / "config.pbtxt").read_text() == (
        served_repository / MODEL / "config.pbtxt"
    ).read_text()
    assert all(t["feasible"] and t["infer_per_s"] > 0 and t["result"]["runs"] for t in data["trials"])
    for key in keys:
        assert "preferred_batch_size" in (out / "trials" / key / "config.pbtxt").read_text()
        assert (out / "trials" / key / "result.json").is_file()
    # The confirmation: the search's best and the current config in interleaved rounds until the
    # finalist is decided; --rounds auto looks first after round 3, the cap here, so 3 rounds each.
    (finalist,) = data["finalists"]
    assert finalist == max(data["trials"], key=lambda t: t["infer_per_s"])["key"]
    confirmation = data["confirmation"]
    contenders = confirmation["contenders"]
    assert list(contenders) == [current, finalist] and confirmation["completed_rounds"] == 3
    assert confirmation["rounds"] == 3
    for entry in contenders.values():
        assert [r["round"] for r in entry["runs"]] == [1, 2, 3]
        assert entry["infer_per_s"]["rounds"] == 3 and entry["infer_per_s"]["ci_low"] is not None
        assert entry["p99_us"]["median"] > 0 and entry["feasible"]
    # The record of the stopping: why the rounds stopped, at which spent level, the verdict.
    stopping = confirmation["stopping"]
    spent = 0.95  # a cap of 3 rounds: one look, which gets all of the error rate
    assert stopping["rounds"] == 3 and stopping["max_rounds"] == 3 and stopping["margin"] == 0.05
    assert stopping["stopped"] in ("every pair decided", "--max-rounds 3 reached")
    assert stopping["confidence"] == pytest.approx(spent)
    (pair,) = stopping["pairs"]
    assert pair["pair"] == f"throughput: {finalist} vs current"
    assert pair["decision"] in ("different", "equivalent", "undecided")
    assert (pair["decision"] == "undecided") is (stopping["stopped"] == "--max-rounds 3 reached")
    assert contenders[finalist]["decision"] == pair["decision"]
    ratio = contenders[finalist]["ratio"]
    assert ratio["rounds"] == 3 and ratio["ci_low"] <= ratio["estimate"] <= ratio["ci_high"]
    assert ratio["confidence"] == pytest.approx(spent)  # the interval of the look that decides
    applies = pair["decision"] == "different" and ratio["estimate"] > 1.0
    assert data["decision"] == ("apply" if applies else "keep")
    assert data["best"]["key"] == (finalist if applies else current)
    assert data["best"]["significant"] is applies
    assert data["verdict"] in stdout
    assert f"--rounds auto: 3 round(s), {stopping['stopped']}; pairs judged at 95.00%" in stdout
    assert f"{pair['pair']}: {pair['text']}" in stdout
    assert "interleaved rounds until each pair differs or is equivalent within 5% (cap 3 rounds" in stderr
    assert f"round 3 (at most 3): {finalist}" in stderr  # progress of the confirmation
    assert "pair(s) open; throughput: " in stderr or "every pair decided" in stderr
    assert (tmp_path / "t.png").stat().st_size > 0
    assert _served_batching(triton_server) == before  # back on its config.pbtxt


def test_resume_skips_finished_trials(
    triton_server: LocalTritonServer, served_repository: Path, tmp_path: Path
) -> None:
    out = tmp_path / "tune"
    args = ["--max-batch-size", "16", "--preferred-batch-sizes", "none", "--max-queue-delay-us", "0,500"]
    args += ["--instances", "1", "--strategy", "grid", *QUICK_LOOK]
    code, _, stderr = _tune(triton_server, served_repository, *args, "--out", out, "--max-trials", "1")
    assert code == 0, stderr
    first = json.loads((out / "tune.json").read_text())
    assert len(first["trials"]) == 1
    # Other rounds than the directory was measured with: refused in one line, nothing touched.
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    code, _, stderr = _tune(triton_server, served_repository, *args, "--resume", out, "--rounds", "3")
    assert code == 1 and error_line(stderr).endswith(
        "was tuned with --rounds 1 --finalists 1 --confidence 0.95. resume with the same --rounds, "
        "--finalists and --confidence, or pick a new --out directory."
    )
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    code, _, stderr = _tune(triton_server, served_repository, *args, "--resume", out)
    assert code == 0, stderr
    assert stderr.count("(reused)") == 2  # the baseline and the finished trial
    second = json.loads((out / "tune.json").read_text())
    assert [t["key"] for t in second["trials"]] == ["mb16-pbauto-qd0-i1", "mb16-pbauto-qd500-i1"]
    assert second["trials"][0]["infer_per_s"] == first["trials"][0]["infer_per_s"]


def test_resume_of_another_tune_is_refused(
    triton_server: LocalTritonServer, served_repository: Path, tmp_path: Path
) -> None:
    out = tmp_path / "tune"
    out.mkdir()
    (out / "tune-request.json").write_text(json.dumps({"model": "other"}))
    code, _, stderr = _tune(triton_server, served_repository, "--resume", out, "--max-trials", "1")
    assert code == 1
    assert "holds trials of another tune" in stderr


BATCHED = "batch_sleep"
BATCH_SLEEP_MODEL_PY = """
import time

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        time.sleep(0.03)  # once per execution, however many requests the batcher put in it
        inputs = [pb_utils.get_input_tensor_by_name(r, "x").as_numpy() for r in requests]
        return [pb_utils.InferenceResponse([pb_utils.Tensor("y", x)]) for x in inputs]
"""
# Concurrency 8 against a model that sleeps 30 ms per execution: without dynamic batching
# (its config) each request is an execution, about 33 infer/s; with it, one execution
# serves up to 8 queued requests, several times that. A gain no noise can hide.
# Each run measures 1 s in two 0.5 s windows (it does not wait for stability): about 33 requests
# without batching, several times that with it.
ON_BATCHED = [
    "--duration", "1s", "--warmup", "0.5s", "--window", "0.5s", "--max-duration", "1s",
    "--concurrency", "8", "--max-batch-size", "8",
    "--preferred-batch-sizes", "none", "--max-queue-delay-us", "1000", "--instances", "1",
]  # fmt: skip


@pytest.fixture(scope="module")
def batching_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalTritonServer, Path]]:
    """A server with one model where dynamic batching matters, whatever the machine's noise."""
    from tritongen.triton.model_config import InstanceGroup, ModelConfig, ModelInput, ModelOutput
    from tritongen.triton.render import render_config

    repo = tmp_path_factory.mktemp("batching") / "repo"
    (repo / BATCHED / "1").mkdir(parents=True)
    (repo / BATCHED / "1" / "model.py").write_text(BATCH_SLEEP_MODEL_PY)
    config = ModelConfig(
        name=BATCHED, backend="python", max_batch_size=8,
        input=[ModelInput(name="x", data_type="TYPE_FP32", dims=[4])],
        output=[ModelOutput(name="y", data_type="TYPE_FP32", dims=[4])],
        instance_group=[InstanceGroup(count=1, kind="KIND_CPU")],
    )  # fmt: skip
    (repo / BATCHED / "config.pbtxt").write_text(render_config(config))
    with LocalTritonServer(repo, http_port=0, grpc_port=0, metrics_port=0) as server:
        yield server, repo


def _served(server: LocalTritonServer, model: str) -> dict[str, Any]:
    control = ModelControl(server.http_url, model)
    try:
        return control.served_config()
    finally:
        control.close()


def test_apply_writes_a_config_that_beat_the_current_one_significantly(
    batching_server: tuple[LocalTritonServer, Path], tmp_path: Path
) -> None:
    server, repo = batching_server
    config = repo / BATCHED / "config.pbtxt"
    original = config.read_text()
    try:
        result = runner.invoke(
            app,
            # Three rounds: with two, the t interval is ±9 standard deviations of the per-round
            # log ratio, and a busy machine can widen even a 5× gain's interval past 1.
            ["tune", BATCHED, "--repo", str(repo), "--url", server.http_url, *ON_BATCHED, "--rounds", "3",
             "--out", str(tmp_path / "t"), "--json", str(tmp_path / "t.json"), "--apply"],
        )  # fmt: skip
        assert result.exit_code == 0, result.stderr
        doc = json.loads((tmp_path / "t.json").read_text())
        current, finalist = "current-mb8-nodb-i1", "mb8-pbauto-qd1000-i1"
        assert list(doc["confirmation"]["contenders"]) == [current, finalist]
        gain = doc["best"]["gain_over_baseline"]
        assert doc["decision"] == "apply" and doc["best"]["key"] == finalist and doc["best"]["significant"]
        assert gain["significant"] and gain["ci_low"] > 1.0 and gain["rounds"] == 3
        verdict = doc["verdict"]
        assert verdict.startswith(f"best: {finalist} ") and "the baseline (current config)" in verdict
        assert verdict in result.stdout
        assert (
            f"applied {finalist}: rewrote {config} from the templates: dynamic_batching added"
            in result.stdout
        )
        assert (repo / BATCHED / "config.pbtxt.bak").read_text() == original
        applied = config.read_text()
        assert "dynamic_batching" in applied and "max_queue_delay_microseconds: 1000" in applied
        assert _served(server, BATCHED)["dynamic_batching"]["max_queue_delay_microseconds"] == 1000  # live
    finally:
        config.write_text(original)
        (repo / BATCHED / "config.pbtxt.bak").unlink(missing_ok=True)
        control = ModelControl(server.http_url, BATCHED)
        control.load(parse_config_text(original))
        control.close()


def test_under_a_replayed_trace_the_lower_p99_decides(
    batching_server: tuple[LocalTritonServer, Path], tmp_path: Path
) -> None:
    """Bursts of 8 requests every 0.5 s: every config serves them; batching serves a burst at once.

    Without dynamic batching a burst is 8 executions of 30 ms one after the other (its last
    request waits about 240 ms, the queue empty before the next burst); with it, about one
    execution (a queue delay of 5 ms gathers a burst whose sends a busy machine spreads out). A
    last request at 2 s keeps the run until every burst is answered, so no reload meets requests
    still queued. The warm-up (0.75 s of the trace's end) holds the burst at 1.5 s: a reloaded
    model's first batched burst ran 2-3x slower, and a warm-up of the lone last request left
    that to the measured run (P99s of 37 to 104 ms for batching, its gain's interval below 1).
    """
    server, repo = batching_server
    trace = tmp_path / "bursts.jsonl"
    lines = [json.dumps({"time_s": burst / 2}) for burst in range(4) for _ in range(8)]
    lines.append(json.dumps({"time_s": 2.0}))
    trace.write_text("\n".join(lines) + "\n")
    result = runner.invoke(
        app,
        ["tune", BATCHED, "--repo", str(repo), "--url", server.http_url, "--trace", str(trace),
         "--warmup", "0.75s", "--max-batch-size", "8", "--preferred-batch-sizes", "none",
         "--max-queue-delay-us", "5000", "--instances", "1", "--rounds", "3",
         "--out", str(tmp_path / "t"), "--json", str(tmp_path / "t.json")],
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    doc = json.loads((tmp_path / "t.json").read_text())
    current, finalist = "current-mb8-nodb-i1", "mb8-pbauto-qd5000-i1"
    contenders = doc["confirmation"]["contenders"]
    assert doc["confirmation"]["judged_by"] == "p99" and list(contenders) == [current, finalist]
    assert all(r["errors"] == 0 for c in contenders.values() for r in c["runs"])
    runs = [c["runs"] for c in contenders.values()]
    assert all(r["requests"] >= 33 for r in runs[0] + runs[1])  # the pass all answered (and a warm-up's last)
    gain = doc["best"]["gain_over_baseline"]  # the current config's P99 over the winner's
    assert doc["decision"] == "apply" and doc["best"]["key"] == finalist and gain["ci_low"] > 1.0
    assert contenders[finalist]["p99_us"]["median"] < contenders[current]["p99_us"]["median"]
    assert "lower P99 than the baseline (current config)" in doc["verdict"]
    assert "every trial replays trace bursts.jsonl" in result.stdout


def test_a_trace_sets_the_rate_so_a_level_or_a_search_is_refused(
    batching_server: tuple[LocalTritonServer, Path], tmp_path: Path
) -> None:
    server, repo = batching_server
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"time_s": 0}\n')
    base = ["tune", BATCHED, "--repo", str(repo), "--url", server.http_url, "--trace", str(trace)]
    for extra, words in (
        (["--concurrency", "4"], "--trace sets its own rate: --concurrency does not apply"),
        (["--find-max", "--slo-p99-ms", "50"], "--find-max searches the load's level: --trace sets its own"),
        (["--arrival", "poisson"], "--trace sends at the recorded times: --arrival poisson does not apply"),
    ):
        result = runner.invoke(app, [*base, *extra, "--out", str(tmp_path / "o")])
        assert result.exit_code == 1 and words in error_line(result.stderr), result.stderr
        assert not (tmp_path / "o").exists()


HAND_WRITTEN = f"""# Sleeps per batch, not per request: batching is what makes it fast.
name: "{BATCHED}"
backend: "python"
max_batch_size: 8
input [ {{ name: "x", data_type: TYPE_FP32, dims: [ 4 ] }} ]
output [ {{ name: "y", data_type: TYPE_FP32, dims: [ 4 ] }} ]
instance_group [ {{ count: 1, kind: KIND_CPU }} ]  # one copy
"""


def test_apply_diff_shows_the_winner_as_an_edit_of_a_hand_written_config_and_writes_nothing(
    batching_server: tuple[LocalTritonServer, Path], tmp_path: Path
) -> None:
    server, repo = batching_server
    config = repo / BATCHED / "config.pbtxt"
    original = config.read_text()
    config.write_text(HAND_WRITTEN)
    try:
        result = runner.invoke(
            app,
            ["tune", BATCHED, "--repo", str(repo), "--url", server.http_url, *ON_BATCHED, "--rounds", "3",
             "--out", str(tmp_path / "t"), "--apply", "--diff"],
        )  # fmt: skip
        assert result.exit_code == 0, result.stderr
        doc = json.loads((tmp_path / "t" / "tune.json").read_text())
        assert doc["decision"] == "apply", doc["verdict"]
        hunk = (
            ' output [ { name: "y", data_type: TYPE_FP32, dims: [ 4 ] } ]\n'
            "+dynamic_batching {\n+  max_queue_delay_microseconds: 1000\n+}\n"
            " instance_group [ { count: 1, kind: KIND_CPU } ]  # one copy\n"
        )
        assert f"--- {config}\n+++ {config}\n" in result.stdout and hunk in result.stdout
        assert "not written (--diff): dynamic_batching added" in result.stderr
        assert config.read_text() == HAND_WRITTEN and not (repo / BATCHED / "config.pbtxt.bak").exists()
        assert "dynamic_batching" not in _served(server, BATCHED)  # nothing loaded either
    finally:
        config.write_text(original)


def test_apply_is_refused_in_one_line_without_a_significant_gain(
    batching_server: tuple[LocalTritonServer, Path], tmp_path: Path
) -> None:
    # One round (a quick look) has no interval: nothing is significant, however large the gain.
    server, repo = batching_server
    config = repo / BATCHED / "config.pbtxt"
    original = config.read_text()
    result = runner.invoke(
        app,
        ["tune", BATCHED, "--repo", str(repo), "--url", server.http_url, *ON_BATCHED, "--rounds", "1",
         "--out", str(tmp_path / "t"), "--apply"],
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    doc = json.loads((tmp_path / "t" / "tune.json").read_text())
    assert doc["decision"] == "keep" and doc["best"]["key"] == "current-mb8-nodb-i1"
    assert doc["confirmation"]["contenders"]["mb8-pbauto-qd1000-i1"]["ratio"]["ci_low"] is None
    assert "keep the current config: one round is a quick look" in result.stdout
    refusals = [line for line in result.stdout.splitlines() if line.startswith("not applied")]
    assert refusals == [f"not applied: no config beat the current one significantly; {config} is unchanged"]
    assert config.read_text() == original and not (repo / BATCHED / "config.pbtxt.bak").exists()
    assert "dynamic_batching" not in _served(server, BATCHED)


@pytest.mark.slow
def test_ctrl_c_during_the_confirmation_restores_the_config_and_keeps_the_rounds(
    batching_server: tuple[LocalTritonServer, Path], tmp_path: Path
) -> None:
    server, repo = batching_server
    out = tmp_path / "tune"
    cli = subprocess.Popen(
        [sys.executable, "-m", "tritongen", "tune", BATCHED, "--repo", str(repo), "--url", server.http_url,
         *ON_BATCHED, "--rounds", "3", "--out", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    lines: list[str] = []
    second_round = threading.Event()

    def read() -> None:
        assert cli.stderr is not None
        for line in cli.stderr:
            lines.append(line)
            if "round 2/3: " in line:
                second_round.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert second_round.wait(240), "the confirmation never reached its second round:\n" + "".join(lines)
        time.sleep(1)  # reloading or measuring the first contender of round 2
        cli.send_signal(signal.SIGINT)
        code = cli.wait(timeout=60)
    finally:
        if cli.poll() is None:
            cli.kill()
    reader.join(10)
    stderr = "".join(lines)
    assert code == 130, stderr
    assert "model config restored" in stderr
    doc = json.loads((out / "tune.json").read_text())
    assert doc["status"] == "interrupted" and doc["decision"] == "keep"
    assert [t["key"] for t in doc["trials"]] == ["mb8-pbauto-qd1000-i1"]
    assert (out / "trials" / "mb8-pbauto-qd1000-i1" / "result.json").is_file()
    confirmation = doc["confirmation"]
    assert confirmation["status"] == "interrupted" and confirmation["completed_rounds"] == 1
    for entry in confirmation["contenders"].values():
        assert [r["round"] for r in entry["runs"] if r["status"] == "ok"][:1] == [1]
    assert "dynamic_batching" not in _served(server, BATCHED)  # back on its own config


def test_bad_tune_settings_are_one_line_errors(
    triton_server: LocalTritonServer, served_repository: Path, tmp_path: Path
) -> None:
    code, _, stderr = _tune(
        triton_server, served_repository, "--preferred-batch-sizes", "8,4", "--out", tmp_path / "t"
    )
    assert code == 1 and "error:" in stderr
    code, _, stderr = _tune(triton_server, served_repository, "--strategy", "random", "--out", tmp_path / "t")
    assert code == 1 and "unknown search strategy" in stderr


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (("--rounds", "0"), "--rounds 0 must be at least 1"),
        (("--rounds", "-2"), "--rounds -2 must be at least 1"),
        (("--confidence", "1.5"), "--confidence 1.5 is not a level between 0 and 1"),
        (("--confidence", "0"), "--confidence 0.0 is not a level between 0 and 1"),
        (("--confidence", "1"), "--confidence 1.0 is not a level between 0 and 1"),
        (("--finalists", "0"), "--finalists 0 must be at least 1"),
    ],
)
def test_bad_rounds_confidence_or_finalists_are_one_line_and_write_nothing(
    served_repository: Path, tmp_path: Path, option: tuple[str, str], message: str
) -> None:
    out = tmp_path / "t"
    result = runner.invoke(
        app,
        ["tune", MODEL, "--repo", str(served_repository), "--url", "localhost:1", "--out", str(out), *option],
    )
    assert result.exit_code == 1
    assert message in error_line(result.stderr)
    assert not out.exists()


@pytest.mark.slow
def test_ctrl_c_restores_the_config_and_keeps_what_was_measured(
    triton_server: LocalTritonServer, served_repository: Path, tmp_path: Path
) -> None:
    before = _served_batching(triton_server)
    out = tmp_path / "tune"
    cli = subprocess.Popen(
        [sys.executable, "-m", "tritongen", "tune", MODEL, "--repo", str(served_repository),
         "--url", triton_server.http_url, "--max-batch-size", "16", "--preferred-batch-sizes", "4,8",
         "--max-queue-delay-us", "0,100,200,300", "--instances", "1", "--strategy", "grid",
         "--duration", "6s", "--warmup", "0.5s", "--concurrency", "2", "--out", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not (out / "trials").is_dir() or len(list((out / "trials").iterdir())) < 2:
            assert time.monotonic() < deadline and cli.poll() is None, (
                "the tune never reached its second trial"
            )
            time.sleep(0.5)
        time.sleep(3)  # inside the first candidate's load test
        cli.send_signal(signal.SIGINT)
        code = cli.wait(timeout=60)
    finally:
        if cli.poll() is None:
            cli.kill()
    stderr = cli.stderr.read() if cli.stderr else ""
    assert code == 130, stderr
    assert "model config restored" in stderr
    doc = json.loads((out / "tune.json").read_text())
    assert doc["status"] == "interrupted"
    assert (out / "trials" / doc["baseline"]["key"] / "result.json").is_file()
    assert _served_batching(triton_server) == before


PICKY_MODEL_PY = """
import json

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        if int(config["max_batch_size"]) > 8:
            raise ValueError("this model cannot run batches above 8")

    def execute(self, requests):
        inputs = [pb_utils.get_input_tensor_by_name(r, "x").as_numpy() for r in requests]
        return [pb_utils.InferenceResponse([pb_utils.Tensor("y", x)]) for x in inputs]
"""


def test_a_config_the_server_refuses_is_a_failed_trial_and_the_sweep_goes_on(tmp_path: Path) -> None:
    from tritongen.triton.model_config import (
        DynamicBatching,
        InstanceGroup,
        ModelConfig,
        ModelInput,
        ModelOutput,
    )
    from tritongen.triton.render import render_config

    repo = tmp_path / "repo"
    model = repo / "picky"
    (model / "1").mkdir(parents=True)
    (model / "1" / "model.py").write_text(PICKY_MODEL_PY)
    config = ModelConfig(
        name="picky", backend="python", max_batch_size=8,
        input=[ModelInput(name="x", data_type="TYPE_FP32", dims=[4])],
        output=[ModelOutput(name="y", data_type="TYPE_FP32", dims=[4])],
        dynamic_batching=DynamicBatching(), instance_group=[InstanceGroup(count=1, kind="KIND_CPU")],
    )  # fmt: skip
    (model / "config.pbtxt").write_text(render_config(config))
    with LocalTritonServer(repo, http_port=0, grpc_port=0, metrics_port=0) as server:
        result = runner.invoke(
            app,
            ["tune", "picky", "--repo", str(repo), "--url", server.http_url, *FAST,
             "--max-batch-size", "8,16", "--max-queue-delay-us", "0", "--instances", "1",
             "--strategy", "grid", "--out", str(tmp_path / "t"), "--apply"],
        )  # fmt: skip
        assert result.exit_code == 0, result.stderr
        doc = json.loads((tmp_path / "t" / "tune.json").read_text())
        by_key = {t["key"]: t for t in doc["trials"]}
        assert by_key["mb16-pbauto-qd0-i1"]["status"] == "failed"
        assert "cannot run batches above 8" in by_key["mb16-pbauto-qd0-i1"]["reason"]
        assert (tmp_path / "t" / "trials" / "mb16-pbauto-qd0-i1" / "failed.json").is_file()
        # The only config that works is the current one (mb8-pbauto-qd0-i1 renders it unchanged):
        # nothing to confirm, the current config stays, and --apply changes nothing.
        assert by_key["mb8-pbauto-qd0-i1"]["status"] == "ok"
        assert doc["same_as_current"] == ["mb8-pbauto-qd0-i1"] and doc["finalists"] == []
        assert doc["confirmation"] is None and doc["decision"] == "keep"
        assert doc["best"]["key"] == "current-mb8-pbauto-qd0-i1"
        assert "keep the current config: every config that met the SLO in the search is the current one" in (
            result.stdout
        )
        assert "not applied: no config beat the current one significantly" in result.stdout
        assert not (model / "config.pbtxt.bak").exists()
        control = ModelControl(server.http_url, "picky")
        assert int(control.served_config()["max_batch_size"]) == 8  # back on its own config
        control.close()


def test_find_max_scores_each_trial_by_its_most_load_within_the_slo(
    triton_server: LocalTritonServer, served_repository: Path, tmp_path: Path
) -> None:
    code, stdout, stderr = _tune(
        triton_server, served_repository, "--find-max", "--concurrency", "2", "--slo-p99-ms", "10",
        "--strategy", "grid", "--max-batch-size", "32", "--preferred-batch-sizes", "4",
        "--max-queue-delay-us", "100", "--instances", "1", *QUICK_LOOK, "--out", tmp_path / "tune",
        "--json", tmp_path / "t.json",
    )  # fmt: skip
    assert code == 0, stderr
    data = json.loads((tmp_path / "t.json").read_text())
    trials = [*data["trials"], data["baseline"]]
    for trial in trials:
        found, runs = trial["result"]["find_max"], trial["result"]["runs"]
        met = {level for level, meets in found["levels"] if meets}
        if not met:  # a busy machine: even the lowest level tried missed the SLO
            assert found["meets"] is None and not trial["feasible"]
            continue
        if 2 in met:
            assert [run["concurrency"] for run in runs][:2] == [
                2,
                4,
            ]  # the search doubles from the level given
        assert found["meets"] == max(met) and trial["level"] in met  # scored where the SLO was met
        assert trial["infer_per_s"] == pytest.approx(
            max(r["infer_per_s"] for r in runs if r["concurrency"] in met)
        )
    assert any(trial["feasible"] for trial in trials)
    assert "each trial searches its most load within the SLO" in stdout


def test_find_max_needs_the_slo_and_one_level(
    triton_server: LocalTritonServer, served_repository: Path
) -> None:
    code, _, stderr = _tune(triton_server, served_repository, "--find-max")
    assert code == 1 and "add --slo-p99-ms" in error_line(stderr)
    code, _, stderr = _tune(
        triton_server, served_repository, "--find-max", "--slo-p99-ms", "9", "--concurrency", "2,4"
    )
    assert code == 1 and "--find-max searches from one level" in error_line(stderr)
