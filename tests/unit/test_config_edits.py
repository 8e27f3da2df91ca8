"""`render` on configs written by hand: only the changed fields' lines move, the rest stays byte for byte.

The property test draws one change (max batch size, preferred sizes, queue delay, instance
count, or none) for every config of a corpus written the way teams keep them in git, works
out on its own what Triton should read afterwards, and checks the file against it: parsed
with Triton's schema it is exactly that config, and the text diff touches only the lines of
the changed fields.
"""

from __future__ import annotations

import difflib
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import text_format
from hypothesis import given, settings
from hypothesis import strategies as st
from tritonclient.grpc import model_config_pb2

from tritongen.errors import ConfigError
from tritongen.pipeline.rerender import plan_rerender, write_rerender
from tritongen.triton.batching import BatchingOptions

from support.handwritten_configs import CORPUS, Handwritten


@dataclass(frozen=True)
class Change:
    """One requested change, the fields it may touch, and (None) when it must be refused."""

    kind: str
    value: Any


def _parse(text: str) -> Any:
    message = model_config_pb2.ModelConfig()
    text_format.Parse(text, message)
    return message


OPTION = {
    "max_batch_size": "max_batch_size",
    "preferred": "preferred_batch_sizes",
    "delay": "max_queue_delay_us",
    "instances": "instances",
}


def _options(changes: tuple[Change, ...]) -> BatchingOptions:
    return BatchingOptions(**{OPTION[c.kind]: c.value for c in changes if c.kind in OPTION})


def _intended(case: Handwritten, changes: tuple[Change, ...]) -> Any | None:
    """The message Triton should read after ``changes``, worked out from the schema alone (None: refused)."""
    message = _parse(case.text)
    for change in changes:
        if not _apply(case, message, change):
            return None
    return message


def _apply(case: Handwritten, message: Any, change: Change) -> bool:
    """Apply one change to ``message`` as Triton's schema reads it; False where tritongen must refuse it."""
    kind, value = change.kind, change.value
    if kind == "max_batch_size":
        sizes = list(message.dynamic_batching.preferred_batch_size) + list(
            message.sequence_batching.oldest.preferred_batch_size
        )
        if value == message.max_batch_size:
            return True
        if not case.batching or any(size > value for size in sizes):
            return False
        message.max_batch_size = value
    elif kind in ("preferred", "delay"):
        if not case.batching or case.scheduler == "ensemble":
            return False
        if case.scheduler == "direct" and kind == "preferred":
            return not value  # no preferred sizes with the direct strategy; none to clear either
        if case.scheduler == "oldest":
            batcher = message.sequence_batching.oldest
        elif case.scheduler == "direct":
            batcher = message.sequence_batching.direct
            if value > 0 and batcher.minimum_slot_utilization == 0:
                batcher.minimum_slot_utilization = 1.0
        else:
            batcher = message.dynamic_batching
        batcher.SetInParent()
        if kind == "preferred":
            del batcher.preferred_batch_size[:]
            batcher.preferred_batch_size.extend(value)
        else:
            batcher.max_queue_delay_microseconds = value
    elif kind == "instances":
        if case.instance_groups > 1 or case.scheduler == "ensemble":
            return False  # one group at most; an ensemble has none (its steps do)
        if message.instance_group and (message.instance_group[0].count or 1) == value:
            return True  # a group without a count runs one instance
        group = message.instance_group[0] if message.instance_group else message.instance_group.add()
        group.count = value
    return True


LEAVES = {
    "max_batch_size": ("max_batch_size",),
    "preferred": ("preferred_batch_size",),
    "delay": ("max_queue_delay_microseconds", "minimum_slot_utilization"),
    "instances": ("count",),
    "none": (),
}
PARENTS = {
    "max_batch_size": (),
    "preferred": ("dynamic_batching", "oldest"),
    "delay": ("dynamic_batching", "oldest", "direct", "sequence_batching"),
    "instances": ("instance_group",),
    "none": (),
}


def _code(line: str) -> str:
    """A line without its comment (a ``#`` inside quotes is text)."""
    quote = ""
    for index, char in enumerate(line):
        if quote:
            if char == quote:
                quote = ""
        elif char in "\"'":
            quote = char
        elif char == "#":
            return line[:index]
    return line


