"""The layering, read from the imports: commands → workflows → services → model description → basics.

A module imports only from its own package, from packages of a lower layer, or from
packages of its own layer without making a loop; never another package's private names.
README's layout table states the same layers.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

from support.paths import ROOT

PACKAGE = ROOT / "tritongen"

LAYERS: dict[str, int] = {
    # 1. commands
    "cli": 1,
    "__main__": 1,
    # 2. workflows
    "workflows": 2,
    "pipeline": 2,
    "compare": 2,
    "tune": 2,
    "deploy": 2,
    "report": 2,
    "examples": 2,
    "perfanalyzer": 2,
    # 3. services
    "server": 3,
    "client": 3,
    "loadtest": 3,
    "metrics": 3,
    # 4. model description
    "sources": 4,
    "convert": 4,
    "triton": 4,
    "lint": 4,
    # 5. basics
    "errors": 5,
    "intervals": 5,
    "stopping": 5,
    "io": 5,
    "": 5,  # tritongen/__init__.py: the version
    # The load generator's shared definitions (loadtests/tritonload/shared.py, shipped as
    # tritongen.loadtests), reached only through the facade tritongen/io/loadgen_shared.py.
    "loadtests": 5,
}
BESIDE_THE_PACKAGE = {"loadtests"}
"""Layers of folders beside tritongen/ (README gives them rows of their own)."""
LAYER_NAMES = {1: "commands", 2: "workflows", 3: "services", 4: "model description", 5: "basics"}


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


def test_every_package_has_a_layer() -> None:
    packages = {_package(_module_name(p)) for p in PACKAGE.rglob("*.py")}
    assert packages - set(LAYERS) == set(), "give the new package a layer here and in README's layout table"


def test_no_import_from_a_lower_layer_to_a_higher_one() -> None:
    wrong = []
    for importer, target, _names, line in IMPORTS:
        a, b = _package(importer), _package(target)
        if a != b and LAYERS[a] > LAYERS[b]:
            wrong.append(
                f"{importer}:{line} ({LAYER_NAMES[LAYERS[a]]}) imports {target} ({LAYER_NAMES[LAYERS[b]]})"
            )
    assert wrong == []


# Imports that the layers allow but the design does not: (importer package, imported package).
FORBIDDEN: dict[tuple[str, str], str] = {
    ("triton", "lint"): "Triton's own knowledge (schema, auto-complete) lives in triton/; lint depends on it",
}


def test_no_forbidden_imports() -> None:
    wrong = [
        f"{importer}:{line} imports {target}: {FORBIDDEN[pair]}"
        for importer, target, _names, line in IMPORTS
        if (pair := (_package(importer), _package(target))) in FORBIDDEN
    ]
    assert wrong == []


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
