"""The documentation's command lines parse with the real CLI, and its relative links resolve.

Every ``tritongen …`` line of README.md and docs/*.md (in ``bash``/``sh``/``console`` fenced
blocks, and inline code spans that start with ``tritongen ``) goes through the Typer app's own
click command with ``make_context``: the subcommand must exist, every option and argument too,
each value must convert to its type and required arguments must be there. Nothing runs: no
command body, no callback, no help or version printer, no server, no file written.

How lines are read, as a reader would type them:
- backslash continuations are joined; ``#`` comments, pipes (``tritongen … | git apply``),
  ``&&``/``;`` lists and ``$(…)`` substitutions are split off (a ``tritongen`` inside a
  substitution is checked too); ``VAR=value`` prefixes are skipped;
- ``$VAR`` and ``${VAR}`` become the placeholder ``VAR``; placeholders in capitals
  (``MODEL``, ``FILE.onnx``, ``N``) stay as written where the option takes text or a path,
  and become a sample value where it takes a number or a choice;
- ``a|b|c`` without spaces (``\\|`` in a table) means one of them: each is checked;
- ``…`` alone means "more options go here": what is shown is checked, but a required
  argument may be among what is left out; ``PATH...`` means one or more; ``[…]`` is optional;
- in prose, a span of just ``tritongen COMMAND`` names the command: only its existence is
  checked (and ``tritongen …`` stands for any command line).
"""

from __future__ import annotations

import copy
import functools
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import unquote

import pytest
import typer
import typer.main

from tritongen.cli.main import app

try:  # Typer 0.2x vendors click as typer._click; older Typer uses click itself
    from typer._click.exceptions import UsageError
except ImportError:  # pragma: no cover
    from click.exceptions import UsageError

from support.paths import ROOT

DOCS = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    *sorted((ROOT / "docs" / "kinds").glob("*.md")),
]
"""README, the manual's pages and the load kinds' pages (``docs/kinds/``, one per kind)."""
SHELL_BLOCKS = {"bash", "sh", "shell", "console", "zsh"}
PLACEHOLDER = re.compile(r"[A-Z][A-Z0-9_]*(\.[a-z0-9]+)?")
SHELL_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")
ELISIONS = {"…", "..."}


@dataclass(frozen=True)
class DocCommand:
    """One ``tritongen`` command line of the docs, where it stands."""

    file: str
    line: int
    text: str
    inline: bool

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.text}"


# --- reading the docs ---------------------------------------------------------------------


FENCE = re.compile(r"^\s*(`{3,}|~{3,})\s*([\w+-]*)")


def _split_fences(lines: list[str]) -> Iterator[tuple[str | None, int, list[str]]]:
    """The file as runs of prose (language None) and fenced blocks, with their first line."""
    prose: list[str] = []
    prose_start = 1
    at = 0
    while at < len(lines):
        opening = FENCE.match(lines[at])
        if not opening:
            prose.append(lines[at])
            at += 1
            continue
        yield None, prose_start, prose
        fence, language = opening.group(1), opening.group(2).lower()
        body_start, at = at + 1, at + 1
        while at < len(lines) and not lines[at].strip().startswith(fence):
            at += 1
        yield language, body_start + 1, lines[body_start:at]
        at += 1
        prose, prose_start = [], at + 1
    yield None, prose_start, prose


def _logical_lines(block: list[str], start: int, console: bool) -> Iterator[tuple[int, str]]:
    """Shell lines with backslash continuations joined; in a console block only ``$ `` lines."""
    at = 0
    while at < len(block):
        number, text = start + at, block[at]
        at += 1
        stripped = text.lstrip()
        if console or stripped.startswith("$ "):
            if not stripped.startswith("$ "):
                continue
            text = stripped[2:]
        while text.rstrip().endswith("\\") and at < len(block):
            text = text.rstrip()[:-1] + " " + block[at].strip()
            at += 1
        yield number, text


CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.S)


