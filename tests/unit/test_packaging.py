"""A non-editable install carries the templates, the Python-backend wrappers and the load generator."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from support.paths import ROOT


@pytest.mark.slow
def test_wheel_ships_templates_and_wrappers(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(tmp_path), str(ROOT)],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    (wheel,) = tmp_path.glob("tritongen-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "tritongen/templates/config.pbtxt.j2" in names
    assert "tritongen/templates/compose.yaml.j2" in names
    assert "tritongen/convert/wrappers/onnxruntime_model.py" in names
    assert "tritongen/py.typed" in names
    # The locustfile and its package, as `tritongen loadtest` and the ConfigMap read them.
    load_generator = ROOT / "loadtests"
    shipped = [load_generator / "locustfile.py", *(load_generator / "tritonload").glob("*.py")]
    assert {f"tritongen/{path.relative_to(ROOT).as_posix()}" for path in shipped} <= names


def test_every_package_is_listed_for_the_wheel() -> None:
    """pyproject names the packages one by one: a new package left out would be missing from the wheel."""
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {
        ".".join(init.parent.relative_to(ROOT).parts) for init in (ROOT / "tritongen").rglob("__init__.py")
    }
    # The load generator's folder ships as tritongen.loadtests (package-dir), its package inside it.
    found |= {
        ".".join(["tritongen", *init.parent.relative_to(ROOT).parts])
        for init in (ROOT / "loadtests").rglob("__init__.py")
    }
    assert found - listed == set()
