"""The embedded server's settings and what it needs installed, without starting it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tritongen.errors import MissingDependencyError
from tritongen.server.distribution import find_distribution
from tritongen.server.local import LocalTritonServer
from tritongen.server.settings import ServerSettings


def test_settings_and_keyword_options_combine(tmp_path: Path) -> None:
    base = ServerSettings(http_port=0, models=["mlp_onnx"])
    server = LocalTritonServer(tmp_path, base, grpc_port=0, admin_key="key")
    assert server.settings == ServerSettings(http_port=0, grpc_port=0, models=["mlp_onnx"], admin_key="key")
    assert server.requested_ports == {"http": 0, "grpc": 0, "metrics": 8002}
    assert server.models == ["mlp_onnx"] and server.admin_key == "key" and server.extra_args == []
    assert LocalTritonServer(tmp_path).settings == ServerSettings()


def test_keyword_options_name_every_setting() -> None:
    """The keyword options are typed by a TypedDict beside the settings: the two list the same fields."""
    from dataclasses import fields

    from tritongen.server.settings import ServerOptions

    assert list(ServerOptions.__annotations__) == [f.name for f in fields(ServerSettings)]


def test_missing_stub_says_what_to_do() -> None:
    with pytest.raises(MissingDependencyError) as info:
        find_distribution((3, 99))
    assert "no Python-backend stub for Python 3.99" in info.value.message
    assert "3.11" in (info.value.hint or "")


def test_missing_wheel_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "pytriton" else real_find_spec(name, *a)
    )
    with pytest.raises(MissingDependencyError) as info:
        find_distribution()
    assert "nvidia-pytriton" in info.value.message
    assert "make install" in (info.value.hint or "")
