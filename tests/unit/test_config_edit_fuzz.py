"""`edit_text` on configs written every way protobuf text allows: random syntax, layout and comments.

A strategy draws a config message and writes it with a random choice for every field: list
or one line per value, ``{ }`` or ``< >`` with or without a colon, repeated messages in
``[ ... ]``, separators, whitespace, CRLF, explicit defaults, fields interleaved, and unique
comments everywhere whitespace may go. Another strategy draws changes to the message. The
edited text must parse to the new message, an edit of nothing must change no byte, comments
outside removed fields must survive, and lines outside the changed fields must stay in order.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from google.protobuf import text_format
from hypothesis import given, settings
from hypothesis import strategies as st
from tritonclient.grpc import model_config_pb2

from tritongen.triton.pbtxt.edit import edit_text
from tritongen.triton.pbtxt.tree import Block, parse_tree
from tritongen.triton.pbtxt.values import is_map, is_repeated, map_entry

# --- the messages -------------------------------------------------------------------------------

STRINGS = st.text(alphabet="ab_1 #{}<>[]:;,\"'\\\né", max_size=6)
DATA_TYPES = ["TYPE_FP32", "TYPE_INT64", "TYPE_STRING", "TYPE_UINT8"]
KINDS = ["KIND_AUTO", "KIND_GPU", "KIND_CPU", "KIND_MODEL"]
SIZES = st.lists(st.integers(1, 64), max_size=3)
# Singular scalars sometimes written with their default value, which reads as "not set".
DEFAULTS_WRITTEN = {"max_batch_size", "max_queue_delay_microseconds", "preserve_ordering", "count", "graphs"}


def _parse(text: str) -> Any:
    return text_format.Parse(text, model_config_pb2.ModelConfig())


def _tensors(draw: st.DrawFn, tensors: Any) -> None:
    for _ in range(draw(st.integers(0, 2))):
        tensor = tensors.add()
        tensor.name = draw(STRINGS)
        tensor.data_type = model_config_pb2.DataType.Value(draw(st.sampled_from(DATA_TYPES)))
        tensor.dims.extend(draw(st.lists(st.integers(-1, 16), max_size=3)))


def _batcher(draw: st.DrawFn, batcher: Any) -> None:
    batcher.SetInParent()
    batcher.preferred_batch_size.extend(draw(SIZES))
    batcher.max_queue_delay_microseconds = draw(st.sampled_from([0, 0, 100, 5000]))
    batcher.preserve_ordering = draw(st.booleans())


def _groups(draw: st.DrawFn, message: Any) -> None:
    for _ in range(draw(st.integers(0, 3))):
        group = message.instance_group.add()
        group.name = draw(st.sampled_from(["", "", "g"]))
        group.count = draw(st.integers(0, 4))
        group.kind = model_config_pb2.ModelInstanceGroup.Kind.Value(draw(st.sampled_from(KINDS)))
        group.gpus.extend(draw(st.lists(st.integers(0, 3), max_size=2)))


@st.composite
def messages(draw: st.DrawFn) -> Any:
    """A config using the fields `render` edits, with any of them left out."""
    message = model_config_pb2.ModelConfig()
    message.name = draw(STRINGS)
    message.backend = draw(st.sampled_from(["", "onnxruntime", "python"]))
    message.max_batch_size = draw(st.integers(0, 16))
    _tensors(draw, message.input)
    _tensors(draw, message.output)
    batching = draw(st.sampled_from(["none", "dynamic", "oldest"]))
    if batching == "dynamic":
        _batcher(draw, message.dynamic_batching)
    elif batching == "oldest":
        _batcher(draw, message.sequence_batching.oldest)
        message.sequence_batching.max_sequence_idle_microseconds = draw(st.sampled_from([0, 1000]))
    _groups(draw, message)
    for key in draw(st.lists(STRINGS, max_size=3, unique=True)):
        message.parameters[key].string_value = draw(st.sampled_from(["", "x", "a#{"]))
    optimization = draw(st.sampled_from(["none", "empty", "graphs", "both"]))
    if optimization != "none":
        message.optimization.cuda.SetInParent()
        message.optimization.cuda.graphs = optimization in ("graphs", "both")
        message.optimization.cuda.busy_wait_events = optimization == "both"
    return message


# --- the text -----------------------------------------------------------------------------------

JUNK = st.text(alphabet="{}<>[]\"'#:; ab", max_size=5)
LINE_GAPS = ["\n", "\n", " ", "\n\n", "\t", "  ", "\n\t", " \n   "]
INNER_GAPS = ["", " ", " ", "\n", "\t", "  "]


@dataclass
class _Layout:
    """How one text is written: pretty (a field a line) or anything goes; comments as they come."""

    draw: st.DrawFn
    chaotic: bool
    unit: str
    comment_rate: int
    comments: list[str] = field(default_factory=list)

    def comment(self) -> str:
        text = f"#~{len(self.comments)}~" + self.draw(JUNK)
        self.comments.append(text)
        return text

    def gap(self, depth: int, *, line: bool = False, needed: bool = False) -> str:
        """Whitespace between two tokens (between fields where ``line``), perhaps with a comment."""
        indent = self.unit * depth
        if line and not self.chaotic:
            base = "\n" + indent
        elif self.chaotic:
            base = self.draw(
                st.sampled_from(LINE_GAPS if needed else INNER_GAPS if not line else ["", *LINE_GAPS])
            )
        else:
            base = " " if needed else self.draw(st.sampled_from(["", " "]))
        if (line or self.chaotic) and self.draw(st.integers(0, 9)) < self.comment_rate:
            if self.draw(st.booleans()):
                return " " + self.comment() + "\n" + indent
            return "\n" + indent + self.comment() + "\n" + indent
        return base

    def separator(self, depth: int) -> str:
        mark = self.draw(st.sampled_from(["", "", "", ",", ";"]))
        return self.gap(depth) + mark if mark and self.chaotic else mark

    def choose(self, options: list[str]) -> str:
        return str(self.draw(st.sampled_from(options)))


def _quoted(layout: _Layout, value: str) -> str:
    quote = layout.choose(['"', "'"])
    escaped = value.replace("\\", "\\\\").replace("\n", "\\n").replace(quote, "\\" + quote)
    if len(value) > 1 and layout.draw(st.booleans()):
        cut = len(value) // 2
        first = value[:cut].replace("\\", "\\\\").replace("\n", "\\n").replace(quote, "\\" + quote)
        rest = value[cut:].replace("\\", "\\\\").replace("\n", "\\n").replace(quote, "\\" + quote)
        return quote + first + quote + layout.choose([" ", "\n  ", ""]) + quote + rest + quote
    return quote + escaped + quote


def _scalar(layout: _Layout, descriptor: Any, value: Any) -> str:
    """One value as text: names or numbers for enums, any spelling of a bool, hex for some ints."""
    if descriptor.enum_type is not None:
        named = descriptor.enum_type.values_by_number[value].name
        return layout.choose([named, named, str(value)])
    if isinstance(value, bool):
        return layout.choose(["true", "True", "t", "1"] if value else ["false", "False", "f", "0"])
    if isinstance(value, str):
        return _quoted(layout, value)
    if value >= 0 and layout.draw(st.integers(0, 4)) == 0:
        return hex(value)
    return str(value)


def _block(layout: _Layout, name: str, message: Any, depth: int) -> str:
    """``name { ... }`` in one of its spellings (``name`` empty: an element of a list)."""
    opener, closer = ("<", ">") if layout.draw(st.integers(0, 3)) == 0 else ("{", "}")
    head = ""
    if name:
        head = name + layout.gap(depth)
        if layout.draw(st.booleans()):
            head += ":" + layout.gap(depth)
    body = _body(layout, message, depth + 1)
    if not body and layout.draw(st.booleans()):
        return head + opener + layout.choose(["", " "]) + closer
    return head + opener + body + layout.gap(depth, line=True) + closer


def _values_list(layout: _Layout, head: str, items: list[str], depth: int) -> str:
    """``head [ a, b ]``: ``head`` is the name with its colon (optional before messages)."""
    joined = "".join(
        ("," + layout.gap(depth + 1) if number else "") + item for number, item in enumerate(items)
    )
    return head + layout.gap(depth) + "[" + layout.gap(depth + 1) + joined + layout.gap(depth) + "]"


def _groups_of(layout: _Layout, count: int) -> list[tuple[int, int]]:
    """Cut ``count`` values into consecutive runs, each written as one occurrence."""
    cuts = sorted(set(layout.draw(st.lists(st.integers(1, max(count - 1, 1)), max_size=2))))
    bounds = [0, *[c for c in cuts if 0 < c < count], count]
    return list(itertools.pairwise(bounds))


def _repeated(layout: _Layout, descriptor: Any, items: list[Any], depth: int) -> list[str]:
    """The occurrences of a repeated field: lists, one-value lines, or both."""
    name = descriptor.name
    scalar = descriptor.message_type is None
    chunks: list[str] = []
    for first, last in _groups_of(layout, len(items)):
        group = items[first:last]
        if len(group) == 1 or layout.draw(st.booleans()):
            for item in group:
                if scalar:
                    chunks.append(name + ":" + layout.gap(depth) + _scalar(layout, descriptor, item))
                else:
                    chunks.append(_block(layout, name, item, depth))
        else:
            texts = [
                _scalar(layout, descriptor, item) if scalar else _block(layout, "", item, depth + 1)
                for item in group
            ]
            colon = ":" if scalar else layout.gap(depth) + layout.choose([":", ""])
            chunks.append(_values_list(layout, name + colon, texts, depth))
    if layout.draw(st.integers(0, 9)) == 0:
        chunks.insert(layout.draw(st.integers(0, len(chunks))), name + ": []")
    return chunks


def _chunks(layout: _Layout, message: Any, descriptor: Any, depth: int) -> list[str]:
    """Every occurrence of one field of ``message`` as text, in order."""
    value = getattr(message, descriptor.name)
    if is_map(descriptor):
        keys = layout.draw(st.permutations(sorted(value)))
        items = [map_entry(descriptor, key, value[key]) for key in keys]
        return _repeated(layout, descriptor, items, depth) if items else []
    if is_repeated(descriptor):
        return _repeated(layout, descriptor, list(value), depth) if value else []
    if descriptor.message_type is not None:
        return [_block(layout, descriptor.name, value, depth)] if message.HasField(descriptor.name) else []
    written = value != descriptor.default_value
    if written or (descriptor.name in DEFAULTS_WRITTEN and layout.draw(st.integers(0, 3)) == 0):
        return [
            descriptor.name + layout.gap(depth) + ":" + layout.gap(depth) + _scalar(layout, descriptor, value)
        ]
    return []


def _body(layout: _Layout, message: Any, depth: int) -> str:
    """The fields of ``message``, occurrences of different fields interleaved at random."""
    per_field = [_chunks(layout, message, d, depth) for d in message.DESCRIPTOR.fields]
    slots = [number for number, chunks in enumerate(per_field) if chunks for _ in chunks]
    order = layout.draw(st.permutations(slots))
    text = ""
    for number in order:
        chunk = per_field[number].pop(0)
        needed = not text.endswith((",", ";", "}", ">", "]", '"', "'"))
        text += layout.gap(depth, line=True, needed=needed) + chunk + layout.separator(depth)
    return text


@st.composite
def configs(draw: st.DrawFn) -> tuple[str, Any, list[str]]:
    """A message, a text that parses to it, and the comments the text holds."""
    message = draw(messages())
    layout = _Layout(
        draw, draw(st.booleans()), draw(st.sampled_from(["  ", "    ", "\t"])), draw(st.integers(0, 4))
    )
    text = _body(layout, message, 0) + draw(st.sampled_from(["\n", "", "\n\n"]))
    if draw(st.integers(0, 3)) == 0:
        text = text.replace("\n", "\r\n")
    assert _parse(text) == message, text
    return text, message, layout.comments


# --- the changes --------------------------------------------------------------------------------


def _batching(message: Any) -> Any | None:
    if message.HasField("dynamic_batching"):
        return message.dynamic_batching
    if message.HasField("sequence_batching"):
        return message.sequence_batching.oldest
    return None


def _change_preferred(draw: st.DrawFn, message: Any) -> None:
    batcher = _batching(message) or message.dynamic_batching
    sizes = batcher.preferred_batch_size
    how = draw(st.sampled_from(["replace", "extend", "shrink", "clear"]))
    if how == "replace":
        new = draw(st.lists(st.integers(1, 64), min_size=len(sizes), max_size=len(sizes)))
        del sizes[:]
        sizes.extend(new)
    elif how == "extend":
        sizes.extend(draw(st.lists(st.integers(1, 64), min_size=1, max_size=2)))
    elif how == "shrink":
        del sizes[draw(st.integers(0, len(sizes))) :]
    else:
        del sizes[:]


def _change_batcher(draw: st.DrawFn, message: Any) -> None:
    what = draw(st.sampled_from(["delay", "ordering", "toggle", "switch"]))
    batcher = _batching(message)
    if what == "switch" and message.HasField("dynamic_batching"):
        message.sequence_batching.oldest.SetInParent()  # clears dynamic batching: a oneof
    elif what in ("toggle", "switch") or batcher is None:
        if message.HasField("dynamic_batching"):
            message.ClearField("dynamic_batching")
        else:
            message.dynamic_batching.SetInParent()  # replaces sequence batching: a oneof
    elif what == "delay":
        batcher.max_queue_delay_microseconds = draw(st.sampled_from([0, 1, 100, 70000]))
    else:
        batcher.preserve_ordering = not batcher.preserve_ordering


def _change_groups(draw: st.DrawFn, message: Any) -> None:
    groups = message.instance_group
    how = draw(st.sampled_from(["add", "remove", "count", "kind", "gpus"]))
    if how == "add" or not groups:
        group = groups.add()
        group.count = draw(st.integers(0, 4))
        group.kind = model_config_pb2.ModelInstanceGroup.Kind.Value(draw(st.sampled_from(KINDS)))
        return
    group = groups[draw(st.integers(0, len(groups) - 1))]
    if how == "remove":
        groups.remove(group)
    elif how == "count":
        group.count = draw(st.integers(0, 8))
    elif how == "kind":
        group.kind = model_config_pb2.ModelInstanceGroup.Kind.Value(draw(st.sampled_from(KINDS)))
    else:
        del group.gpus[:]
        group.gpus.extend(draw(st.lists(st.integers(0, 3), max_size=3)))


def _change_parameters(draw: st.DrawFn, message: Any) -> None:
    parameters = message.parameters
    how = draw(st.sampled_from(["add", "remove", "change"]))
    if how == "add" or not parameters:
        parameters[draw(STRINGS)].string_value = draw(st.sampled_from(["", "new", "{#}"]))
        return
    key = draw(st.sampled_from(sorted(parameters)))
    if how == "remove":
        del parameters[key]
    else:
        parameters[key].string_value = draw(st.sampled_from(["", "changed", "'\""]))


def _change_misc(draw: st.DrawFn, message: Any) -> None:
    what = draw(st.sampled_from(["max_batch_size", "graphs", "busy", "optimization", "dims"]))
    cuda = message.optimization.cuda
    if what == "max_batch_size":
        message.max_batch_size = draw(st.integers(0, 32))
    elif what == "graphs":
        cuda.graphs = not cuda.graphs
    elif what == "busy":
        cuda.busy_wait_events = not cuda.busy_wait_events
    elif what == "optimization":
        message.ClearField("optimization")
    elif message.input:
        tensor = message.input[draw(st.integers(0, len(message.input) - 1))]
        del tensor.dims[:]
        tensor.dims.extend(draw(st.lists(st.integers(-1, 8), max_size=3)))


CHANGES: list[Callable[[st.DrawFn, Any], None]] = [
    _change_preferred,
    _change_batcher,
    _change_groups,
    _change_parameters,
    _change_misc,
]


@st.composite
def edits(draw: st.DrawFn) -> tuple[str, Any, Any, list[str]]:
    """A text, the message it means, that message changed one to three times, and the comments."""
    text, old, comments = draw(configs())
    new = model_config_pb2.ModelConfig()
    new.CopyFrom(old)
    for change in draw(st.lists(st.sampled_from(CHANGES), min_size=1, max_size=3)):
        change(draw, new)
    return text, old, new, comments


# --- what an edit may touch ---------------------------------------------------------------------


def _removes(old: Any, new: Any) -> bool:
    """Whether ``new`` lacks a message, list element or map entry that ``old`` has."""
    for descriptor in old.DESCRIPTOR.fields:
        before, after = getattr(old, descriptor.name), getattr(new, descriptor.name)
        if is_map(descriptor):
            if set(before) - set(after):
                return True
        elif is_repeated(descriptor):
            if len(after) < len(before):
                return True
            if descriptor.message_type is not None and any(map(_removes, before, after)):
                return True
        elif (
            descriptor.message_type is not None
            and old.HasField(descriptor.name)
            and (not new.HasField(descriptor.name) or _removes(before, after))
        ):
            return True
    return False


def _same(old: Any, new: Any, descriptor: Any) -> bool:
    before, after = getattr(old, descriptor.name), getattr(new, descriptor.name)
    if is_map(descriptor):
        return dict(before) == dict(after)
    if is_repeated(descriptor):
        return list(before) == list(after)
    if descriptor.message_type is not None and old.HasField(descriptor.name) != new.HasField(descriptor.name):
        return False
    return bool(before == after)


@dataclass
class _Lines:
    """Original lines an edit may change: the changed fields', and in a changed block its edges."""

    text: str
    allowed: set[int] = field(default_factory=set)

    def add(self, start: int, end: int) -> None:
        first = self.text.count("\n", 0, max(start, 0))
        last = self.text.count("\n", 0, max(end - 1, start, 0))
        self.allowed.update(range(first, last + 1))

    def walk(self, block: Block, old: Any, new: Any) -> None:
        changed = [d for d in new.DESCRIPTOR.fields if not _same(old, new, d)]
        for descriptor in changed:
            name = descriptor.name
            found = [f for f in block.fields if f.name == name]
            before, after = getattr(old, name), getattr(new, name)
            values = [value for occurrence in found for value in occurrence.values]
            if is_map(descriptor) or not found:
                for occurrence in found:
                    self.add(occurrence.start, occurrence.sep_end)
            elif descriptor.message_type is not None and not is_repeated(descriptor):
                if new.HasField(name) and isinstance(values[-1], Block):
                    self.walk(values[-1], before, after)
                else:
                    self.add(found[0].start, found[-1].sep_end)
            elif descriptor.message_type is not None and len(before) == len(after) == len(values):
                for value, one, other in zip(values, before, after, strict=True):
                    if one != other and isinstance(value, Block):
                        self.walk(value, one, other)
            else:
                for occurrence in found:
                    self.add(occurrence.start, occurrence.sep_end)
        if changed:
            if block.open >= 0:
                self.add(block.open, block.open + 1)
            self.add(block.close, block.close + 1)
            for occurrence in block.fields:
                self.add(occurrence.start, occurrence.start + 1)
                self.add(occurrence.sep_end - 1, occurrence.sep_end)


