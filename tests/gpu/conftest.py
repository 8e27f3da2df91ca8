"""The GPU tier: tests that need an NVIDIA GPU, marked ``gpu`` (skipped with the reason where none is)."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark this folder's tests ``gpu`` before the root conftest skips ``gpu`` tests on a host without one."""
    for item in items:
        if item.path.is_relative_to(HERE):
            item.add_marker(pytest.mark.gpu)
