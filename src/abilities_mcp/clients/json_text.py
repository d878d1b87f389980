"""JSON text rewritten to new data with the bytes of every member that did not change kept, for lack of a JSON writer
that keeps a person's formatting: `init` adds its entries without reflowing the others (a one-line entry stays one)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from json.decoder import scanstring
from typing import Any

_DECODER = json.JSONDecoder()
_SPACE = " \t\r\n"


@dataclass
class _Node:
    """One value of the text: where it is, what it says, and for an object or array its members in order."""

    start: int
    end: int
    value: Any
    # (key or None for an array's item, where the member's text starts, where its key ends, its value)
    members: list[tuple[str | None, int, int, _Node]] | None = None
    container: bool = False


def rewrite(text: str, data: Any, indent: int | str) -> str:
    """`text` (plain JSON) saying `data`: members whose value is unchanged keep their text, new ones are written in
    the file's indentation; the whole file dumped anew when the text cannot be read so (never a wrong result)."""
    try:
        root = _parse(text, 0)
        if _skip(text, root.end) != len(text):
            raise ValueError("text after the top-level value")
        new = text[: root.start] + _render(text, root, data, _unit(indent), "", True) + text[root.end :]
        if _same(json.loads(new), data):
            return new
    except (ValueError, IndexError, RecursionError):
        pass
    return json.dumps(data, indent=indent, ensure_ascii=False) + "\n"


def _render(text: str, node: _Node, new: Any, unit: str, prefix: str, multiline: bool) -> str:
    """The text of `node` saying `new`; `prefix`: the indentation of the line it is on."""
    if _same(node.value, new):
        return text[node.start : node.end]
    if not node.container or type(new) is not type(node.value):
        return _dump(new, prefix, unit, multiline)
    members = node.members or []
    first = members[0][1] if members else node.end - 1
    lead = text[node.start + 1 : first]
    if members:
        multiline = "\n" in lead
        inner = lead.rsplit("\n", 1)[-1] if multiline else ""
        trail = text[members[-1][3].end : node.end - 1]
        between = text[members[0][3].end : members[1][1]] if len(members) > 1 else ("," + lead if multiline else ", ")
    else:
        inner = prefix + unit
        lead, between, trail = ("\n" + inner, ",\n" + inner, "\n" + prefix) if multiline else ("", ", ", "")
    parts = _parts(text, node, new, unit, inner, multiline)
    if not parts:
        return text[node.start] + text[node.end - 1]
    return text[node.start] + lead + between.join(parts) + trail + text[node.end - 1]


def _parts(text: str, node: _Node, new: Any, unit: str, inner: str, multiline: bool) -> list[str]:
    """Each member of `new`: an old member's text (its value rendered anew if it changed) or a new one dumped."""
    members = node.members or []
    if isinstance(new, list):
        olds = [m[3] for m in members]
        return [
            _render(text, olds[i], value, unit, inner, multiline)
            if i < len(olds)
            else _dump(value, inner, unit, multiline)
            for i, value in enumerate(new)
        ]
    by_key = {key: (start, key_end, value) for key, start, key_end, value in members}
    colon = text[members[0][2] : members[0][3].start] if members else ": "
    parts = []
    for key, value in new.items():
        if key in by_key:
            start, key_end, old = by_key[key]
            parts.append(text[start : old.start] + _render(text, old, value, unit, inner, multiline))
        else:
            parts.append(json.dumps(key, ensure_ascii=False) + colon + _dump(value, inner, unit, multiline))
    return parts


def _dump(value: Any, prefix: str, unit: str, multiline: bool) -> str:
    if not multiline:
        return json.dumps(value, ensure_ascii=False)
    return json.dumps(value, indent=unit, ensure_ascii=False).replace("\n", "\n" + prefix)


def _parse(text: str, i: int) -> _Node:
    i = _skip(text, i)
    if text[i] == "{":
        return _container(text, i, "}")
    if text[i] == "[":
        return _container(text, i, "]")
    value, end = _DECODER.raw_decode(text, i)
    return _Node(i, end, value)


def _container(text: str, start: int, close: str) -> _Node:
    """An object or an array with each member's place."""
    members: list[tuple[str | None, int, int, _Node]] = []
    i = _skip(text, start + 1)
    while text[i] != close:
        member, key, key_end = i, None, i
        if close == "}":
            if text[i] != '"':
                raise ValueError(f"a key expected at {i}")
            key, key_end = scanstring(text, i + 1)
            colon = _skip(text, key_end)
            if text[colon] != ":":
                raise ValueError(f"':' expected at {colon}")
            i = colon + 1
        value = _parse(text, i)
        members.append((key, member, key_end if key is not None else value.start, value))
        i = _skip(text, value.end)
        if text[i] == ",":
            i = _skip(text, i + 1)
        elif text[i] != close:
            raise ValueError(f"',' or {close!r} expected at {i}")
    if close == "}":
        data: Any = {key: value.value for key, _, _, value in members}
    else:
        data = [value.value for _, _, _, value in members]
    return _Node(start, i + 1, data, members, container=True)


def _skip(text: str, i: int) -> int:
    while i < len(text) and text[i] in _SPACE:
        i += 1
    return i


def _unit(indent: int | str) -> str:
    return indent if isinstance(indent, str) else " " * indent


def _same(a: Any, b: Any) -> bool:
    """Equal as JSON (1 and true, 1 and 1.0 are not)."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
