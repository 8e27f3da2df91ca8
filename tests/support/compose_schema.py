"""Validate a compose file against the compose-spec schema, offline."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def check_compose_schema(path: Path) -> None:
    checker = Path(sys.executable).with_name("check-jsonschema")
    result = subprocess.run(
        [str(checker), "--builtin-schema", "vendor.compose-spec", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
