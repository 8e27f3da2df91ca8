"""Map keys written twice: Triton's parser keeps the last entry and drops the first without a word."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tritongen.triton.pbtxt.tree import Block, parse_tree
from tritongen.triton.pbtxt.values import is_map, written_entry


@dataclass(frozen=True)
class RepeatedKey:
    """A key given twice in one map field, and the lines of its two entries."""

    path: str
    key: Any
    first_line: int
    second_line: int

    def text(self) -> str:
        """One line: which field, which key, where."""
        return (
            f"{self.path} key {self.key!r} is given twice (lines {self.first_line} and {self.second_line}); "
            "Triton would keep only the second"
        )


def repeated_keys(text: str, message_class: Any) -> list[RepeatedKey]:
    """Every map key ``text`` gives twice in one map, for messages of ``message_class``.

    Raises:
        TreeError: the text uses syntax the tree does not follow.
    """
    found: list[RepeatedKey] = []
    _walk(text, parse_tree(text), message_class.DESCRIPTOR, "", found)
    return found


def _walk(text: str, block: Block, descriptor: Any, prefix: str, found: list[RepeatedKey]) -> None:
    seen: dict[tuple[str, Any], int] = {}
    for occurrence in block.fields:
        field = descriptor.fields_by_name.get(occurrence.name)
        if field is None or field.message_type is None:
            continue
        for value in occurrence.values:
            if not isinstance(value, Block):
                continue
            line = text.count("\n", 0, value.open) + 1
            if is_map(field):
                entry = written_entry(text, value, field)
                if (field.name, entry.key) in seen:
                    found.append(
                        RepeatedKey(prefix + field.name, entry.key, seen[field.name, entry.key], line)
                    )
                else:
                    seen[field.name, entry.key] = line
            else:
                _walk(text, value, field.message_type, f"{prefix}{field.name}.", found)
