"""Every option flag is declared once in ``tritongen/cli`` and reused (an alias, a group, ``reworded``).

A flag that means two different things in two commands is two options; those pairs are
listed below with the reason.
"""

from __future__ import annotations

import ast
import typing
from collections import defaultdict
from pathlib import Path
from typing import Annotated

import pytest
import typer
import typer.core
import typer.main

import tritongen.cli
from tritongen.cli.main import app
from tritongen.cli.options.groups import reworded

CLI = Path(tritongen.cli.__file__).resolve().parent
ROOT = CLI.parents[1]

# Flags declared twice on purpose: one flag, two meanings (each declaration says why in a comment).
SAME_FLAG_OTHER_MEANING: dict[str, str] = {
    "--max-batch-size": "tune: the max batch sizes to try (a list); convert, render, compare: the one size",
    "--preferred-batch-sizes": "tune: sets of preferred sizes to try; convert, render: the one set to write",
    "--max-queue-delay-us": "tune: the queue delays to try (a list); convert, render: the one to write",
    "--instances": "tune: the instance counts to try (a list); convert, render: the one count to write",
    "--serve": "tune: a flag (the repository is --repo); infer, loadtest: the repository to serve",
    "--warmup": "infer: a count of untimed requests; the load options: a duration of load",
    "--name": "kubernetes: the name of its objects; convert, compare: the model's name",
    "--seq": "example: the length sample sentences are padded to; compare: every dynamic dim's value",
    "--max-num-seqs": "tune: the max_num_seqs values to try (a list); convert: the one to write",
    "--max-num-batched-tokens": "tune: the values to try (a list); convert: the one to write",
    "--chunked-prefill": "tune: on,off, the values to try; convert: a flag, the one to write",
    "--prefix-caching": "tune: on,off or auto, the values to try; convert: a flag, the one to write",
}


def _declarations() -> dict[str, list[str]]:
    """Per flag, where a ``typer.Option(...)`` call names it (``file:line``)."""
    found: dict[str, list[str]] = defaultdict(list)
    for path in sorted(CLI.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            if node.func.attr != "Option":
                continue
            for arg in node.args:
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    for flag in arg.value.split("/"):
                        if flag.startswith("-"):
                            found[flag].append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def _offered() -> dict[str, set[str]]:
    """Per flag, the commands that offer it (read from the Typer app; ``tritongen`` for its own)."""
    group = typer.main.get_command(app)
    assert isinstance(group, typer.core.TyperGroup)
    offered: dict[str, set[str]] = defaultdict(set)
    for name, command in {"tritongen": group, **group.commands}.items():
        for param in command.params:
            if isinstance(param, typer.core.TyperOption):
                for flag in (*param.opts, *param.secondary_opts):
                    offered[flag].add(name)
    return offered


def test_every_flag_is_declared_once() -> None:
    twice = {
        flag: where
        for flag, where in _declarations().items()
        if len(where) > 1 and not (flag in SAME_FLAG_OTHER_MEANING and len(where) == 2)
    }
    assert twice == {}, "declare it once (cli/options/: an alias or a group) and reuse it, reworded if needed"


def test_the_exceptions_are_still_declared_twice() -> None:
    declarations = _declarations()
    assert {flag: len(declarations[flag]) for flag in SAME_FLAG_OTHER_MEANING} == dict.fromkeys(
        SAME_FLAG_OTHER_MEANING, 2
    )


def test_every_offered_flag_is_found_in_the_source() -> None:
    """The source walk sees every declaration: no flag reaches a command another way."""
    assert set(_offered()) - set(_declarations()) == set()
    assert set(_declarations()) - set(_offered()) == set(), "a declared flag no command offers"


def test_reworded_changes_only_the_words() -> None:
    level = Annotated[int, typer.Option("--level", help="How fast.", min=1)]
    info = reworded(level, "Faster than light.", show_default=False)
    # Typer keeps an Annotated option's flag where a default would go.
    assert (info.default, info.help, info.min, info.show_default) == (
        "--level",
        "Faster than light.",
        1,
        False,
    )
    (original,) = typing.get_args(level)[1:]
    assert (original.help, original.show_default) == ("How fast.", True)
    with pytest.raises(TypeError, match="not an Annotated alias"):
        reworded(int, "no option")
