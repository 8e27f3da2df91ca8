"""Lint agrees with the real server: what lint refuses Triton refuses, and serve refuses it first."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tritongen.cli.main import app
from tritongen.lint.findings import Finding
from tritongen.lint.repository import lint_paths
from tritongen.server.local import LocalTritonServer
from tritongen.triton.model_config import (
    DynamicBatching,
    GraphOptimization,
    InstanceGroup,
    ModelConfig,
    ModelInput,
    ModelOutput,
    ModelWarmup,
    Optimization,
    PinnedMemory,
    QueuePolicy,
    Reshape,
    ResponseCache,
    VersionLatest,
    VersionPolicy,
    WarmupInput,
)
from tritongen.triton.render import render_config

from support.lint_corpus import INVALID, STEP_MODEL, VALID

runner = CliRunner()


CASES = [STEP_MODEL, *VALID, *INVALID]


def renderer_config() -> ModelConfig:
    """A Python-backend config using every field the renderer emits that the Python backend accepts."""
    return ModelConfig(
        name="valid_rendered",
        backend="python",
        default_model_filename="model.py",
        version_policy=VersionPolicy(latest=VersionLatest(num_versions=1)),
        max_batch_size=16,
        input=[
            ModelInput(
                name="x",
                data_type="TYPE_FP32",
                dims=[2, 2],
                reshape=Reshape(shape=[4]),
                allow_ragged_batch=False,
                optional=False,
            )
        ],
        output=[ModelOutput(name="y", data_type="TYPE_FP32", dims=[4])],
        dynamic_batching=DynamicBatching(
            preferred_batch_size=[4, 8],
            max_queue_delay_microseconds=200,
            priority_levels=2,
            default_priority_level=1,
            default_queue_policy=QueuePolicy(
                timeout_action="REJECT",
                default_timeout_microseconds=10_000,
                allow_timeout_override=True,
                max_queue_size=64,
            ),
            priority_queue_policy={2: QueuePolicy(max_queue_size=8)},
        ),
        instance_group=[InstanceGroup(name="cpu_group", kind="KIND_CPU", count=2)],
        parameters={"intra_op_thread_count": "1"},
        optimization=Optimization(
            graph=GraphOptimization(level=1),
            priority="PRIORITY_MAX",
            input_pinned_memory=PinnedMemory(enable=True),
            output_pinned_memory=PinnedMemory(enable=False),
        ),
        response_cache=ResponseCache(enable=True),
        model_warmup=[
            ModelWarmup(
                name="zeros",
                batch_size=2,
                count=1,
                inputs={"x": WarmupInput(data_type="TYPE_FP32", dims=[2, 2], zero_data=True)},
            )
        ],
    )


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    repository = tmp_path_factory.mktemp("lint") / "repository"
    for case in CASES:
        case.write(repository)
    rendered = repository / "valid_rendered"
    (rendered / "1").mkdir(parents=True)
    (rendered / "1" / "model.py").write_text(STEP_MODEL.files["1/model.py"])
    (rendered / "config.pbtxt").write_text(render_config(renderer_config()))
    return repository


@pytest.fixture(scope="module")
def server_verdicts(
    corpus: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, tuple[bool, str]]]:
    """Every corpus model the server can judge, loaded by the real embedded Triton: (loaded, its reason)."""
    judged = tmp_path_factory.mktemp("judged") / "repository"
    skipped = {c.name for c in CASES if not c.server_judges}
    shutil.copytree(corpus, judged, ignore=lambda _d, names: [n for n in names if n in skipped])
    with LocalTritonServer(
        judged, http_port=0, grpc_port=0, metrics_port=0, require_all_models=False
    ) as server:
        states = {m.name: (m.state == "READY", m.short_reason) for m in server.repository_index()}
    yield states


def _errors(findings: list[Finding]) -> set[str]:
    return {f.rule for f in findings if f.severity == "error"}


@pytest.mark.slow
def test_lint_agrees_with_the_real_server(corpus: Path, server_verdicts: dict[str, tuple[bool, str]]) -> None:
    """For every corpus model: lint clean <=> Triton loads it, except where lint is stricter on purpose."""
    disagreements = []
    for case in [c for c in CASES if c.server_judges]:
        loaded, reason = server_verdicts.get(case.name, (False, "not in the index: no version to load"))
        lint_clean = not _errors(lint_paths([corpus / case.name]).findings)
        if loaded != case.expected_server_load():
            disagreements.append(f"{case.name}: server {'loaded' if loaded else 'refused: ' + reason}")
        elif case.server_loads is None and lint_clean != loaded:
            disagreements.append(f"{case.name}: lint {'clean' if lint_clean else 'errors'}, server {loaded}")
    assert server_verdicts["valid_rendered"][0], server_verdicts["valid_rendered"][1]
    assert not disagreements, "\n".join(disagreements)
    judged = [c for c in INVALID if c.server_loads is None and c.server_judges]
    assert len(judged) >= 40


def test_serve_refuses_a_repository_lint_rejects(corpus: Path, tmp_path: Path) -> None:
    repository = tmp_path / "repo"
    next(c for c in INVALID if c.name == "bad_preferred_max").write(repository)
    result = runner.invoke(
        app, ["serve", str(repository), "--http-port", "0", "--grpc-port", "0", "--metrics-port", "0"]
    )
    assert result.exit_code == 1
    assert "preferred-le-max" in result.stderr and "--no-lint" in result.stderr