def _spans(text: str, names: tuple[str, ...]) -> set[int]:
    """Lines on which a field named in ``names`` is written, up to its closing bracket."""
    lines = [_code(line) for line in text.splitlines()]
    found: set[int] = set()
    for name in names:
        pattern = re.compile(rf"\b{name}\b\s*[:{{<\[]")
        for number, line in enumerate(lines):
            match = pattern.search(line)
            if match is None:
                continue
            depth = _depth(line[match.start() :])
            found.add(number)
            while depth > 0 and number + 1 < len(lines):
                number += 1
                found.add(number)
                depth += _depth(lines[number])
    return found


def _depth(code: str) -> int:
    return sum(code.count(c) for c in "{[<") - sum(code.count(c) for c in "}]>")


def _inside(text: str, leaves: tuple[str, ...], parents: tuple[str, ...]) -> set[int]:
    leaf = _spans(text, leaves)
    return leaf & _spans(text, parents) if parents else leaf


def _changed_lines(before: str, after: str) -> tuple[list[int], list[str]]:
    """Old line numbers that were removed or replaced, and the lines put in."""
    old, new = before.splitlines(), after.splitlines()
    removed: list[int] = []
    added: list[str] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if tag != "equal":
            removed += range(i1, i2)
            added += new[j1:j2]
    return removed, added


def _check_diff(case: Handwritten, changes: tuple[Change, ...], after: str) -> None:
    leaves = tuple(name for change in changes for name in LEAVES[change.kind])
    parents = tuple(name for change in changes for name in PARENTS[change.kind])
    removed, added = _changed_lines(case.text, after)
    inside = set().union(*(_inside(case.text, LEAVES[c.kind], PARENTS[c.kind]) for c in changes))
    allowed = inside | _first_lines(case.text, parents)
    assert set(removed) <= allowed, f"lines {sorted(set(removed) - allowed)} changed outside {leaves}"
    assert len(removed) <= max(len(inside), len(changes))
    names = leaves + parents + ("kind",)
    for line in added:
        code = _code(line).strip()
        assert (
            code in ("", "{", "}", ">", "]")
            or any(n in code for n in names)
            or re.fullmatch(r"[\d.,\s\]]+", code)
        ), f"unexpected line {line!r}"


def _first_lines(text: str, parents: tuple[str, ...]) -> set[int]:
    """Where a parent block opens: an inline block gets the new field on that line."""
    lines = [_code(line) for line in text.splitlines()]
    return {n for n, line in enumerate(lines) for p in parents if re.search(rf"\b{p}\b", line)}


def one_change(kind: str) -> st.SearchStrategy[Change]:
    if kind == "max_batch_size":
        return st.integers(1, 64).map(lambda v: Change(kind, v))
    if kind == "preferred":
        sizes = st.lists(st.integers(1, 8), max_size=4, unique=True)  # empty: `--preferred-batch-sizes none`
        return sizes.map(lambda v: Change(kind, tuple(sorted(v))))
    if kind == "delay":
        return st.integers(0, 20_000).map(lambda v: Change(kind, v))
    if kind == "instances":
        return st.integers(1, 6).map(lambda v: Change(kind, v))
    return st.just(Change("none", None))


SINGLE = st.sampled_from(["max_batch_size", "preferred", "delay", "instances", "none"]).flatmap(one_change)
SEVERAL = st.lists(
    st.sampled_from(["preferred", "delay", "instances"]), min_size=2, max_size=3, unique=True
).flatmap(lambda kinds: st.tuples(*(one_change(kind) for kind in kinds)))
REQUESTS = st.one_of(SINGLE.map(lambda change: (change,)), SEVERAL)


