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

from support.lint_corpus import INVALID
from support.lint_repository import CASES, write_corpus

runner = CliRunner()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_corpus(tmp_path_factory.mktemp("lint") / "repository")


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
