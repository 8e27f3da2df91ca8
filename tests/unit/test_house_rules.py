"""House rules read from the code, in the package and the load generator beside it.

Functions that fit on a screen, modules of at most 500 lines, calls without positional ``None``.
"""

from __future__ import annotations

import ast

from support.paths import ROOT

SOURCES = sorted([*(ROOT / "tritongen").rglob("*.py"), *(ROOT / "loadtests").rglob("*.py")])
"""The package and the load generator (``loadtests/``, which runs in Locust without it)."""

MAX_LINES = 60
MAX_PARAMETERS = 10
MAX_MODULE_LINES = 500

# Modules allowed over the cap, each with why (none: every module fits).
LONG_MODULES: dict[str, str] = {}

# Functions allowed past the limits because they read better whole: a table-like body.
EXCEPTIONS: dict[str, str] = {}


def _functions() -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    found = []
    for path in SOURCES:
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                found.append((f"{path.relative_to(ROOT)}:{node.name}", node))
    return found


def _parameters(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    args = node.args
    names = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
    count = len(names) + (args.vararg is not None) + (args.kwarg is not None)
    return count - (1 if names and names[0] in ("self", "cls") else 0)


def test_functions_fit_on_a_screen() -> None:
    too_big = [
        f"{where} ({node.end_lineno - node.lineno + 1} lines, {_parameters(node)} parameters)"  # type: ignore[operator]
        for where, node in _functions()
        if where not in EXCEPTIONS
        and (node.end_lineno - node.lineno + 1 > MAX_LINES or _parameters(node) > MAX_PARAMETERS)  # type: ignore[operator]
    ]
    assert too_big == []


def test_exceptions_are_still_needed() -> None:
    names = {where for where, _ in _functions()}
    assert set(EXCEPTIONS) <= names


def _module_lines() -> dict[str, int]:
    return {
        str(path.relative_to(ROOT)): len(path.read_text(encoding="utf-8").splitlines()) for path in SOURCES
    }


def test_modules_are_at_most_500_lines() -> None:
    too_long = {
        name: lines
        for name, lines in _module_lines().items()
        if lines > MAX_MODULE_LINES and name not in LONG_MODULES
    }
    assert too_long == {}, "split these modules along their seams"


def test_long_module_exceptions_are_still_needed() -> None:
    lines = _module_lines()
    assert [name for name in LONG_MODULES if lines.get(name, 0) <= MAX_MODULE_LINES] == []


# Standard calls whose positional None is their idiom (a default, a filter, a key, a sentinel value).
STANDARD_NONE = {"getattr", "next", "pop", "filter", "index", "get", "setdefault", "put", "append"}


def _callee(call: ast.Call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def test_no_positional_none_arguments() -> None:
    """``f(a, None, None, x)`` hides what each None means: pass it by keyword, or not at all."""
    found = []
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if (
                isinstance(node, ast.Call)
                and _callee(node) not in STANDARD_NONE
                and any(isinstance(a, ast.Constant) and a.value is None for a in node.args)
            ):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert found == []
