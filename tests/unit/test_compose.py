"""The compose file: image release, schema validity, the committed top-level file."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import version
from pathlib import Path, PurePosixPath

import pytest
import yaml

from tritongen.deploy.compose import default_triton_image, triton_release_for
from tritongen.errors import ConfigError

from support.compose_schema import check_compose_schema
from support.paths import ROOT


@pytest.mark.parametrize(
    ("client", "release"),
    [("2.40.0", "23.11"), ("2.41.0", "23.12"), ("2.42.0", "24.01"), ("2.51.0", "24.10"), ("2.54.0", "25.01")],
)
def test_release_mapping(client: str, release: str) -> None:
    assert triton_release_for(client) == release


@pytest.mark.parametrize("client", ["1.9.0", "2.30.0", "garbage"])
def test_unknown_release_asks_for_image(client: str) -> None:
    with pytest.raises(ConfigError, match="--image"):
        triton_release_for(client)


def test_default_image_follows_installed_client() -> None:
    release = triton_release_for(version("tritonclient"))
    assert default_triton_image() == f"nvcr.io/nvidia/tritonserver:{release}-py3"


def test_committed_compose_file_is_valid() -> None:
    path = ROOT / "compose.yaml"
    doc = yaml.safe_load(path.read_text())
    server = doc["services"]["tritonserver"]
    assert server["volumes"] == ["./model_repository:/models:ro"]
    assert server["healthcheck"]["test"][-1] == "http://localhost:8000/v2/health/ready"
    assert server["deploy"]["resources"]["reservations"]["devices"][0]["capabilities"] == ["gpu"]
    assert all(port.startswith("127.0.0.1:") for port in server["ports"])
    check_compose_schema(path)


def test_the_locust_services_mount_the_locustfile_with_its_package() -> None:
    """They mount the locustfile's whole folder: the package it imports (tritonload/) lies beside it."""
    doc = yaml.safe_load((ROOT / "compose.yaml").read_text())
    for name in ("locust-master", "locust-worker"):
        service = doc["services"][name]
        locustfile = PurePosixPath(service["command"][service["command"].index("-f") + 1])
        mounts = [volume.split(":") for volume in service["volumes"]]
        (source,) = [source for source, target, *_ in mounts if target == str(locustfile.parent)]
        assert (ROOT / source / locustfile.name).is_file()
        assert (ROOT / source / "tritonload" / "__init__.py").is_file()


def test_locustfile_defines_a_user() -> None:
    locust = Path(sys.executable).with_name("locust")
    result = subprocess.run(
        [str(locust), "-f", str(ROOT / "loadtests" / "locustfile.py"), "--list"],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "TritonUser" in result.stdout
