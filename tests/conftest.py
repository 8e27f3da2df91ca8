"""Shared fixtures: example ONNX models, the test repository, and the one embedded Triton server."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tritongen.examples.models import EXAMPLES, write_example
from tritongen.server.local import LocalTritonServer

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def example_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The built-in example models written to a session directory."""
    root = tmp_path_factory.mktemp("examples")
    return {name: write_example(name, root / f"{name}.onnx") for name in EXAMPLES}


@pytest.fixture(scope="session")
def served_repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the committed example repository, plus a TorchScript model where torch is installed."""
    repo = tmp_path_factory.mktemp("served") / "model_repository"
    shutil.copytree(ROOT / "model_repository", repo, ignore=shutil.ignore_patterns("__pycache__"))
    from sleep_model import PAUSE_MODEL, SLEEP_MODELS, write_pause_model, write_sleep_model

    for name, durations in SLEEP_MODELS.items():
        write_sleep_model(repo / name, durations)
    write_pause_model(repo / PAUSE_MODEL)
    try:
        import torch  # noqa: F401
    except ImportError:
        return repo
    from torchscript_fixture import write_torchscript_mlp

    write_torchscript_mlp(repo / "mlp_torchscript")
    return repo


@pytest.fixture(scope="module")
def triton_server(served_repository: Path) -> Iterator[LocalTritonServer]:
    """The real embedded Triton server on ``served_repository``, one per test module, auto ports."""
    with LocalTritonServer(served_repository, http_port=0, grpc_port=0, metrics_port=0) as server:
        yield server
