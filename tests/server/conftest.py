"""The server tier: every test here runs against the real embedded Triton server (marked ``triton``)."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark this folder's tests ``triton`` (and ``slow``: each one starts or drives a server)."""
    for item in items:
        if item.path.is_relative_to(HERE):
            item.add_marker(pytest.mark.triton)