def _kept_lines(text: str, old: Any, new: Any) -> list[str]:
    """The original's non-blank lines no edit from ``old`` to ``new`` has a reason to touch."""
    lines = _Lines(text)
    lines.walk(parse_tree(text), old, new)
    return [
        line.rstrip("\r")
        for number, line in enumerate(text.split("\n"))
        if number not in lines.allowed and line.strip()
    ]


def _in_order(wanted: list[str], lines: list[str]) -> list[str]:
    """The lines of ``wanted`` not found, in order, among ``lines`` (empty: all there)."""
    position = 0
    for number, line in enumerate(wanted):
        while position < len(lines) and lines[position] != line:
            position += 1
        if position == len(lines):
            return wanted[number:]
        position += 1
    return []


# --- the properties -----------------------------------------------------------------------------

FUZZ = settings(max_examples=200, deadline=None, derandomize=True)


@FUZZ
@given(edits())
def test_an_edit_reads_back_as_the_new_config(case: tuple[str, Any, Any, list[str]]) -> None:
    text, old, new, _ = case
    after = edit_text(text, old, new)
    assert _parse(after) == new, after
    if "\r\n" in text:
        assert after.count("\n") == after.count("\r\n"), after


@FUZZ
@given(configs())
def test_an_edit_of_nothing_changes_no_byte(case: tuple[str, Any, list[str]]) -> None:
    text, message, _ = case
    assert edit_text(text, message, message) == text


