"""Carry the differences between two messages into a third, and name them in words."""

from __future__ import annotations

from typing import Any

from tritongen.triton.pbtxt.values import is_map, is_repeated, same_field, scalar_text


def patch_message(target: Any, before: Any, after: Any) -> None:
    """Change ``target`` (in place) wherever ``before`` and ``after`` differ, and only there.

    ``before`` is what the change started from, ``target`` the same config as written (it
    may leave out what ``before`` spells out, or hold more). A sub-message present in all
    three is patched field by field, as are repeated messages of one length in all three
    and map entries; anything else takes ``after``'s value whole.
    """
    for descriptor in after.DESCRIPTOR.fields:
        if same_field(before, after, descriptor):
            continue
        name = descriptor.name
        old, new, mine = getattr(before, name), getattr(after, name), getattr(target, name)
        if is_map(descriptor):
            _patch_map(mine, old, new, descriptor)
        elif (
            is_repeated(descriptor)
            and descriptor.message_type is not None
            and len(old) == len(new) == len(mine)
        ):
            for items in zip(mine, old, new, strict=False):
                patch_message(*items)
        elif _present(before, name) and _present(after, name) and _present(target, name):
            patch_message(mine, old, new)
        else:
            _copy_field(target, after, descriptor)


def describe_changes(before: Any, after: Any, prefix: str = "") -> list[str]:
    """Each difference as ``path old → new`` (``dynamic_batching.max_queue_delay_microseconds 0 → 500``)."""
    changes: list[str] = []
    for descriptor in after.DESCRIPTOR.fields:
        if same_field(before, after, descriptor):
            continue
        name = descriptor.name
        path = prefix + name
        old, new = getattr(before, name), getattr(after, name)
        if is_map(descriptor):
            changes.append(f"{path} {_keys(old)} → {_keys(new)}")
        elif is_repeated(descriptor) and descriptor.message_type is not None:
            if len(old) == len(new):
                for number, (one, other) in enumerate(zip(old, new, strict=False)):
                    changes += describe_changes(one, other, f"{path}[{number}].")
            elif not old:
                changes += [f"{path} added: {_one_line(item)}" for item in new]
            else:
                changes.append(f"{path} {len(old)} → {len(new)} entries")
        elif is_repeated(descriptor):
            changes.append(f"{path} {_listed(descriptor, old)} → {_listed(descriptor, new)}")
        elif descriptor.message_type is not None:
            if not before.HasField(name):
                changes.append(f"{path} added: {_one_line(new)}")
            elif not after.HasField(name):
                changes.append(f"{path} removed")
            else:
                changes += describe_changes(old, new, path + ".")
        else:
            changes.append(f"{path} {scalar_text(descriptor, old)} → {scalar_text(descriptor, new)}")
    return changes


def _present(message: Any, name: str) -> bool:
    descriptor = message.DESCRIPTOR.fields_by_name[name]
    return (
        descriptor.message_type is not None and not is_repeated(descriptor) and bool(message.HasField(name))
    )


def _copy_field(target: Any, source: Any, descriptor: Any) -> None:
    name = descriptor.name
    target.ClearField(name)
    value = getattr(source, name)
    if is_repeated(descriptor) and descriptor.message_type is not None:
        for item in value:
            getattr(target, name).add().CopyFrom(item)
    elif is_repeated(descriptor):
        getattr(target, name).extend(value)
    elif descriptor.message_type is not None:
        if source.HasField(name):
            getattr(target, name).CopyFrom(value)
    else:
        setattr(target, name, value)


def _patch_map(mine: Any, old: Any, new: Any, descriptor: Any) -> None:
    message_values = descriptor.message_type.fields_by_name["value"].message_type is not None
    for key in old:
        if key not in new and key in mine:
            del mine[key]
    for key in new:
        if key in old and old[key] == new[key]:
            continue
        if message_values:
            mine[key].CopyFrom(new[key])
        else:
            mine[key] = new[key]


def _one_line(message: Any) -> str:
    from google.protobuf import text_format

    inside = str(text_format.MessageToString(message, as_one_line=True)).strip()
    return "{ " + inside + " }" if inside else "{ }"


def _listed(descriptor: Any, values: Any) -> str:
    return "[" + ", ".join(scalar_text(descriptor, value) for value in values) + "]"


def _keys(values: Any) -> str:
    return "{" + ", ".join(str(key) for key in values) + "}"
