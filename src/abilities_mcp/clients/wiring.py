"""What `init` wrote into a project's client configs, read back: which clients are set up here, the server entry
that starts abilities-mcp in each, and the hooks that carry the gates to the client's own tools (for `doctor`)."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from .configs import (
    CLAUDE_HOOKS,
    CLIENT_HOOKS,
    ROOT_OPTION,
    URL_OPTION,
    desktop_config_path,
    hook_words,
    is_our_hook,
    plugin_text,
    split_options,
)
from .jsonc import read_object
from .moves import GATEWAY_CLIENTS
from .remote import TOKEN_ENV
from .remote_configs import VSCODE_INPUT
from .servers import runs_abilities_mcp

# The files whose presence says a project is set up for a client (Claude Desktop's config is the user's).
CLIENT_FILES = {
    "claude": (".mcp.json", ".claude/settings.json"),
    "opencode": ("opencode.json", "opencode.jsonc", ".opencode/plugins/abilities-mcp.js"),
    "cursor": (".cursor/mcp.json", ".cursor/hooks.json"),
    "vscode": (".vscode/mcp.json",),
    "codex": (".codex/config.toml", ".codex/hooks.json"),
    "gemini": (".gemini/settings.json",),
}
LABELS = {
    "claude": "Claude Code",
    "opencode": "OpenCode",
    "cursor": "Cursor",
    "vscode": "VS Code",
    "codex": "Codex",
    "gemini": "Gemini CLI",
    "desktop": "Claude Desktop",
}
# Where each client's hooks live, relative to the project (OpenCode's are its plugin).
HOOK_FILES = {
    "claude": ".claude/settings.json",
    "codex": ".codex/hooks.json",
    "gemini": ".gemini/settings.json",
    "cursor": ".cursor/hooks.json",
}
PLUGIN_FILE = ".opencode/plugins/abilities-mcp.js"
# The plugin's line that names the command, as init fills it in.
_PLUGIN_COMMAND = re.compile(r"^const COMMAND = (\[.*\])$", re.M)
_PLUGIN_OPTIONS = re.compile(r"^const HOOK_OPTIONS = (\[.*\])$", re.M)


class Server(NamedTuple):
    """A server entry that starts abilities-mcp: its name, the file, the argv the client runs, and whether on; or
    (team mode) one that reaches a team server: its url, the argv empty."""

    name: str
    path: Path
    argv: list[str]
    enabled: bool
    url: str = ""


class Hooks(NamedTuple):
    """A client's hooks as init wires them: the file, the events that run abilities-mcp (event -> its argv, without
    `hook CLIENT EVENT` and its `--root`), the events init wires that have none, and the project each hook found is
    pinned to (event -> its --root; None: an older init's hook, which takes the client's working directory), and
    the team server each asks (event -> its --url; team mode, remote.py)."""

    path: Path
    found: dict[str, list[str]]
    missing: list[str]
    roots: dict[str, str | None]
    urls: dict[str, str] = {}


def set_up(root: Path, home: Path) -> list[str]:
    """The clients this project has a config for, in init's order; Claude Desktop when its config serves this
    project (its `--root`)."""
    clients = [c for c, files in CLIENT_FILES.items() if any((root / f).exists() for f in files)]
    desktop = servers("desktop", root, home)
    return clients + (["desktop"] if any(str(root) in s.argv for s in desktop) else [])


def servers(client: str, root: Path, home: Path) -> list[Server]:
    """The client's server entries that start abilities-mcp (any name, any way of starting it)."""
    for path, table in _server_tables(client, root, home):
        if table is not None:
            return [s for name, entry in table.items() if (s := _server(client, name, entry, path)) and serves(s.argv)]
    return []


def team_servers(client: str, root: Path, home: Path) -> list[Server]:
    """The client's server entries that reach a team server as `init --url` writes them: a url, and the person's
    token from $ABILITIES_TOKEN (no file holds the token itself)."""
    for path, table in _server_tables(client, root, home):
        if table is not None:
            return [
                Server(name, path, [], _enabled(entry), _url(entry))
                for name, entry in table.items()
                if isinstance(entry, dict) and _url(entry) and _sends_token(entry)
            ]
    return []


def _sends_token(entry: dict[str, Any]) -> bool:
    text = json.dumps(entry)
    return TOKEN_ENV in text or f"${{input:{VSCODE_INPUT}}}" in text


def _url(entry: dict[str, Any]) -> str:
    url = entry.get("url") or entry.get("httpUrl")
    return url if isinstance(url, str) else ""


def _enabled(entry: dict[str, Any]) -> bool:
    return entry.get("enabled") is not False and entry.get("disabled") is not True


