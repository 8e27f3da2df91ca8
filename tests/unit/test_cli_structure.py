"""The command layer's shape: a command module never imports another; shared helpers never import commands.

Command modules are those whose functions ``cli/main.py`` registers as commands, and main
itself; everything else in ``tritongen/cli/`` is shared (options, groups, rendering helpers).
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import tritongen.cli
from tritongen.cli.main import app

CLI = Path(tritongen.cli.__file__).resolve().parent
MAIN = "tritongen.cli.main"


def _command_modules() -> set[str]:
    """The modules holding the registered commands, and main."""
    modules = {command.callback.__module__ for command in app.registered_commands if command.callback}
    return modules | {MAIN}


def _cli_modules() -> dict[str, Path]:
    return {
        "tritongen.cli." + ".".join(path.relative_to(CLI).with_suffix("").parts): path
        for path in sorted(CLI.rglob("*.py"))
        if path.name != "__init__.py"
    }


def _imported(path: Path) -> set[str]:
    """Every ``tritongen.cli`` module ``path`` imports, at the top or inside a function."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("tritongen.cli"):
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.startswith("tritongen.cli"))
    return found & set(_cli_modules())


def test_the_registered_commands_are_found() -> None:
    commands = _command_modules()
    callbacks = {command.callback for command in app.registered_commands}  # an alias shares its command's
    assert len(commands) == len(callbacks) + 1, "one module per command"
    for module in commands:
        importlib.import_module(module)


def test_no_command_module_imports_another() -> None:
    commands = _command_modules()
    wrong = [
        f"{module} imports {target}"
        for module, path in _cli_modules().items()
        if module in commands and module != MAIN
        for target in sorted(_imported(path) & commands)
    ]
    assert wrong == [], "move what they share into a non-command module (cli/options/, cli/console.py, …)"


def test_shared_modules_import_no_command() -> None:
    commands = _command_modules()
    wrong = [
        f"{module} imports {target}"
        for module, path in _cli_modules().items()
        if module not in commands
        for target in sorted(_imported(path) & commands)
    ]
    assert wrong == []
