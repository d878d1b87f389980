"""Removing one table from TOML text with every other byte kept, for lack of a TOML writer that keeps comments."""

from __future__ import annotations

import copy
import json
import re
import tomllib
from typing import Any

# A table header line: `[a.b]` or `[[a.b]]`, then an optional comment. Its keys are read by _keys.
_HEADER = re.compile(r"^\s*\[\[?(?P<keys>[^\[\]#]+)\]\]?\s*(?:#.*)?$")
_KEY = re.compile(r"\s*(\"(?:[^\"\\]|\\.)*\"|'[^']*'|[A-Za-z0-9_-]+)\s*(\.|$)")


def without_table(text: str, keys: list[str]) -> str | None:
    """`text` without the table at `keys` and its sub-tables (`[mcp_servers.x]`, `[mcp_servers.x.env]`), each with
    the comment lines right above its header; None when that is not how the file writes it (an inline table, dotted
    keys), which the parsed result would show: the text is only returned when it parses to the old data less that
    table."""
    if _parsed(text) is None:
        return None
    lines = text.splitlines(keepends=True)
    headers = [i for i, line in enumerate(lines) if _HEADER.match(line)]
    drop: set[int] = set()
    for n, start in enumerate(headers):
        if _keys(lines[start])[: len(keys)] != keys:
            continue
        end = headers[n + 1] if n + 1 < len(headers) else len(lines)
        while end > start + 1 and _is_comment(lines[end - 1]) and end < len(lines):
            end -= 1  # comments right above the next header are that header's
        while start > 0 and _is_comment(lines[start - 1]):
            start -= 1
        if end == len(lines):  # the last table: the blank lines before it go too, not to leave them at the end
            while start > 0 and not lines[start - 1].strip():
                start -= 1
        drop.update(range(start, end))
    if not drop:
        return None
    new = "".join(line for i, line in enumerate(lines) if i not in drop)
    return new if _parsed_without(text, keys) == _parsed(new) else None


def _keys(header: str) -> list[str]:
    match = _HEADER.match(header)
    keys, rest = [], match.group("keys") if match else ""
    while rest.strip():
        part = _KEY.match(rest)
        if not part:
            return []
        word = part.group(1)
        keys.append(json.loads(word) if word.startswith('"') else word.strip("'"))
        rest = rest[part.end() :]
    return keys


def _is_comment(line: str) -> bool:
    return line.lstrip().startswith("#")


def _parsed(text: str) -> Any:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return None


def _parsed_without(text: str, keys: list[str]) -> Any:
    data = copy.deepcopy(_parsed(text))
    table = data
    for key in keys[:-1]:
        table = table.get(key) if isinstance(table, dict) else None
    if not isinstance(table, dict) or keys[-1] not in table:
        return None
    del table[keys[-1]]
    return data
