"""Which fields a config's text writes: Triton's parsed message cannot tell an omitted field from a zero.

proto3 scalars have no presence: ``instance_group [{ kind: KIND_CPU }]`` and
``instance_group [{ count: 0 kind: KIND_CPU }]`` parse to the same message. A rule that
judges a written value asks here whether it was written.
"""

from __future__ import annotations

from collections import Counter

from tritongen.triton.pbtxt.tree import Block, TreeError, parse_tree


def written_fields(text: str) -> frozenset[str] | None:
    """Every field path ``text`` writes, each element indexed (``instance_group[0].count``).

    Elements of a repeated field are numbered in the order they are written, whichever
    syntax writes them (``f [ {..}, {..} ]`` or ``f {..} f {..}``). ``None`` when the text is
    not protobuf text the syntax tree follows.
    """
    try:
        tree = parse_tree(text)
    except TreeError:
        return None
    paths: set[str] = set()
    _collect(tree, "", paths)
    return frozenset(paths)


def normalized(path: str) -> str:
    """``path`` with every segment indexed: ``a.b[2].c`` is ``a[0].b[2].c[0]``."""
    return ".".join(segment if segment.endswith("]") else f"{segment}[0]" for segment in path.split("."))


def _collect(block: Block, prefix: str, paths: set[str]) -> None:
    seen: Counter[str] = Counter()
    for occurrence in block.fields:
        for value in occurrence.values:
            path = f"{prefix}{occurrence.name}[{seen[occurrence.name]}]"
            seen[occurrence.name] += 1
            paths.add(path)
            if isinstance(value, Block):
                _collect(value, f"{path}.", paths)
