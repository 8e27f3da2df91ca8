"""Protobuf values and messages written as text in the style of the file they go into."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from tritongen.triton.pbtxt.tree import Block, Field, Scalar, value_end, value_start

_LABEL_REPEATED = 3


@dataclass(frozen=True)
class Style:
    """How a file writes what tritongen adds to it: newline, indent unit and list brackets."""

    newline: str = "\n"
    unit: str = "  "
    list_open: str = "[ "
    list_separator: str = ", "
    list_close: str = " ]"

    def list(self, items: list[str]) -> str:
        """``items`` as a list in this style."""
        return self.list_open + self.list_separator.join(items) + self.list_close


def detect_style(text: str, root: Block) -> Style:
    """The newline, indentation unit and list spacing ``text`` uses (tritongen's own where it shows none)."""
    newline = "\r\n" if "\r\n" in text else "\n"
    unit = _indent_unit(text, root) or "  "
    lists = [f for f in _all_fields(root) if f.is_list and f.values and isinstance(f.values[0], Scalar)]
    if not lists:
        return Style(newline, unit)
    first = lists[0]
    assert first.list_open is not None and first.list_close is not None
    spaced = text[first.list_open + 1 : first.list_open + 2] in (" ", "\t")
    separator = ", "
    for occurrence in lists:
        values = occurrence.values
        if len(values) > 1 and "\n" not in text[value_end(values[0]) : value_start(values[1])]:
            separator = text[value_end(values[0]) : value_start(values[1])]
            break
    return Style(newline, unit, "[ " if spaced else "[", separator, " ]" if spaced else "]")


def is_repeated(descriptor: Any) -> bool:
    """Whether a field descriptor is repeated (maps too)."""
    flag = getattr(type(descriptor), "is_repeated", None)
    if flag is not None:
        return bool(descriptor.is_repeated)
    return bool(descriptor.label == _LABEL_REPEATED)


def is_map(descriptor: Any) -> bool:
    """Whether a field descriptor is a map (a repeated key/value entry message)."""
    return descriptor.message_type is not None and bool(descriptor.message_type.GetOptions().map_entry)


def entry_class(descriptor: Any) -> Any:
    """The message class of a map field's entries."""
    from google.protobuf import message_factory

    return message_factory.GetMessageClass(descriptor.message_type)


def written_entry(text: str, block: Block, descriptor: Any) -> Any:
    """The entry message of map field ``descriptor`` that ``block`` of ``text`` writes."""
    from google.protobuf import text_format

    return text_format.Parse(text[block.open + 1 : block.close], entry_class(descriptor)())


def map_entry(descriptor: Any, key: Any, value: Any) -> Any:
    """One entry message of map field ``descriptor``."""
    entry = entry_class(descriptor)()
    entry.key = key
    if descriptor.message_type.fields_by_name["value"].message_type is not None:
        entry.value.CopyFrom(value)
    else:
        entry.value = value
    return entry


def scalar_text(descriptor: Any, value: Any) -> str:
    """One scalar value of field ``descriptor`` as protobuf text."""
    from google.protobuf import descriptor as pb
    from google.protobuf import text_encoding

    kind = descriptor.type
    if kind == pb.FieldDescriptor.TYPE_ENUM:
        named = descriptor.enum_type.values_by_number.get(value)
        return str(named.name) if named is not None else str(value)
    if kind == pb.FieldDescriptor.TYPE_BOOL:
        return "true" if value else "false"
    if kind == pb.FieldDescriptor.TYPE_STRING:
        return '"' + str(text_encoding.CEscape(value, as_utf8=True)) + '"'
    if kind == pb.FieldDescriptor.TYPE_BYTES:
        return '"' + str(text_encoding.CEscape(value, as_utf8=False)) + '"'
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        return repr(value) if math.isfinite(value) else ("inf" if value > 0 else "-inf")
    return str(value)


def message_lines(message: Any, style: Style) -> list[str]:
    """The set fields of ``message`` as lines, nested blocks indented by ``style.unit``."""
    lines: list[str] = []
    for descriptor in message.DESCRIPTOR.fields:
        if not has_value(message, descriptor):
            continue
        lines += field_lines(descriptor, getattr(message, descriptor.name), style)
    return lines


def field_lines(descriptor: Any, value: Any, style: Style) -> list[str]:
    """Field ``descriptor`` holding ``value`` (a list or map when repeated) as lines."""
    name = descriptor.name
    if is_map(descriptor):
        return [
            line for key in value for line in block_lines(name, map_entry(descriptor, key, value[key]), style)
        ]
    if is_repeated(descriptor) and descriptor.message_type is not None:
        return [line for item in value for line in block_lines(name, item, style)]
    if is_repeated(descriptor):
        return [f"{name}: {style.list([scalar_text(descriptor, item) for item in value])}"]
    if descriptor.message_type is not None:
        return block_lines(name, value, style)
    return [f"{name}: {scalar_text(descriptor, value)}"]


def block_lines(name: str, message: Any, style: Style) -> list[str]:
    """``name { ... }`` for ``message``; an empty message on one line."""
    inner = message_lines(message, style)
    if not inner:
        return [f"{name} {{ }}" if name else "{ }"]
    opening = f"{name} {{" if name else "{"
    return [opening, *(style.unit + line for line in inner), "}"]


def one_line(lines: list[str]) -> str:
    """Lines of :func:`field_lines` joined into one line."""
    return " ".join(line.strip() for line in lines)


def has_value(message: Any, descriptor: Any) -> bool:
    """Whether ``message`` sets field ``descriptor`` (a proto3 scalar: differs from its default)."""
    value = getattr(message, descriptor.name)
    if is_repeated(descriptor):
        return len(value) > 0
    if descriptor.message_type is not None or descriptor.has_presence:
        return bool(message.HasField(descriptor.name))
    return bool(value != descriptor.default_value)


def same_field(before: Any, after: Any, descriptor: Any) -> bool:
    """Whether two messages of one type agree on field ``descriptor``."""
    name = descriptor.name
    if is_map(descriptor):
        return dict(getattr(before, name)) == dict(getattr(after, name))
    if is_repeated(descriptor):
        return list(getattr(before, name)) == list(getattr(after, name))
    presence = descriptor.message_type is not None or descriptor.has_presence
    if presence and before.HasField(name) != after.HasField(name):
        return False
    return bool(getattr(before, name) == getattr(after, name))


def _indent_unit(text: str, block: Block) -> str | None:
    """The indentation a nested field adds to its parent's, from the first one written on its own line."""
    for occurrence in block.fields:
        for value in occurrence.values:
            if not isinstance(value, Block):
                continue
            parent = line_indent(text, value.open)
            for child in value.fields:
                own = line_indent(text, child.start)
                if starts_line(text, child.start) and own.startswith(parent) and len(own) > len(parent):
                    return own[len(parent) :]
            found = _indent_unit(text, value)
            if found:
                return found
    return None


def _all_fields(block: Block) -> list[Field]:
    found: list[Field] = []
    for occurrence in block.fields:
        found.append(occurrence)
        for value in occurrence.values:
            if isinstance(value, Block):
                found += _all_fields(value)
    return found


def line_indent(text: str, position: int) -> str:
    """The spaces and tabs that start the line of ``position``."""
    start = text.rfind("\n", 0, position) + 1
    line = text[start:position]
    return line[: len(line) - len(line.lstrip(" \t"))]


def starts_line(text: str, position: int) -> bool:
    """Whether only whitespace comes before ``position`` on its line."""
    return text[text.rfind("\n", 0, position) + 1 : position].strip() == ""