def _inline_spans(prose: list[str], start: int) -> Iterator[tuple[int, str]]:
    """Code spans that start with ``tritongen `` (table escapes ``\\|`` undone)."""
    text = "\n".join(prose)
    for paragraph in re.finditer(r"(?:[^\n]|\n(?!\s*\n))+", text):
        for span in CODE_SPAN.finditer(paragraph.group(0)):
            offset = paragraph.start() + span.start()
            number = start + text.count("\n", 0, offset)
            content = " ".join(span.group(2).split())
            if prose[number - start].lstrip().startswith("|"):
                content = content.replace("\\|", "|")
            if content.startswith("tritongen ") or content == "tritongen":
                yield number, content


INDENTED = re.compile(r"^(?: {4}|\t)\s*(?:\$ )?(tritongen(?: .*)?)$")


def _indented_lines(prose: list[str], start: int) -> Iterator[tuple[int, str]]:
    """Lines of indented code blocks (four spaces or a tab) that run ``tritongen``."""
    at = 0
    while at < len(prose):
        number, found = start + at, INDENTED.match(prose[at])
        text = found.group(1) if found else ""
        at += 1
        while found and text.rstrip().endswith("\\") and at < len(prose):
            text = text.rstrip()[:-1] + " " + prose[at].strip()
            at += 1
        if found:
            yield number, text


def _top_level(text: str) -> Iterator[str]:
    """The simple commands of a shell line: comments cut, lists, pipes and ``$(…)`` split."""
    current: list[str] = []
    quote = ""
    at = 0
    while at < len(text):
        char = text[at]
        if quote:
            current.append(char)
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
            current.append(char)
        elif char == "\\" and at + 1 < len(text):
            current.append(text[at : at + 2])
            at += 1
        elif char == "#" and (not current or current[-1][-1:].isspace()):
            break
        elif text.startswith("$(", at):
            depth, end = 1, at + 2
            while end < len(text) and depth:
                depth += {"(": 1, ")": -1}.get(text[end], 0)
                end += 1
            yield from _top_level(text[at + 2 : end - 1])
            current.append("SUBSTITUTION")
            at = end - 1
        elif char in ";&" or (char == "|" and not _between_words(text, at)):
            yield "".join(current)
            current = []
        else:
            current.append(char)
        at += 1
    yield "".join(current)


def _between_words(text: str, at: int) -> bool:
    """Whether the ``|`` at ``at`` separates alternatives (``a|b``) rather than a pipe."""
    before, after = text[at - 1 : at], text[at + 1 : at + 2]
    return bool(before) and bool(after) and not before.isspace() and not after.isspace() and after != "|"


def _tritongen_words(command: str) -> list[str] | None:
    """The arguments after ``tritongen`` in a simple command, or None when it runs something else."""
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    while words and re.match(r"[A-Za-z_][A-Za-z0-9_]*=", words[0]):
        words = words[1:]
    if words and Path(words[0]).name == "tritongen":
        return words[1:]
    if len(words) >= 3 and Path(words[0]).name.startswith("python") and words[1:3] == ["-m", "tritongen"]:
        return words[3:]
    return None


def doc_commands(path: Path, root: Path = ROOT) -> list[DocCommand]:
    """Every ``tritongen`` command line in one Markdown file."""
    name = str(path.relative_to(root))
    found = []
    lines = path.read_text(encoding="utf-8").splitlines()
    for language, start, block in _split_fences(lines):
        if language is None:
            candidates = [(n, t, True) for n, t in _inline_spans(block, start)]
            candidates += [(n, t, False) for n, t in _indented_lines(block, start)]
        elif language in SHELL_BLOCKS:
            candidates = [(n, t, False) for n, t in _logical_lines(block, start, language == "console")]
        else:
            continue
        for number, text, inline in candidates:
            for command in _top_level(text):
                if _tritongen_words(command) is not None:
                    found.append(DocCommand(name, number, " ".join(command.split()), inline))
    return found


ALL_COMMANDS = [command for path in DOCS for command in doc_commands(path)]


# --- parsing with the real CLI --------------------------------------------------------------


def _must_not_run(*args: Any, **kwargs: Any) -> None:
    raise AssertionError("a documented command line was run instead of only parsed")


