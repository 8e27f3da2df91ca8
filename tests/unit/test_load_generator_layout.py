"""The load generator's layout: a thin locustfile, modules of one job each, imports a plain Locust image has.

The locustfile holds options, event listeners and the user; the package beside it
(``loadtests/tritonload/``) holds the rest, its modules importing each other relatively; none
of them imports tritongen, and what tritongen imports too (``shared.py``, ``request_data.py``,
``kinds.py``, ``options.py``) only the standard library and numpy.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from support.paths import ROOT

FOLDER = ROOT / "loadtests"
LOCUSTFILE = FOLDER / "locustfile.py"
MODULES = sorted((FOLDER / "tritonload").glob("*.py"))
MAX_LOCUSTFILE_LINES = 400
MAX_MODULE_LINES = 500
IMAGE = {"locust", "gevent", "grpc", "google", "tritonclient", "numpy", "hdrh", "prometheus_client", "flask"}
"""What the compose image and the Kubernetes init container add to the standard library (Locust's own
dependencies, Flask among them for its web UI; tritonclient with its protobuf, numpy, hdrhistogram,
prometheus_client)."""
STDLIB = set(sys.stdlib_module_names)


def _imports(path: Path) -> list[tuple[int, str, int]]:
    """(level, module, line) of every import of ``path``, inside functions too (level 0: absolute)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found += [(0, alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            found.append((node.level, node.module or "", node.lineno))
    return found


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def test_the_locustfile_is_a_thin_entry_point() -> None:
    assert _lines(LOCUSTFILE) <= MAX_LOCUSTFILE_LINES
    assert {module.split(".")[0] for level, module, _ in _imports(LOCUSTFILE) if not level} <= (
        STDLIB | IMAGE | {"tritonload"}
    )


@pytest.mark.parametrize("path", MODULES, ids=lambda path: path.name)
def test_each_module_is_small_and_says_what_it_holds(path: Path) -> None:
    assert _lines(path) <= MAX_MODULE_LINES
    assert ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))


@pytest.mark.parametrize("path", MODULES, ids=lambda path: path.name)
def test_the_package_imports_itself_relatively_and_what_a_plain_locust_image_has(path: Path) -> None:
    absolute = {module.split(".")[0] for level, module, _ in _imports(path) if not level}
    assert absolute <= STDLIB | IMAGE, f"{path.name} imports {sorted(absolute - STDLIB - IMAGE)}"


SHARED_WITH_TRITONGEN = ("shared.py", "request_data.py", "kinds.py", "options.py")
"""What tritongen imports too (``tritongen/io/loadgen_shared.py``), in processes without Locust."""


@pytest.mark.parametrize("name", SHARED_WITH_TRITONGEN)
def test_what_tritongen_imports_too_needs_only_the_standard_library_and_numpy(name: str) -> None:
    path = FOLDER / "tritonload" / name
    tree = ast.parse(path.read_text(encoding="utf-8"))
    top = [node for node in tree.body if isinstance(node, ast.Import | ast.ImportFrom)]
    imported = {
        alias.name.split(".")[0] if isinstance(node, ast.Import) else (node.module or "").split(".")[0]
        for node in top
        for alias in node.names
        if not (isinstance(node, ast.ImportFrom) and node.level)
    }
    assert imported <= STDLIB | {"numpy"}, f"{name} imports {sorted(imported - STDLIB - {'numpy'})}"
