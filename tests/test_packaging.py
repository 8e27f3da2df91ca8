"""A non-editable install carries the templates and the Python-backend wrappers."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


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