@functools.cache
def _cli(required: bool) -> Any:
    """The app's click group, built afresh (its objects are not the app's) and made inert."""
    group = typer.main.get_command(app)
    for command in [group, *getattr(group, "commands", {}).values()]:
        command.callback = _must_not_run
        for param in command.params:
            param.callback = None  # no eager --version printer, no validator with side effects
            if not required:
                param.required = False
            info = getattr(getattr(param, "type_descriptor", None), "parameter_info", None)
            if getattr(info, "exists", False):
                # A path that must exist is a real file on the user's machine, not in the docs
                # (placeholders such as FILE.onnx): check the path's type, not its existence.
                # The parameter info belongs to the app, so the change goes on a copy.
                relaxed = replace(param.type_descriptor, parameter_info=_copy_without_exists(info))
                param.type_descriptor = relaxed
                param._runtime_param = None
    return group


def _copy_without_exists(info: Any) -> Any:
    copied = copy.copy(info)
    copied.exists = False
    return copied


def _sample(param: Any, value: str) -> str:
    """A value of the option's type for a placeholder (``N``, ``$WORKERS``); others as written."""
    if not PLACEHOLDER.fullmatch(value):
        return value
    descriptor = getattr(param, "type_descriptor", None)
    if descriptor is None:
        return value
    if descriptor.choices:
        choice = descriptor.choices[0]
        return str(getattr(choice, "value", choice))
    if descriptor.annotation in (int, float):
        low = descriptor.parameter_info.min
        return str(low if low is not None else 1)
    return value


def _variables_as_placeholders(word: str) -> str:
    return SHELL_VARIABLE.sub(lambda m: m.group(1) or m.group(2), word)


def _words_for_parsing(command: Any, words: list[str]) -> tuple[list[str], bool]:
    """The words with placeholders filled, ``…`` and ``[…]`` dropped; and whether some were elided."""
    options = {opt: p for p in command.params for opt in [*p.opts, *p.secondary_opts] if opt.startswith("-")}
    words = [_variables_as_placeholders(word) for word in words]
    out: list[str] = []
    elided = False
    at = 0
    while at < len(words):
        word = words[at]
        at += 1
        if word in ELISIONS:
            elided = True
            continue
        if word.startswith("[") and any(w.endswith("]") for w in words[at - 1 :]):
            while not words[at - 1].endswith("]"):
                at += 1
            continue
        for ellipsis in ELISIONS:
            if word.endswith(ellipsis) and len(word) > len(ellipsis) and not word.startswith("-"):
                word = word[: -len(ellipsis)]
        name, equals, inline_value = word.partition("=")
        param = options.get(name)
        takes_value = param is not None and not getattr(param, "is_flag", False) and not param.count
        if takes_value and equals:
            out.append(f"{name}={_sample(param, inline_value)}")
        elif takes_value and at < len(words):
            out += [word, _sample(param, words[at])]
            at += 1
        else:
            out.append(word)
    return out, elided


def _alternatives(words: list[str]) -> list[list[str]]:
    """``mlp|text|fixed`` read as one of them: one word list per alternative."""
    choices = [w.split("|") if "|" in w and not w.startswith("|") else [w] for w in words]
    count = max((len(c) for c in choices), default=1)
    return [[c[min(i, len(c) - 1)] for c in choices] for i in range(count)]


def check_command(doc: DocCommand) -> str | None:
    """Why the CLI refuses the line, or None when it parses."""
    words = _tritongen_words(doc.text)
    assert words is not None
    group = _cli(required=True)
    if all(word in ELISIONS for word in words):
        return None  # `tritongen …`: any command line
    if words[0] in ("--help", "--version"):
        return None if len(words) <= 1 else "the root options take no arguments"
    if words[0].startswith("-"):
        return f"unknown option {words[0]!r} before the command"
    name = words[0]
    if name not in group.commands:
        return f"no command {name!r} (commands: {', '.join(sorted(group.commands))})"
    if (doc.inline and len(words) == 1) or "--help" in words:
        return None  # the command named in prose, or its help
    for variant in _alternatives(words[1:]):
        parsed, elided = _words_for_parsing(group.commands[name], variant)
        command = _cli(required=not elided).commands[name]
        try:
            ctx = command.make_context(f"tritongen {name}", list(parsed), help_option_names=[])
        except UsageError as e:
            return f"{e.format_message()} (parsed as: tritongen {name} {shlex.join(parsed)})"
        ctx.close()
    return None


