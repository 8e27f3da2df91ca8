"""Shared fixtures: example ONNX models built once per session."""

from __future__ import annotations

from pathlib import Path

import pytest

from tritongen.examples.models import EXAMPLES, write_example


@pytest.fixture(scope="session")
def example_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The built-in example models written to a session directory."""
    root = tmp_path_factory.mktemp("examples")
    return {name: write_example(name, root / f"{name}.onnx") for name in EXAMPLES}
