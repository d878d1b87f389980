"""The MCP servers a client is configured with, read from its own config files (those `init` writes, project and
user): which names run this server, which servers OpenCode knows, and which server a Cursor command is.

The hook names this server's tools and the gateway's by these whole names (DESIGN §9), never by how a name ends.
Stdlib only, and read lazily, project files before user ones: the hook asks only for a tool that could be one of
this server's, and reads only that client's files.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path

from ..records import Record
from . import jsonc

# typing's TYPE_CHECKING without importing typing: the hook would pay milliseconds for it on every call.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# init's default --name: this server's name in a client whose configs name no server that runs abilities-mcp.
DEFAULT_NAME = "abilities"
# The console script, by name or path (`init --command` writes either).
SCRIPT_NAMES = {"abilities-mcp", "abilities-mcp.exe"}
# The Python package, run as `python -m abilities_mcp`.
MODULE = "abilities_mcp"
# Commands that run another command named among their arguments: `uvx --from git+URL abilities-mcp`, `uv run
# abilities-mcp`, `pipx run abilities-mcp`, `env X=1 abilities-mcp`.
RUNNERS = {"uvx", "uv", "pipx", "env"}
# Config files bigger than this are not read (~/.claude.json holds every project's settings; a hook must not stall).
MAX_CONFIG_BYTES = 16 * 1024 * 1024
# OpenCode names a tool `<server>_<tool>`, each part with anything but letters, digits, "_" and "-" made "_".
_OPENCODE_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]")


class Entry(Record, fields="name argv url"):
    """One configured server: how the client starts it (a command and its arguments) or reaches it (a url)."""

    __slots__ = ()

    name: str
    argv: tuple[str, ...]
    url: str


Scope = dict[str, Entry]  # one config file's servers, by name


def runs_abilities_mcp(argv: tuple[str, ...] | list[str]) -> bool:
    """Whether a command starts this server: the abilities-mcp script (by name or path), `python -m abilities_mcp`,
    or a runner given either (`uvx --from … abilities-mcp`, `uv run abilities-mcp`)."""
    if not argv:
        return False
    program = _basename(argv[0])
    if program in SCRIPT_NAMES or _runs_module(argv):
        return True
    return program in RUNNERS and any(_basename(word) in SCRIPT_NAMES for word in argv[1:])


def _runs_module(argv: tuple[str, ...] | list[str]) -> bool:
    return any(word == "-m" and nxt == MODULE for word, nxt in zip(argv, argv[1:], strict=False))


def _basename(word: str) -> str:
    return word.replace("\\", "/").rsplit("/", 1)[-1]


def is_ours(client: str, root: Path, server: str) -> bool:
    """Whether `server` is this server's name in the client: the first config (project before user) that names it
    says whether it runs abilities-mcp; named nowhere, it is ours only as init's default name, and only while no
    config names another server that runs abilities-mcp."""
    seen_ours = False
    for scope in scopes(client, root):
        entry = _find(scope, server, client)
        if entry is not None:
            return runs_abilities_mcp(entry.argv)
        seen_ours = seen_ours or any(runs_abilities_mcp(e.argv) for e in scope.values())
    return server.lower() == DEFAULT_NAME and not seen_ours


def own_names(client: str, root: Path) -> frozenset[str]:
    """Every name this server has in the client's configs; init's default name when none has one."""
    names = {e.name for scope in scopes(client, root) for e in scope.values() if runs_abilities_mcp(e.argv)}
    return frozenset(names or {DEFAULT_NAME})


def remote_names(client: str, root: Path, url: str) -> frozenset[str]:
    """The names of the client's configured servers that reach the team server at `url` (their url is under it, as
    `init --url` writes `URL/mcp`); init's default name when none does."""
    base = url.rstrip("/")
    names = {
        e.name
        for scope in scopes(client, root)
        for e in scope.values()
        if e.url and (e.url.rstrip("/") == base or e.url.startswith(base + "/"))
    }
    return frozenset(names or {DEFAULT_NAME})


def known_names(client: str, root: Path) -> frozenset[str]:
    """Every server name in the client's configs, this server's default name included when no config names it."""
    found = list(scopes(client, root))
    names = {name for scope in found for name in scope}
    if not any(runs_abilities_mcp(e.argv) for scope in found for e in scope.values()):
        names.add(DEFAULT_NAME)
    return frozenset(names)


def cursor_server(root: Path, origin: str) -> Entry | None:
    """The server of Cursor's `.cursor/mcp.json` (project, then user) whose url, or whole command with its
    arguments, is `origin` (what Cursor sends with an MCP call instead of the server's name); a bare program is
    the one server that runs it, if only one does."""
    wanted = " ".join(origin.split())
    entries = [e for scope in scopes("cursor", root) for e in scope.values()]
    whole = [e for e in entries if wanted in _spellings(e, root)]
    if whole:
        return whole[0]
    program = [e for e in entries if e.argv and wanted == e.argv[0]]
    return program[0] if len(program) == 1 else None


def _spellings(entry: Entry, root: Path) -> set[str]:
    """How a Cursor entry may reach the hook: its url, or its command with its arguments, the workspace
    variables as written or expanded."""
    if entry.url:
        return {entry.url}
    text = " ".join(" ".join(entry.argv).split())
    return {text, text.replace("${workspaceFolder}", str(root)).replace("${userHome}", str(Path.home()))}