@pytest.mark.parametrize("case", CORPUS, ids=[case.name for case in CORPUS])
@settings(max_examples=30, deadline=None, derandomize=True)
@given(changes=REQUESTS)
def test_a_change_touches_only_its_fields_lines(case: Handwritten, changes: tuple[Change, ...]) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        model = Path(scratch) / case.name
        model.mkdir()
        path = model / "config.pbtxt"
        path.write_bytes(case.text.encode())
        intended = _intended(case, changes)
        if intended is None:
            with pytest.raises(ConfigError):
                plan_rerender(model, _options(changes))
            assert path.read_bytes() == case.text.encode()
            return
        plan = plan_rerender(model, _options(changes))
        write_rerender(plan)
        after = path.read_bytes().decode()
        assert _parse(after) == intended
        if intended == _parse(case.text):
            assert after == case.text and not (model / "config.pbtxt.bak").exists()
            return
        assert plan.how == "edit"
        assert (model / "config.pbtxt.bak").read_bytes() == case.text.encode()
        _check_diff(case, changes, after)
        if "\r\n" in case.text:
            assert after.count("\n") == after.count("\r\n")


@pytest.mark.parametrize("case", CORPUS, ids=[case.name for case in CORPUS])
def test_no_change_leaves_the_file_byte_identical(case: Handwritten, tmp_path: Path) -> None:
    model = tmp_path / case.name
    model.mkdir()
    (model / "config.pbtxt").write_bytes(case.text.encode())
    message = _parse(case.text)
    groups = list(message.instance_group)
    count = groups[0].count or 1 if len(groups) == 1 else None
    same = BatchingOptions(max_batch_size=message.max_batch_size, instances=count)
    for options in (BatchingOptions(), same):
        plan = plan_rerender(model, options)
        write_rerender(plan)
        assert not plan.changed and plan.changes == ()
        assert (model / "config.pbtxt").read_bytes() == case.text.encode()
        assert not (model / "config.pbtxt.bak").exists()


LICENSED = (
    "".join(f"# {line}\n" for line in ["Copyright (c) 2024, Example Corp. All rights reserved.", ""] * 12)
    + "# Serves the tokenizer next to the encoder.\n"
    + 'name: "tok"\nbackend: "python"\nmax_batch_size: 16\n\n'
    + 'input [\n  {\n    name: "TEXT"\n    data_type: TYPE_STRING\n    dims: [ 1 ]\n  }\n]\n'
    + 'output [\n  {\n    name: "IDS"\n    data_type: TYPE_INT64\n    dims: [ -1 ]\n  }\n]\n\n'
    + "instance_group [\n  {\n    count: 3  # one per core we can spare\n    kind: KIND_CPU\n  }\n]\n"
)


def _model(tmp_path: Path, text: str, name: str = "tok") -> Path:
    model = tmp_path / name
    model.mkdir()
    (model / "config.pbtxt").write_bytes(text.encode())
    return model


def _render(*args: str | Path) -> tuple[int, str, str]:
    from typer.testing import CliRunner

    from tritongen.cli.main import app

    result = CliRunner().invoke(app, ["render", *(str(a) for a in args)])
    return result.exit_code, result.stdout, result.stderr


