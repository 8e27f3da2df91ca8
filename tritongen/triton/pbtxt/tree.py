"""Protobuf text as written: every field with the offsets of its name, values and separator.

Triton's parser reads a ``config.pbtxt`` into a message and forgets how it was written.
Editing a user's file in place needs the opposite: where each field starts and ends, which
list syntax it used, what lies between (comments, blank lines). This is a syntax-only tree:
it knows no schema; :mod:`tritongen.triton.pbtxt.edit` pairs it with the parsed message.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_TOKEN = re.compile(
    r"""
    (?P<space>\s+)
    | (?P<comment>\#[^\n]*)
    | (?P<string>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
    | (?P<word>-?\s*[A-Za-z0-9_.+\-]+)
    | (?P<punct>[{}\[\]<>:,;/])
    """,
    re.VERBOSE,
)
_OPENERS = {"{": "}", "<": ">"}


class TreeError(Exception):
    """The text uses syntax the tree does not follow (e.g. extensions, ``Any`` type URLs)."""

    def __init__(self, offset: int, detail: str) -> None:
        super().__init__(detail)
        self.offset = offset
        self.detail = detail


@dataclass(frozen=True)
class Token:
    """One token: ``word`` (identifier or number), ``string`` or ``punct``, and its span."""

    kind: str
    text: str
    start: int
    end: int


@dataclass
class Scalar:
    """A scalar value as written (adjacent strings are one value)."""

    start: int
    end: int


@dataclass
class Block:
    """A message: its opening and closing delimiter offsets and the fields between."""

    open: int
    close: int
    fields: list[Field] = field(default_factory=list)


Value = Scalar | Block


@dataclass
class Field:
    """One occurrence of a field: ``name: value``, ``name { ... }`` or ``name: [ v, ... ]``.

    ``end`` is where the value ends, ``sep_end`` where the optional ``,``/``;`` after it
    ends (``end`` without one). A list keeps its brackets' offsets.
    """

    name: str
    start: int
    end: int
    sep_end: int
    values: list[Value]
    list_open: int | None = None
    list_close: int | None = None

    @property
    def is_list(self) -> bool:
        """Whether the values are written in ``[ ... ]`` list syntax."""
        return self.list_open is not None


def tokenize(text: str) -> list[Token]:
    """Split protobuf text into tokens, dropping whitespace and comments.

    Raises:
        TreeError: a character no token starts with.
    """
    tokens: list[Token] = []
    position = 0
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None:
            raise TreeError(position, f"unexpected character {text[position]!r}")
        kind = match.lastgroup or ""
        if kind not in ("space", "comment"):
            tokens.append(Token(kind, match.group(), match.start(), match.end()))
        position = match.end()
    return tokens


def parse_tree(text: str) -> Block:
    """The top-level message of ``text`` as a :class:`Block` spanning the whole text.

    Raises:
        TreeError: the text does not follow protobuf text syntax the tree knows.
    """
    parser = _Parser(tokenize(text), len(text))
    return Block(-1, len(text), parser.fields(closer=None))


class _Parser:
    def __init__(self, tokens: list[Token], length: int) -> None:
        self.tokens = tokens
        self.position = 0
        self.length = length

    def peek(self) -> Token | None:
        return self.tokens[self.position] if self.position < len(self.tokens) else None

    def take(self) -> Token:
        token = self.peek()
        if token is None:
            raise TreeError(self.length, "unexpected end of text")
        self.position += 1
        return token

    def fields(self, closer: str | None) -> list[Field]:
        found: list[Field] = []
        while (token := self.peek()) is not None and not (token.kind == "punct" and token.text == closer):
            found.append(self.field())
        if closer is not None and token is None:
            raise TreeError(self.length, f"missing {closer!r}")
        return found

    def field(self) -> Field:
        name = self.take()
        if name.kind != "word":
            raise TreeError(name.start, f"expected a field name, found {name.text!r}")
        if self._at(":"):
            self.take()
        token = self.peek()
        if token is not None and token.text == "[" and token.kind == "punct":
            occurrence = self._list(name)
        else:
            value = self.value()
            occurrence = Field(name.text, name.start, value_end(value), value_end(value), [value])
        if self._at(",") or self._at(";"):
            occurrence.sep_end = self.take().end
        return occurrence

    def _list(self, name: Token) -> Field:
        opened = self.take()
        values: list[Value] = []
        while not self._at("]"):
            values.append(self.value())
            if self._at(","):
                self.take()
        closed = self.take()
        return Field(name.text, name.start, closed.end, closed.end, values, opened.start, closed.start)

    def value(self) -> Value:
        token = self.take()
        if token.kind == "punct" and token.text in _OPENERS:
            fields = self.fields(_OPENERS[token.text])
            return Block(token.start, self.take().start, fields)
        if token.kind == "string":
            end = token.end
            while (more := self.peek()) is not None and more.kind == "string":
                end = self.take().end
            return Scalar(token.start, end)
        if token.kind == "word":
            return Scalar(token.start, token.end)
        raise TreeError(token.start, f"unexpected {token.text!r}")

    def _at(self, text: str) -> bool:
        token = self.peek()
        return token is not None and token.kind == "punct" and token.text == text


def value_start(value: Value) -> int:
    """Where a value starts: at its opening delimiter, or at its first character."""
    return value.open if isinstance(value, Block) else value.start


def value_end(value: Value) -> int:
    """Where a value ends: after its closing delimiter, or after its last character."""
    return value.close + 1 if isinstance(value, Block) else value.end
