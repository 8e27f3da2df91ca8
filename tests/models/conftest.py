"""The model tier: tests that build real models (TVM compilation and tuning, PyTorch exports,
quantization, the MiniLM recipe) without a server; each takes seconds to minutes (marked ``slow``)."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark this folder's tests ``slow``."""
    for item in items:
        if item.path.is_relative_to(HERE):
            item.add_marker(pytest.mark.slow)