@FUZZ
@given(edits())
def test_comments_outside_removed_fields_survive(case: tuple[str, Any, Any, list[str]]) -> None:
    text, old, new, comments = case
    if _removes(old, new):
        return
    after = edit_text(text, old, new)
    assert [c for c in comments if after.count(c) != 1] == [], after


@FUZZ
@given(edits())
def test_lines_outside_the_changed_fields_stay_in_order(case: tuple[str, Any, Any, list[str]]) -> None:
    text, old, new, _ = case
    after = edit_text(text, old, new)
    lost = _in_order(_kept_lines(text, old, new), [line.rstrip("\r") for line in after.split("\n")])
    assert lost == [], after


# --- regressions the fuzzing found --------------------------------------------------------------


def test_an_empty_list_written_last_is_no_anchor_for_new_values() -> None:
    text = "instance_group { gpus: 0\n  gpus: [] }\ninstance_group: []\n"
    old = _parse(text)
    new = model_config_pb2.ModelConfig()
    new.CopyFrom(old)
    new.instance_group[0].gpus.append(1)
    new.instance_group.add(count=2)
    assert _parse(edit_text(text, old, new)) == new


def test_a_field_removed_with_a_new_sibling_after_it_do_not_clash() -> None:
    text = "instance_group { count: 1 }\n"
    old = _parse(text)
    new = model_config_pb2.ModelConfig()
    new.CopyFrom(old)
    del new.instance_group[0]
    new.parameters["k"].string_value = "v"
    assert _parse(edit_text(text, old, new)) == new
