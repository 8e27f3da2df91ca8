"""Mixed loads without a server: how streams and rates are shared, refusals, the CSV, the background's end."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import pytest

from tritongen.errors import ConfigError
from tritongen.loadtest.background import BackgroundLoad
from tritongen.loadtest.mix import Mix, split_streams
from tritongen.loadtest.result import LoadTestReport
from tritongen.tune.report import TuneReport
from tritongen.tune.runner import _end_background

from support.mix_models import HOLD_MODELS

A, B = HOLD_MODELS


def test_streams_split_by_shares_with_one_stream_each_at_least() -> None:
    assert split_streams(4, (3, 1)) == [3, 1]
    assert split_streams(8, (3, 1)) == [6, 2]
    assert split_streams(2, (3, 1)) == [1, 1]  # one stream each before any share
    assert split_streams(5, (1, 1, 1)) == [2, 2, 1]
    assert sum(split_streams(17, (0.5, 2, 7))) == 17
    assert Mix.parse("a,b", None).split("rate", 40) == [20.0, 20.0]
    assert Mix.parse("a, b", "3:1").split("rate", 40) == [30.0, 10.0]
    assert not Mix.parse("a", None).mixed
    with pytest.raises(ConfigError, match="--mix needs several models"):
        Mix.parse("a", "3")


@pytest.mark.parametrize(
    ("models", "mix", "said"),
    [
        ("a,b", "3:1:1", "--mix '3:1:1' gives 3 share(s) for 2 model(s)"),
        ("a,b", "3:0", "has a share that is not positive"),
        ("a,b", "3:-1", "has a share that is not positive"),
        ("a,b", "three:one", "is not a list of numbers"),
        ("a,a", None, "model 'a' is named twice"),
        ("a,,b", None, "has an empty name"),
    ],
)
def test_malformed_mix_is_refused(models: str, mix: str | None, said: str) -> None:
    with pytest.raises(ConfigError, match=said.replace("(", r"\(").replace(")", r"\)")):
        Mix.parse(models, mix)


def test_the_tune_closes_its_background_load_even_when_its_figures_fail() -> None:
    class Failing:
        closed = False

        def stop(self) -> None:
            pass

        def figures(self) -> dict[str, Any]:
            raise RuntimeError("unreadable windows")

        def close(self) -> None:
            self.closed = True

    background = Failing()
    with pytest.raises(RuntimeError, match="unreadable windows"):
        _end_background(cast(TuneReport, object()), cast(BackgroundLoad, background))
    assert background.closed


def test_the_csv_of_a_mix_has_a_row_per_model_after_the_whole_run(tmp_path: Path) -> None:
    import csv

    from tritongen.loadtest.result import RunResult

    def run(requests: int, qps: float, p99: float) -> RunResult:
        latency = {"p50": p99 / 2, "p90": p99, "p95": p99, "p99": p99, "p999": p99}
        latency |= {"mean": p99 / 2, "max": p99}
        return RunResult(
            mode="concurrency", concurrency=4, target_rate=None, batch_size=1, duration_s=2.0,
            requests=requests, errors=0, errors_by_kind={}, qps=qps, infer_per_s=qps, latency_us=latency,
            server_us=None, avg_batch=None, stable=True, gpu=None, cpu=None,
        )  # fmt: skip

    whole = run(400, 200.0, 900.0)
    a, b = run(300, 150.0, 800.0), run(100, 50.0, 900.0)
    whole.models = {
        "a": {"share": 0.75, **{k: v for k, v in a.__dict__.items() if k not in ("mode", "models")}},
        "b": {"share": 0.25, **{k: v for k, v in b.__dict__.items() if k not in ("mode", "models")}},
    }
    whole.models["a"]["concurrency"], whole.models["b"]["concurrency"] = 3, 1
    report = LoadTestReport(model="a,b", protocol="http", url="u", runs=[whole])
    report.write_csv(tmp_path / "mix.csv")
    with (tmp_path / "mix.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert [(r["model"], r["requests"], r["concurrency"], r["p99_us"]) for r in rows] == [
        ("a,b", "400", "4", "900.0"),
        ("a", "300", "3", "800.0"),
        ("b", "100", "1", "900.0"),
    ]
    assert {r["mode"] for r in rows} == {"concurrency"}