def test_the_docs_show_command_lines() -> None:
    assert {c.file for c in ALL_COMMANDS} >= {"README.md"}
    assert len(ALL_COMMANDS) > 20


@pytest.mark.parametrize("doc", ALL_COMMANDS, ids=lambda c: f"{c.file}:{c.line}")
def test_documented_command_line_parses(doc: DocCommand) -> None:
    problem = check_command(doc)
    assert problem is None, f"{doc}\n  {problem}"


# --- the reader itself ----------------------------------------------------------------------


def test_shell_lines_are_read_as_a_reader_types_them(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "Run `tritongen lint REPO` first; `tritongen kubernetes` names a command.\n"
        "\n"
        "| a | `tritongen example mlp\\|text -o FILE.onnx` |\n"
        "\n"
        "```bash\n"
        "tritongen render models/tok --instances 2 --diff | git apply   # apply it\n"
        "kubectl logs $(tritongen loadtest --worker …)\n"
        "X=1 tritongen loadtest m \\\n"
        "    --workers $N --concurrency 8\n"
        "```\n"
        "\n"
        "```text\n"
        "tritongen: 208 requests\n"
        "```\n"
        "\n"
        "```console\n"
        "$ tritongen serve\n"
        "tritongen output line\n"
        "```\n"
        "\n"
        "    tritongen lint model_repository\n",
        encoding="utf-8",
    )
    commands = doc_commands(page, tmp_path)
    found = [(c.line, c.text, c.inline) for c in commands]
    assert found == [
        (1, "tritongen lint REPO", True),
        (1, "tritongen kubernetes", True),
        (3, "tritongen example mlp|text -o FILE.onnx", True),
        (6, "tritongen render models/tok --instances 2 --diff", False),
        (7, "tritongen loadtest --worker …", False),
        (8, "X=1 tritongen loadtest m --workers $N --concurrency 8", False),
        (17, "tritongen serve", False),
        (21, "tritongen lint model_repository", False),
    ]
    assert [check_command(c) for c in commands] == [None] * len(commands)


@pytest.mark.parametrize(
    ("line", "complaint"),
    [
        ("tritongen convrt x.onnx", "no command 'convrt'"),
        ("tritongen convert", None),  # a command named in prose (inline), not a line
        ("tritongen convert --name x", "Missing argument"),
        ("tritongen convert x.onnx --no-such-option", "No such option"),
        ("tritongen serve --http-port eighty", "Invalid value for '--http-port'"),
        ("tritongen convert x.onnx --target cloud", "cloud"),
        ("tritongen lint a b --format yaml", "yaml"),
        ("tritongen kubernetes REPO", "Missing option"),
        ("tritongen kubernetes REPO …", None),
        ("tritongen --version", None),
    ],
)
def test_refusals_name_what_is_wrong(line: str, complaint: str | None) -> None:
    problem = check_command(DocCommand("page.md", 1, line, inline=True))
    if complaint is None:
        assert problem is None
    else:
        assert problem is not None and complaint in problem, problem


def test_a_path_that_must_exist_is_not_checked_for_existence() -> None:
    probe = typer.Typer()

    @probe.command()
    def show(data: Annotated[Path, typer.Option(exists=True)]) -> None:
        """Never runs."""

    group = typer.main.get_command(probe)
    param = next(p for p in group.params if p.name == "data")
    info = param.type_descriptor.parameter_info
    param.type_descriptor = replace(param.type_descriptor, parameter_info=_copy_without_exists(info))
    param._runtime_param = None
    ctx = group.make_context("show", ["--data", "MISSING.npz"], help_option_names=[])
    assert ctx.params["data"] == Path("MISSING.npz") and info.exists  # the app's own info unchanged


# --- links ----------------------------------------------------------------------------------


LINK = re.compile(r"\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`|\*\*|__|<[^>]+>", "", heading.strip().lower())
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading anchor of a Markdown file, with GitHub's -1, -2 for repeated headings."""
    seen: dict[str, int] = {}
    found = set()
    lines = path.read_text(encoding="utf-8").splitlines()
    for language, _, block in _split_fences(lines):
        if language is not None:
            continue
        for line in block:
            heading = re.match(r"^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$", line)
            if heading:
                slug = _slug(heading.group(1))
                found.add(f"{slug}-{seen[slug]}" if slug in seen else slug)
                seen[slug] = seen.get(slug, 0) + 1
    return found


