"""The command layer's shape: one module per command in ``cli/commands/``, the options in ``cli/options/``.

That command modules never import each other, and that no shared module imports a command,
import-linter checks (pyproject.toml's ``commands-apart`` and ``cli-shape`` contracts, run by
``tests/unit/test_layers.py``); here, that those contracts name what the app registers.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import tomllib

import tritongen.cli
from tritongen.cli.main import app

CLI = Path(tritongen.cli.__file__).resolve().parent
COMMANDS = "tritongen.cli.commands."
CONTRACTS = {
    contract["id"]: contract
    for contract in tomllib.loads((CLI.parents[1] / "pyproject.toml").read_text(encoding="utf-8"))["tool"][
        "importlinter"
    ]["contracts"]
}


def _command_modules() -> set[str]:
    """The modules holding the registered commands."""
    return {command.callback.__module__ for command in app.registered_commands if command.callback}


def test_one_module_per_command_in_commands() -> None:
    modules = _command_modules()
    callbacks = {command.callback for command in app.registered_commands}  # an alias shares its command's
    assert len(modules) == len(callbacks), "one module per command"
    assert all(module.startswith(COMMANDS) for module in modules), "commands live in cli/commands/"
    for module in modules:
        importlib.import_module(module)
    written = {f"{COMMANDS}{path.stem}" for path in (CLI / "commands").glob("[!_]*.py")}
    assert written == modules, "cli/commands/ holds the command modules and nothing else"


def test_the_independence_contract_names_every_command_module() -> None:
    assert set(CONTRACTS["commands-apart"]["modules"]) == _command_modules()