def _error(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    return lines[0]


def test_instances_on_a_licensed_config_change_one_line(tmp_path: Path) -> None:
    model = _model(tmp_path, LICENSED)
    code, out, err = _render(model, "--instances", "2")
    assert code == 0, err
    after = (model / "config.pbtxt").read_text()
    assert after == LICENSED.replace("count: 3  #", "count: 2  #")
    assert out.strip() == (
        f"edited {model / 'config.pbtxt'} in place: instance_group[0].count 3 → 2 "
        "(-1 +1 lines, the rest as written); previous config in config.pbtxt.bak"
    )
    assert (model / "config.pbtxt.bak").read_text() == LICENSED


def test_diff_prints_the_change_and_writes_nothing(tmp_path: Path) -> None:
    model = _model(tmp_path, LICENSED)
    code, out, err = _render(model, "--instances", "2", "--max-queue-delay-us", "500", "--diff")
    assert code == 0, err
    path = model / "config.pbtxt"
    assert out.startswith(f"--- {path}\n+++ {path}\n@@ ")
    assert "-    count: 3  # one per core we can spare\n+    count: 2  # one per core we can spare\n" in out
    assert "+dynamic_batching {\n+  max_queue_delay_microseconds: 500\n+}\n" in out
    assert err.startswith("not written (--diff): ")
    assert path.read_text() == LICENSED and sorted(p.name for p in model.iterdir()) == ["config.pbtxt"]


def test_diff_of_no_change_is_empty(tmp_path: Path) -> None:
    model = _model(tmp_path, LICENSED)
    code, out, err = _render(model, "--instances", "3", "--diff")
    assert code == 0 and out == ""
    assert "unchanged" in err


def test_a_config_that_does_not_parse_is_refused_with_line_and_column(tmp_path: Path) -> None:
    broken = LICENSED.replace("max_batch_size: 16", "max_batch_size: sixteen")
    model = _model(tmp_path, broken)
    code, _, err = _render(model, "--instances", "2")
    assert code == 1
    line = broken.splitlines().index("max_batch_size: sixteen") + 1
    assert f"{model / 'config.pbtxt'}:{line}:17: not a valid Triton model config" in _error(err)
    assert (model / "config.pbtxt").read_text() == broken and not (model / "config.pbtxt.bak").exists()


def test_a_field_given_twice_is_refused(tmp_path: Path) -> None:
    twice = LICENSED.replace("max_batch_size: 16\n", "max_batch_size: 16\nmax_batch_size: 8\n")
    model = _model(tmp_path, twice)
    code, _, err = _render(model, "--instances", "2")
    assert code == 1
    line = twice.splitlines().index("max_batch_size: 8") + 1
    assert f':{line}:17: not a valid Triton model config: field "max_batch_size" is given twice' in _error(
        err
    )
    assert (model / "config.pbtxt").read_text() == twice


def test_a_map_key_given_twice_is_refused(tmp_path: Path) -> None:
    twice = LICENSED + (
        'parameters { key: "mode" value: { string_value: "fast" } }\n'
        'parameters { key: "mode" value: { string_value: "exact" } }\n'
    )
    model = _model(tmp_path, twice)
    code, _, err = _render(model, "--instances", "2")
    assert code == 1
    first = len(LICENSED.splitlines()) + 1
    assert f"parameters key 'mode' is given twice (lines {first} and {first + 1})" in _error(err)
    assert (model / "config.pbtxt").read_text() == twice


def test_a_change_that_breaks_a_rule_is_refused_before_writing(tmp_path: Path) -> None:
    ensemble = CORPUS[[case.name for case in CORPUS].index("image_pipeline")]
    model = _model(tmp_path, ensemble.text, ensemble.name)
    code, _, err = _render(model, "--instances", "2")
    assert code == 1
    assert "the new config breaks Triton's rules" in _error(err) and "ensemble.instance-group" in err
    assert (model / "config.pbtxt").read_text() == ensemble.text and not (model / "config.pbtxt.bak").exists()


def test_a_config_that_already_breaks_a_rule_says_so(tmp_path: Path) -> None:
    ordered = "dynamic_batching {\n  preserve_ordering: true\n  priority_levels: 2\n"
    ordered += "  default_priority_level: 1\n}\n"
    broken = LICENSED.replace("max_batch_size: 16\n", "max_batch_size: 16\n" + ordered)
    model = _model(tmp_path, broken)
    code, _, err = _render(model, "--instances", "2")
    assert code == 1
    assert "already breaks Triton's rules, so it was not changed" in _error(err)
    assert "dynamic-batching.ordering-priority" in err
    assert (model / "config.pbtxt").read_text() == broken


def test_generated_config_is_rendered_from_the_templates_and_an_edited_one_in_place(tmp_path: Path) -> None:
    from tritongen.triton.proto import parse_config_text
    from tritongen.triton.render import render_config

    generated = render_config(parse_config_text(LICENSED))
    model = _model(tmp_path, generated)
    code, out, _ = _render(model, "--instances", "2")
    assert code == 0 and out.startswith(f"rewrote {model / 'config.pbtxt'} from the templates: ")
    assert (model / "config.pbtxt").read_text() == render_config(
        parse_config_text(generated.replace("count: 3", "count: 2"))
    )
    noted = (
        (model / "config.pbtxt")
        .read_text()
        .replace("max_batch_size: 16\n", "max_batch_size: 16  # GPU memory bound\n")
    )
    (model / "config.pbtxt").write_text(noted)
    code, out, _ = _render(model, "--instances", "4")
    assert code == 0 and out.startswith("edited ")
    assert (model / "config.pbtxt").read_text() == noted.replace("count: 2", "count: 4")


def test_rewrite_renders_a_hand_written_config_from_the_templates(tmp_path: Path) -> None:
    model = _model(tmp_path, LICENSED)
    code, out, _ = _render(model, "--rewrite")
    assert code == 0 and out.startswith("rewrote ")
    text = (model / "config.pbtxt").read_text()
    assert text.startswith("# Generated by tritongen") and "Example Corp" not in text
    assert _parse(text) == _parse(LICENSED)
    assert (model / "config.pbtxt.bak").read_text() == LICENSED


def test_tune_diff_needs_apply() -> None:
    from typer.testing import CliRunner

    from tritongen.cli.main import app

    result = CliRunner().invoke(app, ["tune", "nothing_here", "--repo", "/nonexistent", "--diff"])
    assert result.exit_code == 1
    assert _error(result.stderr) == "error: --diff shows what --apply would write. add --apply."


def test_a_partial_config_the_server_completes_gets_only_the_changed_fields(tmp_path: Path) -> None:
    from tritongen.triton.proto import parse_config_text

    partial = '# The server fills in the rest from model.py.\nbackend: "python"\n'
    model = _model(tmp_path, partial, "auto")
    served = parse_config_text(
        'name: "auto" backend: "python" max_batch_size: 8\n'
        'input { name: "x" data_type: TYPE_FP32 dims: [ 4 ] }\n'
        'output { name: "y" data_type: TYPE_FP32 dims: [ 4 ] }\n'
        "instance_group { count: 1 kind: KIND_CPU }\n"
    )
    plan = plan_rerender(model, BatchingOptions(instances=2, max_queue_delay_us=300), base=served)
    write_rerender(plan)
    after = (model / "config.pbtxt").read_text()
    assert after.startswith(partial)
    expected = _parse(partial)
    expected.dynamic_batching.max_queue_delay_microseconds = 300
    group = expected.instance_group.add()
    group.count, group.kind = 2, model_config_pb2.ModelInstanceGroup.KIND_CPU
    assert _parse(after) == expected
    assert plan.config.instance_group[0].count == 2 and plan.config.max_batch_size == 8


def test_fields_tritongen_does_not_model_stay_in_place_and_refuse_a_rewrite(tmp_path: Path) -> None:
    limited = CORPUS[[case.name for case in CORPUS].index("rate_limited")]
    model = _model(tmp_path, limited.text, limited.name)
    code, _, err = _render(model, "--instances", "3", "--rewrite")
    assert code == 1
    assert "input.0.format" in _error(err) and "without --rewrite/--templates" in err
    assert (model / "config.pbtxt").read_text() == limited.text
    code, _, err = _render(model, "--instances", "3")
    assert code == 0, err
    assert (model / "config.pbtxt").read_text() == limited.text.replace("count: 2", "count: 3")


def test_the_diff_applies_with_git_apply(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil
    import subprocess

    git = shutil.which("git")
    if git is None:
        pytest.skip("git is not installed")
    paged = LICENSED.replace(
        "# Serves the tokenizer", "# \x0cServes the tokenizer"
    )  # a form feed inside a line
    model = _model(tmp_path, paged)
    monkeypatch.chdir(tmp_path)
    code, out, _ = _render(Path("tok"), "--instances", "2", "--max-queue-delay-us", "250", "--diff")
    assert code == 0 and out.startswith("--- a/tok/config.pbtxt\n+++ b/tok/config.pbtxt\n")
    subprocess.run([git, "apply", "-"], input=out.encode(), cwd=tmp_path, check=True)
    applied = (model / "config.pbtxt").read_text()
    (model / "config.pbtxt").write_text(paged)
    assert _render(Path("tok"), "--instances", "2", "--max-queue-delay-us", "250")[0] == 0
    assert applied == (model / "config.pbtxt").read_text() != paged