def _find(scope: Scope, server: str, client: str) -> Entry | None:
    if client == "opencode":  # the name as OpenCode writes it into tool names
        return next((e for e in scope.values() if e.name.lower() == server.lower()), None)
    return scope.get(server)


def scopes(client: str, root: Path) -> Iterator[Scope]:
    """The client's config files' servers, project first, each read only when the one before did not answer."""
    for read in READERS.get(client, ()):
        yield read(root)


# --- each client's files ------------------------------------------------------------------------------------------


def _claude_project(root: Path) -> Scope:
    return _servers(_read_json(root / ".mcp.json"), ("mcpServers",))


def _claude_user(root: Path) -> Scope:
    """~/.claude.json: `claude mcp add`'s local scope (projects[<root>].mcpServers), then its user scope."""
    data = _read_json(Path.home() / ".claude.json")
    projects = data.get("projects") if isinstance(data, dict) else None
    local = projects.get(str(root)) if isinstance(projects, dict) else None
    return {**_servers(data, ("mcpServers",)), **_servers(local, ("mcpServers",))}


def _codex(folder: Callable[[Path], Path]) -> Callable[[Path], Scope]:
    def read(root: Path) -> Scope:
        data = _read_toml(folder(root) / "config.toml")
        return _servers(data, ("mcp_servers",))

    return read


def _codex_home(root: Path) -> Path:
    """Codex's own folder: $CODEX_HOME, else ~/.codex (whatever the project)."""
    return Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex")


def _gemini(folder: Callable[[Path], Path]) -> Callable[[Path], Scope]:
    return lambda root: _servers(_read_json(folder(root) / ".gemini" / "settings.json"), ("mcpServers",))


def _cursor(folder: Callable[[Path], Path]) -> Callable[[Path], Scope]:
    return lambda root: _servers(_read_json(folder(root) / ".cursor" / "mcp.json"), ("mcpServers",))


def _opencode_project(root: Path) -> Scope:
    """The project's opencode.json(c), .opencode/opencode.json(c) (the later wins a name) and $OPENCODE_CONFIG."""
    scope: Scope = {}
    files = [root / n for n in OPENCODE_FILES] + [root / ".opencode" / n for n in OPENCODE_FILES]
    extra = os.environ.get("OPENCODE_CONFIG")
    for path in [*files, *([Path(extra)] if extra else [])]:
        scope |= _opencode_servers(_read_json(path))
    return scope


def _opencode_user(root: Path) -> Scope:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    scope: Scope = {}
    for name in OPENCODE_FILES:
        scope |= _opencode_servers(_read_json(Path(base) / "opencode" / name))
    return scope


OPENCODE_FILES = ("opencode.json", "opencode.jsonc")


def _opencode_servers(data: Any) -> Scope:
    """OpenCode's `mcp` servers (V2: `mcp.servers`), by the names its tools carry; a local server's command is a
    list, a remote one's a url."""
    mcp = data.get("mcp") if isinstance(data, dict) else None
    if isinstance(mcp, dict) and isinstance(mcp.get("servers"), dict):
        if all(isinstance(v, dict) for v in mcp["servers"].values()):
            mcp = mcp["servers"]
    found = _servers(mcp, ())
    return {
        _OPENCODE_UNSAFE.sub("_", name): e._replace(name=_OPENCODE_UNSAFE.sub("_", name)) for name, e in found.items()
    }


READERS: dict[str, tuple[Callable[[Path], Scope], ...]] = {
    "claude": (_claude_project, _claude_user),
    "codex": (_codex(lambda root: root / ".codex"), _codex(_codex_home)),
    "gemini": (_gemini(lambda root: root), _gemini(lambda root: Path.home())),
    "cursor": (_cursor(lambda root: root), _cursor(lambda root: Path.home())),
    "opencode": (_opencode_project, _opencode_user),
}


def _servers(data: Any, keys: tuple[str, ...]) -> Scope:
    """The server entries under `keys`, each as an Entry (a command: its argv; OpenCode's: already a list)."""
    for key in keys:
        data = data.get(key) if isinstance(data, dict) else None
    if not isinstance(data, dict):
        return {}
    return {name: _entry(name, value) for name, value in data.items() if isinstance(value, dict)}


def _entry(name: str, value: dict[str, Any]) -> Entry:
    command, args = value.get("command"), value.get("args")
    words = command if isinstance(command, list) else [command] if isinstance(command, str) else []
    words = [*words, *(args if isinstance(args, list) else [])]
    url = value.get("url") or value.get("httpUrl") or ""
    return Entry(name, tuple(w for w in words if isinstance(w, str)), url if isinstance(url, str) else "")


def _read_json(path: Path) -> Any:
    """A JSON file's value, comments and trailing commas allowed; None when it is missing or unreadable."""
    text = _read_text(path)
    if text is None:
        return None
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        pass
    try:  # JSON with comments: Gemini CLI's, OpenCode's and Cursor's files may have them
        return json.loads(jsonc.strip(text))
    except (ValueError, RecursionError):
        return None


def _read_toml(path: Path) -> Any:
    text = _read_text(path)
    if text is None:
        return None
    import tomllib  # here: only a Codex call of a tool that could be this server's pays for it

    try:
        return tomllib.loads(text)
    except (tomllib.TOMLDecodeError, RecursionError):
        return None


def _read_text(path: Path) -> str | None:
    try:
        if not path.is_file() or path.stat().st_size > MAX_CONFIG_BYTES:
            return None
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
