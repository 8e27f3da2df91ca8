"""Where the checkout is, for tests in any tier."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
"""The repository root (the folder holding ``tritongen/``, ``loadtests/`` and ``tests/``)."""
