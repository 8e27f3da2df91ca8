"""The committed example repository is what the tool generates today."""

from __future__ import annotations

import json
from pathlib import Path

from tritongen.deploy.compose import ComposeSpec, render_compose
from tritongen.examples.repository import EXAMPLE_OPTIONS, build_example_repository
from tritongen.triton.proto import read_config

from support.paths import ROOT

COMMITTED = ROOT / "model_repository"


def _files(repo: Path) -> dict[str, bytes]:
    # Serving the repository leaves __pycache__ beside model.py; it is not part of it.
    return {
        str(p.relative_to(repo)): p.read_bytes()
        for p in sorted(repo.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


def test_committed_repository_is_current(tmp_path: Path) -> None:
    repo = tmp_path / "model_repository"
    build_example_repository(repo, tmp_path / "sources")
    fresh, committed = _files(repo), _files(COMMITTED)
    assert sorted(fresh) == sorted(committed), "run `make example-repository`"
    for name, data in fresh.items():
        if name.endswith("tritongen.json"):
            want, got = json.loads(data), json.loads(committed[name])
            want["source"].pop("path")
            got["source"].pop("path")
            assert want == got, f"{name} is stale: run `make example-repository`"
        else:
            assert data == committed[name], f"{name} is stale: run `make example-repository`"


def test_committed_compose_is_current() -> None:
    text = render_compose(ComposeSpec(repo=COMMITTED, output=ROOT / "compose.yaml"))
    assert text == (ROOT / "compose.yaml").read_text(), "run `make example-repository`"


def test_every_example_model_is_in_the_repository() -> None:
    for name in EXAMPLE_OPTIONS:
        config = read_config(COMMITTED / f"{name}_onnx" / "config.pbtxt")
        assert config.name == f"{name}_onnx"
