"""The layering beyond what import-linter checks (pyproject.toml's contracts, run by ``lint-imports``).

import-linter holds every module to its layer (commands → workflows → services → model
description → basics), each package to a layer, and the imports the design forbids. Here:
the contracts pass, packages of one layer make no loop, no module imports another package's
private names, the load generator is reached through one facade, and README's layout table
states the same layers.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest
import tomllib

from support.paths import ROOT

PACKAGE = ROOT / "tritongen"

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
CONTRACTS = {c["id"]: c for c in PYPROJECT["tool"]["importlinter"]["contracts"]}
LAYER_NAMES = {1: "commands", 2: "workflows", 3: "services", 4: "model description", 5: "basics"}
LAYERS: dict[str, int] = {
    package.strip(): number
    for number, layer in enumerate(CONTRACTS["layers"]["layers"], start=1)
    for package in layer.split(":")
}
"""The packages of each layer, as import-linter's layers contract states them (pyproject.toml)."""
LAYERS[""] = 5  # tritongen/__init__.py: the version
# The load generator's shared definitions (loadtests/tritonload/shared.py, shipped as
# tritongen.loadtests), reached only through the facade tritongen/io/loadgen_shared.py.
LAYERS["loadtests"] = 5
BESIDE_THE_PACKAGE = {"loadtests"}
"""Layers of folders beside tritongen/ (README gives them rows of their own)."""


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _imports() -> list[tuple[str, str, tuple[str, ...], int]]:
    """(importer, imported module, names, line) for every import of the package's own modules."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        importer = _module_name(path)
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = importer.split(".")
                    if path.name != "__init__.py":
                        base = base[:-1]
                    base = base[: len(base) - node.level + 1]
                    target = ".".join([*base, *([node.module] if node.module else [])])
                else:
                    target = node.module or ""
                if target == "tritongen" or target.startswith("tritongen."):
                    found.append((importer, target, tuple(a.name for a in node.names), node.lineno))
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith("tritongen"):
                        found.append((importer, alias.name, (), node.lineno))
    return found


IMPORTS = _imports()


def test_the_import_contracts_hold() -> None:
    """The layers, the forbidden imports and the command modules' independence (import-linter)."""
    linted = subprocess.run(
        [sys.executable, "-c", "from importlinter.cli import lint_imports_command; lint_imports_command()"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert linted.returncode == 0, linted.stdout[-3000:] + linted.stderr[-2000:]
    assert f"Contracts: {len(CONTRACTS)} kept, 0 broken." in linted.stdout


def test_the_load_generator_is_reached_through_one_facade() -> None:
    wrong = [
        f"{importer}:{line} imports {target}"
        for importer, target, _names, line in IMPORTS
        if _package(target) == "loadtests" and importer != "tritongen.io.loadgen_shared"
    ]
    assert wrong == [], "import the load generator's shared names from tritongen.io.loadgen_shared"


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` (as a path that comes back to its start), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start)):
            return found
    return None


def _existing_module(name: str) -> str:
    """``tritongen.a.b`` if it is a module or package, else its parent (a name imported from it)."""
    path = ROOT.joinpath(*name.split("."))
    if path.with_suffix(".py").is_file() or (path / "__init__.py").is_file():
        return name
    return name.rsplit(".", 1)[0]


def test_no_loops_between_packages() -> None:
    graph: dict[str, set[str]] = defaultdict(set)
    for importer, target, _names, _line in IMPORTS:
        a, b = _package(importer), _package(target)
        if a != b:
            graph[a].add(b)
    assert _cycle(graph) is None


def test_no_loops_between_modules() -> None:
    """Also through imports inside functions: a loop deferred to call time is still a loop."""
    graph: dict[str, set[str]] = defaultdict(set)
    for importer, target, names, _line in IMPORTS:
        base = _existing_module(target)
        for name in names or ("",):
            module = _existing_module(f"{base}.{name}") if name else base
            if module != importer and not importer.startswith(module + "."):
                graph[importer].add(module)
    assert _cycle(graph) is None


def test_no_private_names_across_packages() -> None:
    wrong = [
        f"{importer}:{line} imports {name} from {target}"
        for importer, target, names, line in IMPORTS
        for name in names
        if name.startswith("_") and not name.endswith("__") and _package(importer) != _package(target)
    ]
    assert wrong == []


@pytest.mark.parametrize("layer", sorted(LAYER_NAMES))
def test_readme_layout_table_states_the_layers(layer: int) -> None:
    """Each README layout row names its layer, and lists exactly that layer's packages."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    rows = [line for line in readme.splitlines() if line.startswith(f"| {layer}. ")]
    assert len(rows) == 1, f"README's layout table needs one row starting '| {layer}. '"
    named = {part.strip().strip("`").rstrip("/") for part in rows[0].split("|")[2].split(",")}
    expected = {p for p, n in LAYERS.items() if n == layer and p not in ("", "__main__", *BESIDE_THE_PACKAGE)}
    assert named == expected
