"""Editing gateway.json from the CLI (`abilities-mcp gateway list|add|remove`) and from `init CLIENT --gateway`.

Safe like `workflows add|remove`: the file is read strictly (one that does not parse, names a server twice, or is not
an object is left alone with the reason), changed in memory with every other key, the key order and the
indentation kept, checked, and replaced atomically. An entry is checked as gateway.json's reader checks it before
it is written, so an edit never leaves a server the gateway would drop.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..errors import AbilitiesError, did_you_mean
from ..prerequisites.edits import indentation, write_atomically
from ..prerequisites.workflows import parse_json
from .config import FILE_NAME, check_entry

__all__ = ["FILE_NAME", "GatewayFileError", "add", "entry_problems", "read", "remove", "render", "servers", "write"]


class GatewayFileError(AbilitiesError):
    """An edit of gateway.json that cannot be made: the person at the terminal acts."""


def entry_problems(path: Path, name: str, entry: Any) -> list[str]:
    """Why `entry` cannot be server `name` of gateway.json (each with its field and the fix); [] when it can."""
    return [f"{d.path}: {d.message}" for d in check_entry(path, name, entry)]


def servers(path: Path) -> dict[str, Any]:
    """The servers of gateway.json by name, in file order; {} when there is no file."""
    data, _ = read(path)
    found = data.get("mcpServers", {})
    return found if isinstance(found, dict) else {}


def add(path: Path, name: str, entry: dict[str, Any]) -> None:
    """Add one server; an existing name is refused (remove it first), an entry the gateway would drop too."""
    data, indent = read(path)
    table = _table(data, path)
    if name in table:
        raise GatewayFileError(
            f"A server named {name!r} already exists in {path}; remove it first (abilities-mcp gateway remove "
            f"{name}) or pick another name. Nothing was changed."
        )
    problems = entry_problems(path, name, entry)
    if problems:
        raise GatewayFileError(f"Not added, the gateway could not use it: {'; '.join(problems)}. Nothing was changed.")
    table[name] = entry
    write(path, data, indent)


def remove(path: Path, name: str) -> None:
    """Delete one server; the others stay as they were."""
    data, indent = read(path)
    table = _table(data, path)
    if name not in table:
        close = did_you_mean(name, table)
        hint = f" Did you mean {close!r}?" if close else f" Servers: {', '.join(table) or 'none'}."
        raise GatewayFileError(f"Server {name!r} not found in {path}.{hint}")
    del table[name]
    write(path, data, indent)


def read(path: Path) -> tuple[dict[str, Any], int | str]:
    """The file's object and its indentation; a missing or empty file is an empty object."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}, 2
    except (OSError, UnicodeDecodeError) as exc:
        raise GatewayFileError(f"Cannot read {path}: {exc}; nothing was changed") from None
    if not text.strip():
        return {}, 2
    data, problems = parse_json(text, path)
    if problems:
        raise GatewayFileError(f"{problems[0]}; fix it before editing, nothing was changed")
    if not isinstance(data, dict):
        raise GatewayFileError(f'{path} must be a JSON object: {{"mcpServers": {{...}}}}; nothing was changed')
    return data, indentation(text)


def write(path: Path, data: dict[str, Any], indent: int | str) -> None:
    write_atomically(path, render(data, indent))


def render(data: dict[str, Any], indent: int | str) -> str:
    return json.dumps(data, indent=indent, ensure_ascii=False) + "\n"


def _table(data: dict[str, Any], path: Path) -> dict[str, Any]:
    table = data.setdefault("mcpServers", {})
    if not isinstance(table, dict):
        raise GatewayFileError(f"{path}: mcpServers must be a JSON object; fix it by hand, nothing was changed")
    return table
