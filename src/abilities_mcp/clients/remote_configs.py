"""`abilities-mcp init CLIENT --url URL`: a client set up for a team server (docs/team.md): the server entry is the
team server's MCP endpoint, `URL/mcp`, sending the person's token from $ABILITIES_TOKEN, in each client's own
spelling, and the hooks ask the team server (`hook CLIENT EVENT --url URL`, remote.py) instead of reading this
machine's state.

The token is never written into a file: each client reads it from the environment when it connects (Claude Code and
Gemini CLI expand `${ABILITIES_TOKEN}` in headers, Cursor `${env:ABILITIES_TOKEN}`, OpenCode `{env:ABILITIES_TOKEN}`,
Codex reads `bearer_token_env_var`), and VS Code asks for it once (a password input).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from .configs import (
    OPENCODE_SCHEMA,
    _plan_entry,
    _plan_plugin,
    _put_client_hooks,
    _put_cursor_hooks,
    _put_entry,
    _put_hooks,
    codex_server,
)
from .configs import init as configs_init
from .planned import ConfigError, Planned, plan_json
from .remote import TOKEN_ENV

MCP_PATH = "/mcp"
BEARER = "Bearer "
# VS Code asks for the token once and keeps it in its secret storage.
VSCODE_INPUT = "abilities-token"


def team_url(url: str) -> str:
    """The team server's address as the hooks name it: http(s), a host, no query; a trailing /mcp taken off (the
    entries add it). ConfigError naming the form otherwise."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment:
        raise ConfigError(f"--url {url!r}: give the team server's address, e.g. https://abilities.example.com")
    base = url.strip().rstrip("/")
    return base.removesuffix(MCP_PATH) if base.endswith(MCP_PATH) else base


def init(project_root: Path, client: str, *, url: str, **options: Any) -> int:
    """`init CLIENT --url URL`: configs.init, with the files planned for the team server at `url`."""

    def plan(root: Path, client: str, name: str, argv: list[str], force: bool, gateway: bool) -> list[Planned]:
        return planned_remote(root, client, name, argv, force, url, gateway)

    return configs_init(project_root, client, plan=plan, **options)


def planned_remote(
    root: Path, client: str, name: str, argv: list[str], force: bool, url: str, gateway: bool = False
) -> list[Planned]:
    """The client's files for the team server at `url`."""
    if gateway:
        raise ConfigError(
            "--gateway with --url: a team server's upstreams are in its own gateway.json, on the server; "
            "nothing was changed"
        )
    if client not in PLANNERS:
        raise ConfigError(
            f"--url: {client} is not set up for a team server here (Claude Desktop adds remote servers as connectors "
            "in its own settings); nothing was changed"
        )
    return PLANNERS[client](root, name, argv, force, team_url(url))


def _header(value: str) -> dict[str, str]:
    return {"Authorization": BEARER + value}


def _claude(root: Path, name: str, argv: list[str], force: bool, url: str) -> list[Planned]:
    entry = {"type": "http", "url": url + MCP_PATH, "headers": _header(f"${{{TOKEN_ENV}}}")}
    settings = root / ".claude" / "settings.json"
    return [
        _plan_entry(root / ".mcp.json", ["mcpServers"], name, entry, force),
        plan_json(settings, lambda data: _put_hooks(data, argv, force, settings, root, url)),
    ]


def _gemini(root: Path, name: str, argv: list[str], force: bool, url: str) -> list[Planned]:
    path = root / ".gemini" / "settings.json"
    entry = {"httpUrl": url + MCP_PATH, "headers": _header(f"${{{TOKEN_ENV}}}")}

    def merge(data: dict[str, Any]) -> list[str]:
        notes = _put_entry(data, ["mcpServers"], name, entry, force, path)
        return notes + _put_client_hooks(data, argv, force, path, "gemini", root, url)

    return [plan_json(path, merge)]


def _cursor(root: Path, name: str, argv: list[str], force: bool, url: str) -> list[Planned]:
    hooks = root / ".cursor" / "hooks.json"
    entry = {"url": url + MCP_PATH, "headers": _header(f"${{env:{TOKEN_ENV}}}")}
    return [
        _plan_entry(root / ".cursor" / "mcp.json", ["mcpServers"], name, entry, force),
        plan_json(hooks, lambda data: _put_cursor_hooks(data, argv, force, hooks, root, url), new_file={"version": 1}),
    ]


def _vscode(root: Path, name: str, argv: list[str], force: bool, url: str) -> list[Planned]:
    """VS Code: the server only (its hooks are not wired), the token asked once as a password input."""
    path = root / ".vscode" / "mcp.json"
    entry = {"type": "http", "url": url + MCP_PATH, "headers": _header(f"${{input:{VSCODE_INPUT}}}")}
    wanted = {"type": "promptString", "id": VSCODE_INPUT, "description": "abilities-mcp access token", "password": True}

    def merge(data: dict[str, Any]) -> list[str]:
        inputs = data.setdefault("inputs", [])
        if not isinstance(inputs, list):
            raise ConfigError(f"{path}: inputs must be a JSON array; fix it by hand, nothing was changed")
        if not any(isinstance(i, dict) and i.get("id") == VSCODE_INPUT for i in inputs):
            inputs.append(wanted)
        return _put_entry(data, ["servers"], name, entry, force, path)

    return [plan_json(path, merge)]


def _opencode(root: Path, name: str, argv: list[str], force: bool, url: str) -> list[Planned]:
    """OpenCode: a remote server; its plugin, which runs the hooks, as for a local server (they read the project
    pinned by --root: see docs/team.md for what that leaves to the team server)."""
    path = root / "opencode.json"
    if not path.exists() and (root / "opencode.jsonc").exists():
        path = root / "opencode.jsonc"
    entry = {"type": "remote", "url": url + MCP_PATH, "headers": _header(f"{{env:{TOKEN_ENV}}}")}

    def merge(data: dict[str, Any]) -> list[str]:
        mcp = data.get("mcp")
        servers = mcp.get("servers") if isinstance(mcp, dict) else None
        if isinstance(servers, dict) and all(isinstance(v, dict) for v in servers.values()):  # V2
            return _put_entry(data, ["mcp", "servers"], name, entry, force, path)
        return _put_entry(data, ["mcp"], name, {**entry, "enabled": True}, force, path)

    return [plan_json(path, merge, new_file={"$schema": OPENCODE_SCHEMA}), _plan_plugin(root, argv, url)]


def _codex(root: Path, name: str, argv: list[str], force: bool, url: str) -> list[Planned]:
    """Codex: `url` and `bearer_token_env_var` appended to config.toml (never rewritten), the hooks in hooks.json."""
    path, hooks = root / ".codex" / "config.toml", root / ".codex" / "hooks.json"
    entry = {"url": url + MCP_PATH, "bearer_token_env_var": TOKEN_ENV}
    server = codex_server(path, name, entry, force)
    return [server, plan_json(hooks, lambda d: _put_client_hooks(d, argv, force, hooks, "codex", root, url))]


PLANNERS: dict[str, Callable[[Path, str, list[str], bool, str], list[Planned]]] = {
    "claude": _claude,
    "opencode": _opencode,
    "cursor": _cursor,
    "vscode": _vscode,
    "codex": _codex,
    "gemini": _gemini,
}
