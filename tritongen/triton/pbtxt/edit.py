"""Turn a file's text into text for another message by changing only the fields that differ.

Everything else (comments, blank lines, field order, list syntax, separators, indentation,
line endings) stays byte for byte. A changed scalar gets its new value where the old one
was; a list keeps its brackets and spacing; a field the file lacks goes after its nearest
preceding sibling in the schema's order, indented like its neighbours; a field removed
takes its own lines with it (or just itself, where it shares a line).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tritongen.triton.pbtxt.tree import Block, Field, Value, parse_tree, value_end, value_start
from tritongen.triton.pbtxt.values import (
    Style,
    block_lines,
    detect_style,
    field_lines,
    is_map,
    is_repeated,
    line_indent,
    map_entry,
    one_line,
    same_field,
    scalar_text,
    starts_line,
    written_entry,
)


class EditError(Exception):
    """The file cannot be edited in place (the reason is one line)."""


@dataclass(frozen=True)
class _Edit:
    start: int
    end: int
    text: str
    order: int


def edit_text(text: str, old: Any, new: Any) -> str:
    """``text`` (which parses to message ``old``) changed so that it parses to ``new``.

    Raises:
        TreeError: the text uses syntax the editor does not follow.
        EditError: a map key is given twice, so which entry to change is ambiguous.
    """
    root = parse_tree(text)
    editor = _Editor(text, detect_style(text, root))
    editor.block(root, old, new, editor.child_indent(root, ""))
    return editor.result()


class _Editor:
    def __init__(self, text: str, style: Style) -> None:
        self.text = text
        self.style = style
        self.edits: list[_Edit] = []
        self.inserts: list[tuple[Block, Any, list[list[str]], str]] = []
        """Fields to add, placed when the walk is done (their neighbours may be going)."""
        self.deleted: set[int] = set()
        """The fields (by ``id``) the walk removes: no new field is placed beside them."""

    # --- the walk ---------------------------------------------------------------------------

    def block(self, block: Block, old: Any, new: Any, indent: str) -> None:
        """Edit ``block`` (written for ``old``) so that it holds ``new``; ``indent`` is its fields'."""
        for descriptor in new.DESCRIPTOR.fields:
            if same_field(old, new, descriptor):
                continue
            found = [f for f in block.fields if f.name == descriptor.name]
            before, after = getattr(old, descriptor.name), getattr(new, descriptor.name)
            if is_map(descriptor):
                self.map_field(block, found, descriptor, after, indent)
            elif is_repeated(descriptor) and descriptor.message_type is not None:
                self.messages(block, found, descriptor, (list(before), list(after)), indent)
            elif is_repeated(descriptor):
                self.scalars(block, found, descriptor, (list(before), list(after)), indent)
            elif descriptor.message_type is not None:
                self.message(block, found, descriptor, (old, new), indent)
            elif found:
                self.replace(found[-1].values[-1], scalar_text(descriptor, after))
            else:
                self.insert(block, descriptor, [field_lines(descriptor, after, self.style)], indent)

    def message(
        self, block: Block, found: list[Field], descriptor: Any, pair: tuple[Any, Any], indent: str
    ) -> None:
        old, new = pair
        name = descriptor.name
        if not new.HasField(name):
            for occurrence in found:
                self.delete_field(occurrence)
        elif found and isinstance(found[-1].values[-1], Block):
            inner = found[-1].values[-1]
            self.block(inner, getattr(old, name), getattr(new, name), self.child_indent(inner, indent))
        else:
            self.insert(block, descriptor, [block_lines(name, getattr(new, name), self.style)], indent)

    def scalars(
        self,
        block: Block,
        found: list[Field],
        descriptor: Any,
        lists: tuple[list[Any], list[Any]],
        indent: str,
    ) -> None:
        before, after = lists
        written = [value for occurrence in found for value in occurrence.values]
        for value, old, new in zip(written, before, after, strict=False):
            if old != new:
                self.replace(value, scalar_text(descriptor, new))
        texts = [scalar_text(descriptor, item) for item in after[len(before) :]]
        if len(after) < len(before):
            self.delete_tail(found, len(after))
        elif texts and not written:
            self.insert(block, descriptor, [[f"{descriptor.name}: {self.style.list(texts)}"]], indent)
        elif texts:
            last = _last_written(found)
            if last.is_list:
                self.append_to_list(last, texts)
            else:
                self.add_after(last, [[f"{descriptor.name}: {item}"] for item in texts])

    def messages(
        self,
        block: Block,
        found: list[Field],
        descriptor: Any,
        lists: tuple[list[Any], list[Any]],
        indent: str,
    ) -> None:
        before, after = lists
        written = [value for occurrence in found for value in occurrence.values]
        for value, old, new in zip(written, before, after, strict=False):
            if old != new and isinstance(value, Block):
                self.block(value, old, new, self.child_indent(value, indent + self.style.unit))
        added = after[len(before) :]
        if len(after) < len(before):
            self.delete_tail(found, len(after))
        elif added and not written:
            self.insert(
                block, descriptor, [block_lines(descriptor.name, item, self.style) for item in added], indent
            )
        elif added:
            self.append_messages(_last_written(found), descriptor.name, added)

    def map_field(self, block: Block, found: list[Field], descriptor: Any, after: Any, indent: str) -> None:
        """Entries matched by key: changed ones edited, missing ones removed, new ones appended."""
        seen: dict[Any, int] = {}
        doomed: dict[int, list[int]] = {}
        for number, occurrence in enumerate(found):
            for index, value in enumerate(occurrence.values):
                if not isinstance(value, Block):
                    continue
                entry = written_entry(self.text, value, descriptor)
                if entry.key in seen:
                    raise EditError(f"{descriptor.name} key {entry.key!r} is given twice")
                seen[entry.key] = number
                if entry.key not in after:
                    doomed.setdefault(number, []).append(index)
                else:
                    wanted = map_entry(descriptor, entry.key, after[entry.key])
                    if entry != wanted:
                        self.block(value, entry, wanted, self.child_indent(value, indent + self.style.unit))
        for number, indexes in doomed.items():
            self.delete_values(found[number], indexes)
        added = [map_entry(descriptor, key, after[key]) for key in after if key not in seen]
        kept = [f for number, f in enumerate(found) if len(doomed.get(number, [])) < len(f.values)]
        if added and not kept:
            self.insert(
                block, descriptor, [block_lines(descriptor.name, item, self.style) for item in added], indent
            )
        elif added:
            self.append_messages(kept[-1], descriptor.name, added)

    # --- edits ---------------------------------------------------------------------------------

    def replace(self, value: Value, text: str) -> None:
        self._edit(value_start(value), value_end(value), text)

    def delete_tail(self, found: list[Field], keep: int) -> None:
        """Remove every written value after the first ``keep`` (whole fields where none is left)."""
        seen = 0
        for occurrence in found:
            count = len(occurrence.values)
            if seen >= keep:
                self.delete_field(occurrence)
            elif seen + count > keep:
                self.delete_values(occurrence, list(range(keep - seen, count)))
            seen += count

    def delete_values(self, occurrence: Field, indexes: list[int]) -> None:
        """Remove some values of a list, with their separators; the whole field where all go."""
        values = occurrence.values
        if len(indexes) >= len(values):
            self.delete_field(occurrence)
            return
        for first, last in _runs(sorted(indexes)):
            if first > 0:
                self._edit(value_end(values[first - 1]), value_end(values[last]), "")
            else:
                self._edit(value_start(values[0]), value_start(values[last + 1]), "")

    def delete_field(self, occurrence: Field) -> None:
        """Remove a field: its lines where it has them to itself, else just its text."""
        self.deleted.add(id(occurrence))
        text = self.text
        if self._starts_line(occurrence.start) and self._ends_line(occurrence.sep_end):
            start = self._line_start(occurrence.start)
            end = self._next_line(occurrence.sep_end)
            blank_above = start > 0 and self._blank_line_before(start)
            if blank_above and (end >= len(text) or self._line_is_blank(end)):
                end = self._next_line(end) if end < len(text) else end
                if end >= len(text):
                    start = self._line_start(start - 1)
            self._edit(start, end, "")
            return
        end = occurrence.sep_end
        while end < len(text) and text[end] in " \t":
            end += 1
        self._edit(occurrence.start, end, "")

    def insert(self, block: Block, descriptor: Any, groups: list[list[str]], indent: str) -> None:
        """Add new occurrences of a field the block lacks (placed by :meth:`place` once the walk is done)."""
        self.inserts.append((block, descriptor, groups, indent))

    def place(self) -> None:
        """Put each new field after its nearest preceding sibling that stays (an empty block's together)."""
        empty: dict[int, tuple[Block, str, list[list[str]]]] = {}
        for block, descriptor, groups, indent in self.inserts:
            order = {field.name: number for number, field in enumerate(descriptor.containing_type.fields)}
            rank = order[descriptor.name]
            staying = [f for f in block.fields if id(f) not in self.deleted]
            preceding = [f for f in staying if order.get(f.name, -1) < rank]
            if preceding:
                self.add_after(max(preceding, key=lambda f: (order[f.name], f.start)), groups)
            elif staying:
                self.add_before(staying[0], groups)
            else:
                empty.setdefault(block.open, (block, indent, []))[2].extend(groups)
        for block, indent, groups in empty.values():
            self.add_into(block, groups, indent)

    def add_after(self, anchor: Field, groups: list[list[str]]) -> None:
        if not self._ends_line(anchor.sep_end):
            self._edit(anchor.sep_end, anchor.sep_end, "".join(" " + one_line(group) for group in groups))
            return
        indent = self._indent(anchor.start)
        spaced = self._blank_line_before(self._line_start(anchor.start)) or self._line_is_blank(
            self._next_line(anchor.sep_end)
        )
        newline = self.style.newline
        added = ""
        for group in groups:
            blank = (
                newline
                if spaced and (len(group) > 1 or (anchor.values and isinstance(anchor.values[0], Block)))
                else ""
            )
            added += newline + blank + newline.join(indent + line for line in group)
        position = self._line_end(anchor.sep_end)
        self._edit(position, position, added)

    def add_before(self, first: Field, groups: list[list[str]]) -> None:
        if not self._starts_line(first.start):
            self._edit(first.start, first.start, "".join(one_line(group) + " " for group in groups))
            return
        indent = self._indent(first.start)
        newline = self.style.newline
        added = "".join(newline.join(indent + line for line in group) + newline for group in groups)
        position = self._line_start(first.start)
        self._edit(position, position, added)

    def add_into(self, block: Block, groups: list[list[str]], indent: str) -> None:
        newline = self.style.newline
        if block.open < 0:  # an empty file (comments at most)
            lead = newline if self.text and not self.text.endswith("\n") else ""
            added = "".join(newline.join(group) + newline for group in groups)
            self._edit(len(self.text), len(self.text), lead + added)
            return
        inside = self.text[block.open + 1 : block.close]
        if "\n" in inside:  # after the opening line (and its comment)
            added = "".join(newline + newline.join(indent + line for line in group) for group in groups)
            position = self._line_end(block.open)
            self._edit(position, position, added)
        elif block.fields:  # on one line, its fields all going
            self._edit(block.open + 1, block.open + 1, "".join(" " + one_line(group) for group in groups))
        else:
            self._edit(block.open + 1, block.close, " " + " ".join(one_line(group) for group in groups) + " ")

    def append_to_list(self, occurrence: Field, texts: list[str]) -> None:
        last = occurrence.values[-1]
        if self._starts_line(value_start(last)):
            joint = "," + self.style.newline + self._indent(value_start(last))
        else:
            joint = self.style.list_separator
        self._edit(value_end(last), value_end(last), "".join(joint + text for text in texts))

    def append_messages(self, last: Field, name: str, items: list[Any]) -> None:
        """New elements of a repeated message after the last written one, in the same syntax."""
        if not last.is_list:
            self.add_after(last, [block_lines(name, item, self.style) for item in items])
            return
        element = last.values[-1]
        if self._starts_line(value_start(element)):
            indent = self._indent(value_start(element))
            newline = self.style.newline
            added = "".join(
                "," + newline + newline.join(indent + line for line in block_lines("", item, self.style))
                for item in items
            )
        else:
            added = "".join(", " + one_line(block_lines("", item, self.style)) for item in items)
        self._edit(value_end(element), value_end(element), added)

    # --- text positions ------------------------------------------------------------------------

    def child_indent(self, block: Block, fallback: str) -> str:
        for occurrence in block.fields:
            if self._starts_line(occurrence.start):
                return self._indent(occurrence.start)
        if block.open >= 0:
            return self._indent(block.open) + self.style.unit
        return fallback

    def result(self) -> str:
        self.place()
        text = self.text
        ordered = sorted(self.edits, key=lambda e: (e.start, e.order), reverse=True)
        bound = len(text) + 1
        for edit in ordered:
            if edit.end > bound:
                raise EditError("two changes touch the same text")
            text = text[: edit.start] + edit.text + text[edit.end :]
            bound = edit.start
        return text

    def _edit(self, start: int, end: int, text: str) -> None:
        self.edits.append(_Edit(start, end, text, len(self.edits)))

    def _line_start(self, position: int) -> int:
        return self.text.rfind("\n", 0, position) + 1

    def _line_end(self, position: int) -> int:
        r"""Where the line of ``position`` ends, before its ``\r\n`` or ``\n``."""
        end = self.text.find("\n", position)
        if end < 0:
            return len(self.text)
        return end - 1 if end > 0 and self.text[end - 1] == "\r" else end

    def _next_line(self, position: int) -> int:
        end = self.text.find("\n", position)
        return len(self.text) if end < 0 else end + 1

    def _starts_line(self, position: int) -> bool:
        return starts_line(self.text, position)

    def _ends_line(self, position: int) -> bool:
        rest = self.text[position : self._line_end(position)].strip()
        return rest == "" or rest.startswith("#")

    def _indent(self, position: int) -> str:
        return line_indent(self.text, position)

    def _line_is_blank(self, start: int) -> bool:
        return start < len(self.text) and self.text[start : self._line_end(start)].strip() == ""

    def _blank_line_before(self, line_start: int) -> bool:
        return line_start > 0 and self._line_is_blank(self._line_start(line_start - 1))


def _last_written(found: list[Field]) -> Field:
    """The last occurrence that holds a value (an empty ``[]`` is nothing to write after)."""
    return [occurrence for occurrence in found if occurrence.values][-1]


def _runs(indexes: list[int]) -> list[tuple[int, int]]:
    """Consecutive runs of sorted indexes, as (first, last) pairs."""
    runs: list[tuple[int, int]] = []
    for index in indexes:
        if runs and runs[-1][1] == index - 1:
            runs[-1] = (runs[-1][0], index)
        else:
            runs.append((index, index))
    return runs
