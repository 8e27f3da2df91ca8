"""The unit tier: no server and no model build, so ``pytest tests/unit`` takes a few minutes at most.

A unit test that asks for the server's fixtures is refused at collection, and one that starts
an embedded server in-process fails when it would launch the binary: it belongs in
``tests/server/``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
SERVER_FIXTURES = {"triton_server", "served_repository"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Refuse a unit test that uses the server's fixtures."""
    wrong = [
        item.nodeid
        for item in items
        if item.path.is_relative_to(HERE) and SERVER_FIXTURES & set(getattr(item, "fixturenames", ()))
    ]
    if wrong:
        raise pytest.UsageError(f"unit tests may not use the server (move them to tests/server/): {wrong}")


@pytest.fixture(autouse=True)
def _no_embedded_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Launching the embedded server in a unit test fails at once, naming the tier it belongs in.

    The checks ``start`` makes before it launches the binary (the repository exists, the
    bundled server is installed) still run: refusals are unit tests.
    """
    from tritongen.server.local import LocalTritonServer

    def refuse(self: LocalTritonServer, *args: object) -> list[str]:
        raise AssertionError("a unit test launched the embedded Triton server: move it to tests/server/")

    monkeypatch.setattr(LocalTritonServer, "_argv", refuse)
    yield
