"""Composing models without a server: touched models, the tree from configs, the table, tune's refusals."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tritongen.errors import ConfigError
from tritongen.loadtest.result import LoadTestReport, RunResult
from tritongen.metrics.composing import (
    SERVER_MODEL_KEYS,
    all_snapshots,
    cached_lookup,
    server_models,
    touched_models,
    tree_parents,
)
from tritongen.report.loadtest_tables import server_models_table, tree_labels
from tritongen.triton.ensembles import composing_models, ensemble_steps, ensemble_tree
from tritongen.tune.runner import untouched_warning
from tritongen.tune.session import tuned_model

from support.composing_models import (
    BLS_MODEL,
    ENSEMBLE_MODEL,
    PRE_MODEL,
    STEP_MODEL,
    ensemble_text,
    write_composing_models,
)


def entry(name: str, success: int, executions: int | None = None, inferences: int | None = None,
          queue_ns: int = 0, version: str = "1", as_text: bool = False) -> dict[str, Any]:  # fmt: skip
    """A ``model_stats`` entry: ``success`` requests, each phase counted once per request."""
    executions = success if executions is None else executions
    inferences = success if inferences is None else inferences

    def number(value: int) -> int | str:
        return str(value) if as_text else value  # gRPC's JSON carries 64-bit counters as strings

    phase = {"count": number(success), "ns": number(1000 * success)}
    return {
        "name": name,
        "version": version,
        "inference_count": number(inferences),
        "execution_count": number(executions),
        "inference_stats": {
            "success": phase,
            "queue": {"count": number(success), "ns": number(queue_ns)},
            "compute_input": phase,
            "compute_infer": phase,
            "compute_output": phase,
        },
    }


def ensemble(*steps: str) -> dict[str, Any]:
    """A served ensemble config (JSON), as the model-config API returns it."""
    return {"platform": "ensemble", "ensemble_scheduling": {"step": [{"model_name": s} for s in steps]}}


CONFIGS: dict[str, dict[str, Any]] = {
    "ens": ensemble("pre", "inner"),
    "inner": ensemble("a", "b"),
    "bls": {"backend": "python"},
    "called_ens": ensemble("pre", "post"),
}


def lookup(name: str) -> dict[str, Any] | None:
    return CONFIGS.get(name, {"backend": "python"})


def test_snapshots_add_versions_and_read_grpc_strings() -> None:
    found = all_snapshots(
        [entry("m", 3, version="1"), entry("m", 4, version="2", as_text=True), {"name": ""}]
    )
    assert list(found) == ["m"]
    assert (
        found["m"].success == 7
        and found["m"].executions == 7
        and found["m"].phase_ns["compute_infer"] == 7000
    )


def test_touched_models_are_those_whose_counters_moved() -> None:
    before = all_snapshots([entry("a", 5), entry("b", 5), entry("c", 0)])
    after = all_snapshots([entry("a", 9), entry("b", 5), entry("c", 0, executions=1), entry("new", 2)])
    # "new" was loaded in between: it counts from zero.
    assert touched_models(before, after) == ["a", "c", "new"]


def test_ensemble_steps_only_for_ensembles() -> None:
    assert ensemble_steps(ensemble("x", "y", "x")) == ["x", "y"]
    assert ensemble_steps({"backend": "python", "ensemble_scheduling": {"step": [{"model_name": "x"}]}}) == []
    assert ensemble_steps(None) == [] and ensemble_steps({"platform": "ensemble"}) == []


def test_ensemble_tree_is_recursive_and_survives_a_loop() -> None:
    assert ensemble_tree("ens", lookup) == {
        "ens": None,
        "pre": "ens",
        "inner": "ens",
        "a": "inner",
        "b": "inner",
    }
    looped = {"x": ensemble("y"), "y": ensemble("x")}
    assert ensemble_tree("x", looped.get) == {"x": None, "y": "x"}


def test_tree_of_an_ensemble_keeps_step_order_depth_first() -> None:
    parents = tree_parents("ens", ["b", "pre", "a", "inner"], lookup)
    assert list(parents.items()) == [
        ("ens", None), ("pre", "ens"), ("inner", "ens"), ("a", "inner"), ("b", "inner"),
    ]  # fmt: skip


def test_untouched_intermediate_ensemble_moves_its_steps_up() -> None:
    # Only "a" moved under "inner" (say, a failed request path): it sits under the nearest touched one.
    assert tree_parents("ens", ["a", "pre"], lookup) == {"ens": None, "pre": "ens", "a": "ens"}


def test_models_a_bls_model_calls_sit_under_it_and_a_called_ensemble_keeps_its_steps() -> None:
    parents = tree_parents("bls", ["called_ens", "pre", "post", "other"], lookup)
    assert list(parents.items()) == [
        ("bls", None), ("called_ens", "bls"), ("pre", "called_ens"), ("post", "called_ens"), ("other", "bls"),
    ]  # fmt: skip


def test_server_models_figures_per_touched_model() -> None:
    before = all_snapshots([entry("ens", 10), entry("pre", 10, executions=10), entry("idle", 3)])
    after = all_snapshots(
        [entry("ens", 110), entry("pre", 110, executions=60, queue_ns=500_000), entry("idle", 3)]
    )
    models = server_models(before, after, "ens", cached_lookup(lambda name: ensemble("pre", "idle")))
    assert list(models) == ["ens", "pre"]  # "idle" is a step, but the requests did not reach it
    pre = models["pre"]
    assert set(pre) == set(SERVER_MODEL_KEYS)
    assert pre["parent"] == "ens" and models["ens"]["parent"] is None
    assert pre["requests"] == 100 and pre["executions"] == 50 and pre["inferences"] == 100
    assert pre["avg_batch"] == pytest.approx(2.0)
    assert pre["compute_infer_us"] == pytest.approx(1.0) and pre["queue_us"] == pytest.approx(5.0)


def test_server_models_without_the_top_model_or_a_readable_config() -> None:
    snap = all_snapshots([entry("a", 1)])
    assert server_models(snap, snap, "missing", lookup) == {}

    def refuse(name: str) -> dict[str, Any]:
        raise ConfigError("no config", "none")

    before = all_snapshots([entry("top", 0), entry("x", 0)])
    after = all_snapshots([entry("top", 4), entry("x", 4)])
    # A config that cannot be read counts as a plain model: "x" is a called child.
    assert {
        k: v["parent"] for k, v in server_models(before, after, "top", cached_lookup(refuse)).items()
    } == {
        "top": None,
        "x": "top",
    }


def test_tree_labels_draw_the_tree() -> None:
    parents = {"ens": None, "pre": "ens", "inner": "ens", "a": "inner", "b": "inner"}
    labels = [label.replace("\u00a0", " ") for _, label in tree_labels(parents)]
    assert labels == ["ens", "├─ pre", "└─ inner", "   ├─ a", "   └─ b"]
    looped = {"x": "y", "y": "x"}
    assert sorted(name for name, _ in tree_labels(looped)) == ["x", "y"]  # shown, not lost


def _run(models: dict[str, dict[str, Any]]) -> LoadTestReport:
    run = RunResult(
        mode="concurrency", concurrency=2, target_rate=None, batch_size=1, duration_s=1.0, requests=1,
        errors=0, errors_by_kind={}, qps=1.0, infer_per_s=1.0, latency_us=None, server_us=None,
        avg_batch=None, stable=True, gpu=None, cpu=None, server_models=models,
    )  # fmt: skip
    return LoadTestReport(model="ens", protocol="http", url="h:1", runs=[run])


def test_table_only_when_more_than_one_model_was_touched() -> None:
    one = {"ens": {"requests": 5, "parent": None}}
    assert server_models_table(_run(one)) is None
    two = {
        **one,
        "pre": {"requests": 5, "executions": 2, "avg_batch": 2.5, "queue_us": 12.4, "parent": "ens"},
    }
    table = server_models_table(_run(two))
    assert table is not None
    assert [row[:5] for row in table.rows] == [
        ("c=2", "ens", "5", "–", "–"), ("", "└─\u00a0pre", "5", "2", "2.50"),
    ]  # fmt: skip
    assert table.rows[1][5] == "12"


def test_run_results_with_and_without_server_models_load() -> None:
    document = _run({"ens": {"requests": 5, "parent": None}}).to_json()
    again = LoadTestReport.from_json(json.loads(json.dumps(document)))
    assert again.runs[0].server_models == {"ens": {"requests": 5, "parent": None}}
    del document["runs"][0]["server_models"]  # written before the field existed
    assert LoadTestReport.from_json(document).runs[0].server_models == {}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / STEP_MODEL).mkdir(parents=True)
    (root / STEP_MODEL / "config.pbtxt").write_text(
        'name: "mlp_onnx"\nbackend: "python"\nmax_batch_size: 8\n'
    )
    write_composing_models(root)
    (root / "outer").mkdir()
    (root / "outer" / "config.pbtxt").write_text(ensemble_text("outer", pre=ENSEMBLE_MODEL, step=PRE_MODEL))
    return root


def test_composing_models_read_from_the_repository(repo: Path) -> None:
    assert composing_models(repo, ENSEMBLE_MODEL) == [PRE_MODEL, STEP_MODEL]
    assert composing_models(repo, "outer") == [ENSEMBLE_MODEL, PRE_MODEL, STEP_MODEL]
    assert composing_models(repo, BLS_MODEL) == [] and composing_models(repo, "absent") == []


def test_tuned_model_accepts_steps_and_any_model_under_bls(repo: Path) -> None:
    assert tuned_model(repo, STEP_MODEL, None) == STEP_MODEL
    assert tuned_model(repo, ENSEMBLE_MODEL, PRE_MODEL) == PRE_MODEL
    assert tuned_model(repo, "outer", STEP_MODEL) == STEP_MODEL  # a step of a nested ensemble
    assert tuned_model(repo, BLS_MODEL, STEP_MODEL) == STEP_MODEL  # BLS: not known statically


@pytest.mark.parametrize(
    ("model", "composing", "message", "hint"),
    [
        (ENSEMBLE_MODEL, None, "'ens_pre' is an ensemble", "--composing pre_scale | mlp_onnx"),
        (ENSEMBLE_MODEL, "nope", "no model 'nope' in", "one of pre_scale, mlp_onnx"),
        (
            ENSEMBLE_MODEL,
            BLS_MODEL,
            "'bls_call' is not a step of the ensemble 'ens_pre'",
            "pre_scale, mlp_onnx",
        ),
        ("outer", ENSEMBLE_MODEL, "'ens_pre' is an ensemble", "pre_scale, mlp_onnx"),
        (BLS_MODEL, BLS_MODEL, "is the model under load itself", "drop --composing"),
    ],
)
def test_tuned_model_refusals(repo: Path, model: str, composing: str | None, message: str, hint: str) -> None:
    with pytest.raises(ConfigError) as caught:
        tuned_model(repo, model, composing)
    assert message in caught.value.message and hint in caught.value.hint


def test_untouched_warning_only_when_statistics_were_read_and_never_moved() -> None:
    reached = {"runs": [{"server_models": {"bls": {}, "pre": {}}}]}
    missed = {"runs": [{"server_models": {"bls": {}}}]}
    assert untouched_warning(reached, "pre", "bls") is None
    assert untouched_warning({"runs": [{"server_models": {}}]}, "pre", "bls") is None
    assert untouched_warning(None, "pre", "bls") is None
    warning = untouched_warning(missed, "pre", "bls")
    assert warning is not None and "did not reach 'pre'" in warning