def unreadable(client: str, root: Path, home: Path) -> Path | None:
    """The client's server file when it is there but does not parse (the client cannot read it either)."""
    for path, _ in _server_tables(client, root, home):
        if path.is_file():
            return None if (_toml(path) if client == "codex" else read_object(path)) is not None else path
    return None


def serves(argv: list[str]) -> bool:
    """Whether an argv runs this server: abilities-mcp (as the hook tells it: servers.py), then `serve`."""
    return "serve" in argv and runs_abilities_mcp(argv)


def hooks(client: str, root: Path) -> Hooks | None:
    """The hooks init wires for the client, as its file has them; None for a client without hooks (OpenCode's
    plugin: see `plugin`)."""
    if client not in HOOK_FILES:
        return None
    path = root / HOOK_FILES[client]
    table = (read_object(path) or {}).get("hooks")
    table = table if isinstance(table, dict) else {}
    wanted = CLAUDE_HOOKS if client == "claude" else CLIENT_HOOKS[client]
    found, roots, urls = {}, {}, {}
    for event in wanted:
        for handler in _handlers(table.get(event), client):
            if is_our_hook(handler, event, client):
                words, options = split_options(hook_words(handler))
                roots[event] = options.get(ROOT_OPTION)
                if URL_OPTION in options:
                    urls[event] = options[URL_OPTION]
                found[event] = words[:-3]  # the argv that starts abilities-mcp, before `hook CLIENT EVENT`
                break
    return Hooks(path, found, [e for e in wanted if e not in found], roots, urls)


def plugin(root: Path) -> tuple[list[str] | None, bool]:
    """OpenCode's plugin: the command it runs (None: no plugin, or no command line in it), and whether it is this
    version's plugin."""
    try:
        text = (root / PLUGIN_FILE).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None, False
    match = _PLUGIN_COMMAND.search(text)
    try:
        argv = json.loads(match.group(1)) if match else None
    except json.JSONDecodeError:
        argv = None
    if not (isinstance(argv, list) and argv and all(isinstance(w, str) for w in argv)):
        return None, False
    options = _plugin_options(text)
    return argv, options is not None and text == plugin_text(argv, options)


def _plugin_options(text: str) -> list[str] | None:
    """The hook options the plugin passes (`--url URL` in team mode); None when its line is missing or garbled."""
    match = _PLUGIN_OPTIONS.search(text)
    try:
        options = json.loads(match.group(1)) if match else None
    except json.JSONDecodeError:
        return None
    return options if isinstance(options, list) and all(isinstance(w, str) for w in options) else None


def runnable(argv: list[str], which: Callable[[str], str | None] = shutil.which) -> str | None:
    """Where the command's program is (an executable file, or found on PATH), or None when the client could not
    start it. Nothing is run: a config in a project someone else wrote could name anything."""
    if not argv:
        return None
    program = argv[0]
    if os.sep in program or (os.altsep and os.altsep in program):
        return program if os.path.isfile(program) and os.access(program, os.X_OK) else None
    return which(program)


def _server_tables(client: str, root: Path, home: Path) -> list[tuple[Path, dict[str, Any] | None]]:
    """The files the client reads its servers from (the first that exists counts), each with its servers' table."""
    if client == "desktop":
        path = desktop_config_path(sys.platform, os.environ, home)
        return [(path, _table(read_object(path), ["mcpServers"]))]
    relpaths, keys = GATEWAY_CLIENTS[client]
    found = []
    for relpath in relpaths:
        path = root / relpath
        data = _toml(path) if client == "codex" else read_object(path)
        table = _table(data, keys)
        if client == "opencode" and isinstance(table, dict) and isinstance(table.get("servers"), dict):
            table = table["servers"]  # OpenCode's V2 layout
        found.append((path, table))
    return found


def _server(client: str, name: str, entry: Any, path: Path) -> Server | None:
    if not isinstance(entry, dict):
        return None
    command, args = entry.get("command"), entry.get("args", [])
    if client == "opencode":
        command, args = (command[0], command[1:]) if isinstance(command, list) and command else (None, [])
    if not isinstance(command, str) or not isinstance(args, list):
        return None
    enabled = entry.get("enabled") is not False and entry.get("disabled") is not True
    return Server(name, path, [command, *map(str, args)], enabled)


def _table(data: Any, keys: list[str]) -> dict[str, Any] | None:
    for key in keys:
        data = data.get(key) if isinstance(data, dict) else None
    return data if isinstance(data, dict) else None


def _toml(path: Path) -> dict[str, Any] | None:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None


def _handlers(groups: Any, client: str) -> list[Any]:
    """An event's handlers: Cursor lists them flat, the others in matcher groups."""
    if not isinstance(groups, list):
        return []
    if client == "cursor":
        return groups
    return [h for g in groups if isinstance(g, dict) and isinstance(g.get("hooks"), list) for h in g["hooks"]]