def relative_links(path: Path) -> Iterator[tuple[int, str]]:
    """(line, target) of every relative link and image outside code."""
    lines = path.read_text(encoding="utf-8").splitlines()
    for language, start, block in _split_fences(lines):
        if language is not None:
            continue
        for offset, line in enumerate(block):
            line = CODE_SPAN.sub("", line)
            for link in LINK.finditer(line):
                target = link.group(1)
                if not re.match(r"[a-z][a-z0-9+.-]*:", target):
                    yield start + offset, target


ALL_LINKS = [(path, line, target) for path in DOCS for line, target in relative_links(path)]


def link_problem(path: Path, target: str) -> str | None:
    """Why a relative link of ``path`` does not resolve, or None when it does."""
    file_part, _, anchor = target.partition("#")
    linked = (path.parent / unquote(file_part)).resolve() if file_part else path
    if not linked.exists():
        return f"{file_part} does not exist"
    if anchor and linked.suffix != ".md":
        return "an anchor into a file that is not Markdown"
    if anchor and unquote(anchor) not in anchors(linked):
        return f"{linked.name} has no heading #{anchor}"
    return None


@pytest.mark.parametrize(
    ("path", "line", "target"), ALL_LINKS, ids=[f"{p.relative_to(ROOT)}:{n}" for p, n, _ in ALL_LINKS]
)
def test_relative_link_resolves(path: Path, line: int, target: str) -> None:
    problem = link_problem(path, target)
    assert problem is None, f"{path.relative_to(ROOT)}:{line}: link {target}: {problem}"


def test_broken_links_and_anchors_are_found(tmp_path: Path) -> None:
    (tmp_path / "b.md").write_text(
        "# Title\n\n## The `x` option: one\n\n## Again\n\n## Again\n", encoding="utf-8"
    )
    page = tmp_path / "a.md"
    page.write_text(
        "[ok](b.md#the-x-option-one) [dup](b.md#again-1) [self](#here) ![img](none.png)\n"
        "[gone](c.md) [bad anchor](b.md#nowhere) [site](https://example.com/x.md#y) `[code](d.md)`\n"
        "\n## Here\n\n```text\n[in code](e.md)\n# not a heading\n```\n",
        encoding="utf-8",
    )
    found = {target: link_problem(page, target) for _, target in relative_links(page)}
    assert found == {
        "b.md#the-x-option-one": None,
        "b.md#again-1": None,
        "#here": None,
        "c.md": "c.md does not exist",
        "b.md#nowhere": "b.md has no heading #nowhere",
        "none.png": "none.png does not exist",
    }
    assert "not-a-heading" not in anchors(page)


def test_the_docs_link_to_each_other() -> None:
    assert len(ALL_LINKS) > 10
    assert _slug("The Locust master's report") == "the-locust-masters-report"
    assert _slug("Noise floor (`bench/noise.py`)") == "noise-floor-benchnoisepy"
    assert _slug("render: changing a config you keep in git") == "render-changing-a-config-you-keep-in-git"


# --- the shape of the docs ------------------------------------------------------------------


def test_the_readme_is_a_front_door_and_the_pages_stay_short() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(readme) <= 300, f"README.md has {len(readme)} lines: move detail into docs/"
    first_block = next(block for language, _, block in _split_fences(readme) if language is not None)
    assert [line.split()[:2] for line in first_block if line.startswith("make ")] == [
        ["make", "demo"],
        ["make", "test"],
    ], "the set-up (make demo, make test) is the first thing a newcomer sees"
    for page in DOCS[1:]:
        lines = page.read_text(encoding="utf-8").count("\n")
        assert lines <= 400, f"{page.relative_to(ROOT)} has {lines} lines: split it into two pages"


def test_the_contents_list_every_page() -> None:
    contents = ROOT / "docs" / "README.md"
    listed = {target.partition("#")[0] for _, target in relative_links(contents)}
    pages = [p for p in DOCS[1:] if p.parent == contents.parent and p != contents]
    unlisted = [p.name for p in pages if p.name not in listed]
    assert unlisted == [], f"docs/README.md does not list {unlisted}"
