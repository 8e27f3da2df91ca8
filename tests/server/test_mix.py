"""Several models at once on the real embedded server: ``loadtest a,b --mix``, ``tune --background``."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import psutil
import pytest
from typer.testing import CliRunner

from tritongen.cli.main import app
from tritongen.client.address import ServerAddress
from tritongen.client.control import ModelControl
from tritongen.errors import ConfigError, ServerError
from tritongen.loadtest.background import BackgroundLoad, BackgroundSpec
from tritongen.loadtest.result import LoadTestReport
from tritongen.loadtest.spec import LoadSpec
from tritongen.server.local import LocalTritonServer
from tritongen.triton.proto import read_config
from tritongen.tune.request import TuneRequest
from tritongen.tune.runner import TuneHooks, run_tune
from tritongen.tune.space import SearchSpace, parse_preferred_sets

from support.loads import QUICK_RUNS
from support.mix_models import HOLD_MODELS, HOLD_US
from support.sequence_model import SEQUENCE_MODEL

runner = CliRunner()


A, B = HOLD_MODELS


SHORT = ["--duration", "3s", "--warmup", "1s", "--window", "1s", "--max-duration", "3s"]


def _loadtest(server: LocalTritonServer, *args: str) -> tuple[int, str, str]:
    result = runner.invoke(
        app, ["loadtest", *args, "--url", server.http_url, "--metrics-url", server.metrics_url]
    )
    return result.exit_code, result.stdout, result.stderr


def _doc(path: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(path.read_text())
    assert doc["schema"] == "tritongen.loadtest/1"
    return doc


@pytest.mark.slow
def test_closed_loop_mix_splits_the_streams(triton_server: LocalTritonServer, tmp_path: Path) -> None:
    """3:1 of 4 streams on two identical models: 3 and 1 in flight, throughput 3:1.

    Both models hold every request HOLD_US in their queue and batch whatever arrives in that
    time, so a stream's cycle is HOLD_US plus the same path overhead on either model: each
    model's throughput is its streams over one cycle. What can tilt the ratio: the three
    streams of a batch return together and their resends may straddle the next batch's start
    by the client's scheduling delay (a few ms on a busy 2-core machine, against a 20 ms
    cycle). A ±25% band around 3 holds that; a wrong split (2:2, or 4 streams each) gives 1.
    """
    out, html = tmp_path / "mix.json", tmp_path / "mix.html"
    code, stdout, stderr = _loadtest(
        triton_server, f"{A},{B}", "--mix", "3:1", "--concurrency", "4", *SHORT, "--json", str(out),
        "--html", str(html),
    )  # fmt: skip
    assert code == 0, stderr + stdout
    page = html.read_text().replace("&#39;", "'")
    assert "each model's share of the load" in page and B in page
    doc = _doc(out)
    # Old readers and old documents: the per-model figures survive a round trip, and a
    # document written before them still loads.
    report = LoadTestReport.from_json(doc)
    assert set(report.runs[0].models) == {A, B}
    del doc["runs"][0]["models"]
    assert LoadTestReport.from_json(doc).runs[0].models == {}
    doc = _doc(out)
    assert doc["model"] == f"{A},{B}"
    (run,) = doc["runs"]
    models = run["models"]
    assert list(models) == [A, B]
    assert (models[A]["concurrency"], models[B]["concurrency"]) == (3, 1)
    assert models[A]["share"] == pytest.approx(0.75) and models[B]["share"] == pytest.approx(0.25)
    assert models[A]["errors"] == models[B]["errors"] == 0
    ratio = models[A]["qps"] / models[B]["qps"]
    assert 2.25 <= ratio <= 3.75, (models[A]["qps"], models[B]["qps"])
    # The run is the union: its counts are the models' sums, its latency at least the hold.
    assert run["requests"] == models[A]["requests"] + models[B]["requests"]
    assert run["qps"] == pytest.approx(models[A]["qps"] + models[B]["qps"])
    for name in (A, B):
        assert models[name]["latency_us"]["p50"] >= HOLD_US
        # The server's own figures per model, side by side: each waited the hold in its queue.
        server = run["server_models"][name]
        assert server["parent"] is None
        assert server["queue_us"] >= 0.9 * HOLD_US
        assert models[name]["server_us"]["queue"] == server["queue_us"]
    assert run["server_models"][A]["avg_batch"] > 2.0  # A's three streams share batches
    assert run["server_models"][B]["avg_batch"] == pytest.approx(1.0)
    assert A in stdout and B in stdout and "share" in stdout


@pytest.mark.slow
def test_open_loop_mix_splits_the_rate(triton_server: LocalTritonServer, tmp_path: Path) -> None:
    """At 40/s split 3:1, each model is sent its own rate: 30/s and 10/s (the schedule, not the server)."""
    out = tmp_path / "rate.json"
    code, stdout, stderr = _loadtest(
        triton_server, f"{A},{B}", "--mix", "3:1", "--rate", "40", *SHORT, "--json", str(out)
    )
    assert code == 0, stderr + stdout
    (run,) = _doc(out)["runs"]
    models = run["models"]
    assert models[A]["target_rate"] == pytest.approx(30.0)
    assert models[B]["target_rate"] == pytest.approx(10.0)
    # A constant-arrival schedule sends its rate exactly over whole windows: 5% is the
    # rounding of a 3 s span at 10/s (30 sends, one more or less).
    assert models[A]["achieved_rate"] == pytest.approx(30.0, rel=0.05)
    assert models[B]["achieved_rate"] == pytest.approx(10.0, rel=0.05)
    assert run["target_rate"] == 40.0 and run["achieved_rate"] == pytest.approx(40.0, rel=0.05)


@pytest.mark.parametrize(
    ("args", "said"),
    [
        ([f"{A},missing_model", "--concurrency", "2"], "model 'missing_model' of the mix is not ready"),
        ([f"{A},{B}", "--mix", "3:1:1", "--concurrency", "4"], "gives 3 share(s) for 2 model(s)"),
        ([f"{A},{B}", "--mix", "0:1", "--concurrency", "4"], "has a share that is not positive"),
        ([f"{A},{B}", "--concurrency", "1"], "--concurrency 1 is less than the 2 models of the mix"),
        ([A, "--mix", "3", "--concurrency", "2"], "--mix needs several models: MODEL a,b"),
        (
            [f"{A},{B}", "--concurrency", "2", "--input-value", "nope=1"],
            "no model of the mix has an input 'nope'",
        ),
        # Each model of a mix is checked like a model loaded alone: here, its scheduler.
        ([f"{A},{SEQUENCE_MODEL}", "--concurrency", "2"], f"'{SEQUENCE_MODEL}' is a sequence model"),
    ],
)
def test_bad_mix_is_one_line(triton_server: LocalTritonServer, args: list[str], said: str) -> None:
    code, _, stderr = _loadtest(triton_server, *args, *SHORT)
    assert code != 0
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and said in lines[0], stderr
    if "missing_model" in said:
        assert A in lines[0] and B in lines[0]  # the ready models are listed


TUNED = "mlp_onnx"


TINY_SPACE = ["--preferred-batch-sizes", "none", "--max-queue-delay-us", "0,100", "--instances", "1"]


TINY_TUNE = ["--strategy", "grid", *QUICK_RUNS, "--concurrency", "2",
             "--rounds", "1", "--finalists", "1"]  # fmt: skip


def _locusts() -> list[psutil.Process]:
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            if any("locust" in part for part in child.cmdline()):
                found.append(child)
        except psutil.NoSuchProcess:
            continue
    return found


@pytest.mark.slow
def test_tune_keeps_a_background_load_running_and_reports_it(
    triton_server: LocalTritonServer, served_repository: Path, tmp_path: Path
) -> None:
    out = tmp_path / "t"
    result = runner.invoke(
        app,
        ["tune", TUNED, "--repo", str(served_repository), "--url", triton_server.http_url, *TINY_SPACE,
         *TINY_TUNE, "--background", B, "--background-concurrency", "1", "--out", str(out)],
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr + result.stdout
    doc = json.loads((out / "tune.json").read_text())
    assert len(doc["trials"]) == 2 and doc["status"] == "ok"
    background = doc["background"]
    assert background["status"] == "ok" and background["reason"] is None
    assert background["models"][B]["concurrency"] == 1
    assert background["errors"] == 0 and background["requests"] > 0
    # It ran from before the first trial (the baseline) until after the last: its measured
    # windows span every trial's whole time (the confirmation's too), but for the last window,
    # which the stop cuts short. A slow machine makes both longer, never the one shorter.
    trials_s = doc["baseline"]["seconds"] + sum(trial["seconds"] for trial in doc["trials"])
    assert background["duration_s"] >= trials_s - background["window_s"]
    # One stream on the hold model: every request waited the hold, so at most one per hold.
    assert background["latency_us"]["p50"] >= HOLD_US
    assert 0 < background["qps"] <= 1e6 / HOLD_US
    assert f"background {B} (c=1)" in result.stdout
    assert _locusts() == []


@pytest.mark.slow
def test_a_failing_background_load_stops_the_tune_with_its_reason(
    triton_server: LocalTritonServer, served_repository: Path, tmp_path: Path
) -> None:
    base = read_config(served_repository / TUNED / "config.pbtxt")
    space = SearchSpace(
        max_batch_sizes=(base.max_batch_size,),
        preferred_batch_sizes=parse_preferred_sets("none"),
        max_queue_delays_us=(0, 100),
        instance_counts=(1,),
    )
    load = LoadSpec(
        model=TUNED,
        address=ServerAddress.parse(triton_server.http_url, metrics_url=triton_server.metrics_url),
        levels=(2,), duration_s=1.0, warmup_s=0.5,
    )  # fmt: skip
    request = TuneRequest(
        model=TUNED, space=space, load=load, slo_p99_ms=None, strategy="grid", out_dir=tmp_path / "t",
        rounds=1, finalists=1, background=BackgroundSpec((B,)),
    )  # fmt: skip

    def unload_background(number: int, total: int, candidate: object) -> None:
        if number == 1:  # after the baseline: the background model goes away mid-tune
            triton_server.unload_model(B)

    control = ModelControl(triton_server.http_url, TUNED)
    try:
        with pytest.raises(ServerError, match="background load failed") as failed:
            run_tune(request, control, base, target=None, hooks=TuneHooks(on_start=unload_background))
    finally:
        control.close()
        triton_server.load_model(B)
    assert f"'{B}'" in failed.value.message
    doc = json.loads((tmp_path / "t" / "tune.json").read_text())
    assert doc["status"] == "aborted"
    assert doc["baseline"]["status"] == "ok"  # what was measured before is kept
    assert doc["background"]["status"] == "failed" and B in doc["background"]["reason"]
    assert _locusts() == []
    assert B in triton_server.ready_models()


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--background", TUNED], f"'{TUNED}' is the model being tuned"),
        (["--background", f"{A},{B}", "--background-concurrency", "1"], "less than the 2 background models"),
        (["--background-rate", "5"], "need --background"),
        (["--background", B, "--background-rate", "5", "--background-concurrency", "1"], "exclude"),
        (["--background", "missing_model"], "model 'missing_model' of the background load is not ready"),
    ],
)
def test_bad_background_is_one_line(
    triton_server: LocalTritonServer, served_repository: Path, tmp_path: Path, args: list[str], said: str
) -> None:
    result = runner.invoke(
        app,
        ["tune", TUNED, "--repo", str(served_repository), "--url", triton_server.http_url, *TINY_SPACE,
         *TINY_TUNE, *args, "--out", str(tmp_path / "t")],
    )  # fmt: skip
    assert result.exit_code != 0
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and said in lines[0], result.stderr


def test_a_background_load_that_cannot_start_leaves_nothing_behind(triton_server: LocalTritonServer) -> None:
    """A background sequence model is checked like one loaded alone; the failed start removes its files."""
    load = LoadSpec(
        model=TUNED,
        address=ServerAddress.parse(triton_server.http_url, metrics_url=triton_server.metrics_url),
    )
    background = BackgroundLoad(BackgroundSpec((SEQUENCE_MODEL,)), load)
    workdir = background._workdir
    assert workdir.is_dir()
    with pytest.raises(ConfigError, match="is a sequence model"):
        background.start(threading.Event())
    assert not workdir.exists() and _locusts() == []
