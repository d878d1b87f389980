"""`init CLIENT --gateway`: the client's other servers moved into gateway.json, translated from the client's spelling,
so the agent reaches them only through this server's gates; one the gateway cannot take stays, with the reason."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

from ..prerequisites.edits import indentation
from . import json_text
from .planned import ConfigError, Planned, load_json, read_text
from .toml_text import without_table

# The clients whose other servers --gateway can move: their config files (the first that exists), and the keys
# down to its servers' object. Each entry is translated into gateway.json's shape first (_translated).
GATEWAY_CLIENTS: dict[str, tuple[tuple[str, ...], list[str]]] = {
    "claude": ((".mcp.json",), ["mcpServers"]),
    "cursor": ((".cursor/mcp.json",), ["mcpServers"]),
    "vscode": ((".vscode/mcp.json",), ["servers"]),
    "gemini": ((".gemini/settings.json",), ["mcpServers"]),
    "opencode": (("opencode.json", "opencode.jsonc"), ["mcp"]),
    "codex": ((".codex/config.toml",), ["mcp_servers"]),
}
# Why --gateway leaves a client alone.
NOT_MOVABLE = {
    "desktop": "Claude Desktop's config is your user's, not the project's, and gateway.json belongs to a project",
}
# Codex server keys gateway.json has nothing for: that server stays in config.toml.
CODEX_KEPT = ("enabled_tools", "disabled_tools", "scopes", "oauth_resource", "oauth")
# Codex's ways to send HTTP headers, all folded into gateway.json's `headers`.
CODEX_HEADERS = {"http_headers", "env_http_headers", "bearer_token_env_var"}
# OpenCode's variables: {env:VAR} the gateway says ${VAR}; {file:PATH} it has nothing for.
_OPENCODE_ENV = re.compile(r"\{env:([A-Za-z_][A-Za-z0-9_]*)\}")
_OPENCODE_FILE = re.compile(r"\{file:[^}]*\}")
# Gemini CLI's $VAR in env values (its ${VAR} is the gateway's too).
_GEMINI_BARE = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")
# VS Code variables the gateway cannot expand ("${env:VAR}" it can: it becomes "${VAR}").
_VSCODE_VARIABLE = re.compile(r"\$\{(?!env:)[^}]*\}")


def behind_gateway(root: Path, client: str, name: str, plans: list[Planned], force: bool) -> list[Planned]:
    """The client's config without its other servers, and gateway.json with them: planned together, so a server
    that cannot move (or a gateway.json that cannot take it) stops the command with nothing written."""
    from ..gateway import edits as gateway_edits

    relpaths, keys = GATEWAY_CLIENTS[client]
    index = next(i for i, p in enumerate(plans) if any(p.path == root / r for r in relpaths))
    plan = plans[index]
    path, gateway_path = plan.path, root / gateway_edits.FILE_NAME
    data, strict = _servers_file(client, path, plan.new)
    table: Any = data
    for key in keys:
        table = table.get(key, {}) if isinstance(table, dict) else {}
    if client == "opencode" and isinstance(table.get("servers"), dict):  # OpenCode's V2 shape: mcp.servers
        table = table["servers"]
    moved, notes = {}, []
    for server, entry in table.items() if isinstance(table, dict) else []:
        if server == name:
            continue
        translated, why = _translated(client, entry)
        problems = why or gateway_edits.entry_problems(gateway_path, server, translated)
        if problems:
            notes.append(_stays(server, path, f"gateway.json cannot take it ({'; '.join(problems)})"))
        else:
            moved[server] = translated
    new = _toml_without(path, plan.new, moved, notes) if client == "codex" else plan.new
    if not moved:
        plans[index] = Planned(path, plan.old, new, [*plan.notes, *notes, f"no servers in {path} to move"])
        return plans
    if not strict:
        raise ConfigError(
            f"{path} has comments or trailing commas, which a rewrite would lose, so init changed nothing; move "
            f"these servers into gateway.json by hand and delete them there: {', '.join(moved)}"
        )
    if client != "codex":
        for server in moved:
            del table[server]
        new = json_text.rewrite(plan.new, data, indentation(plan.old) if plan.old else 2)
    notes.append(
        f"moved {', '.join(moved)} from {path} to {gateway_path}: the agent reaches them through abilities-mcp's "
        "tool_search and tool_call, behind the workflows' gates; restart the client to load the change"
    )
    plans[index] = Planned(path, plan.old, new, plan.notes)
    return [*plans, _plan_gateway(gateway_path, moved, force, notes)]


def _servers_file(client: str, path: Path, text: str) -> tuple[dict, bool]:
    """The client's config as data, and whether a rewrite keeps everything (JSON without comments; TOML is edited
    as text, so always)."""
    if not text.strip():
        return {}, True
    if client == "codex":
        try:
            return tomllib.loads(text), True
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: not valid TOML: {exc}; fix the syntax there, nothing was changed") from None
    return load_json(path, text)


def _toml_without(path: Path, text: str, moved: dict[str, Any], notes: list[str]) -> str:
    """Codex's config.toml without the moved servers' tables, every other byte kept; a server written otherwise
    (an inline table, dotted keys) stays, out of `moved`, with a note."""
    for server in list(moved):
        left = without_table(text, ["mcp_servers", server])
        if left is None:
            del moved[server]
            notes.append(_stays(server, path, f"init removes only a [mcp_servers.{server}] table; move it by hand"))
        else:
            text = left
    return text


def _stays(server: str, path: Path, why: str) -> str:
    return f"kept {server} in {path}, where the agent can still call it directly: {why}"


def not_movable(client: str) -> str:
    return (
        f"--gateway cannot move {client}'s servers: {NOT_MOVABLE.get(client, 'it has no project server list')}. "
        "Move them into gateway.json with `abilities-mcp gateway add NAME -- COMMAND ARGS...` and remove them from "
        "its config by hand"
    )


def _translated(client: str, entry: Any) -> tuple[Any, list[str]]:
    """A client's server entry in gateway.json's shape (the .mcp.json one), or why it cannot be said there."""
    if not isinstance(entry, dict) or client in ("claude", "cursor"):
        return entry, []  # already that shape; gateway.json's own check names what it cannot take
    if client == "opencode":
        return _from_opencode(entry)
    if client == "vscode":
        return _from_vscode(entry)
    if client == "codex":
        return _from_codex(entry)
    return _from_gemini(entry)


def _from_opencode(entry: dict[str, Any]) -> tuple[Any, list[str]]:
    """{type: local, command: [argv], environment, cwd} or {type: remote, url, headers}; {env:VAR} becomes ${VAR}.
    `timeout` is how long OpenCode waits for the tool list, not for a call, so it is dropped, as are V2's
    `codemode` and `protocol`; disabled servers and {file:...} values stay."""
    if entry.get("enabled") is False or entry.get("disabled") is True:
        return entry, ["it is disabled in OpenCode; enable it there first if the agent should reach it"]
    text = json.dumps(entry)
    if found := sorted(set(_OPENCODE_FILE.findall(text))):
        return entry, [f"it reads files the gateway cannot: {', '.join(found)}"]
    entry = json.loads(_OPENCODE_ENV.sub(r"${\1}", text))
    dropped = ("type", "command", "environment", "enabled", "disabled", "timeout", "codemode", "protocol")
    rest = {k: v for k, v in entry.items() if k not in dropped}
    if entry.get("type") == "remote":
        return {"type": "http", **rest}, []  # url, headers; anything else stays in, for gateway.json's check to name
    command = entry.get("command")
    if not (isinstance(command, list) and command and all(isinstance(c, str) for c in command)):
        return entry, ["its command is not a list of strings"]
    moved = {"command": command[0], "args": command[1:], **rest}
    return {**moved, "env": entry["environment"]} if entry.get("environment") else moved, []


def _from_vscode(entry: dict[str, Any]) -> tuple[Any, list[str]]:
    """{type: stdio, command, args, env, cwd, envFile} or {type: http, url, headers}; sse and inputs stay."""
    kind = entry.get("type", "stdio" if "command" in entry else "http")
    if kind == "sse":
        return entry, ["it uses SSE, which the gateway does not speak; streamable HTTP or stdio can move"]
    text = json.dumps(entry)
    if found := sorted(set(_VSCODE_VARIABLE.findall(text))):
        return entry, [f"it uses VS Code variables the gateway cannot expand: {', '.join(found)}"]
    moved = json.loads(text.replace("${env:", "${"))
    moved.pop("type", None)
    return ({"type": "http", **moved} if kind in ("http", "streamable-http") else moved), []


def _from_gemini(entry: dict[str, Any]) -> tuple[Any, list[str]]:
    """{command, args, env, cwd, timeout (ms)} or {httpUrl, headers}; `url` is SSE there, and tool filters stay."""
    if "url" in entry:
        return entry, ["its url is an SSE endpoint in Gemini CLI, which the gateway does not speak"]
    if filters := [k for k in ("includeTools", "excludeTools") if k in entry]:
        return entry, [f"{' and '.join(filters)} has no equivalent in gateway.json"]
    moved = {k: v for k, v in entry.items() if k not in ("httpUrl", "timeout", "trust", "description")}
    if "httpUrl" in entry:
        moved = {"type": "http", "url": entry["httpUrl"], **moved}
    if isinstance(env := entry.get("env"), dict):  # Gemini CLI expands $VAR there too; the gateway only ${VAR}
        moved["env"] = {k: _GEMINI_BARE.sub(r"${\1}", v) if isinstance(v, str) else v for k, v in env.items()}
    if isinstance(timeout := entry.get("timeout"), int):
        moved["timeout"] = f"{timeout}ms"
    return moved, []


def _from_codex(entry: dict[str, Any]) -> tuple[Any, list[str]]:
    """{command, args, env, env_vars, cwd, tool_timeout_sec} or {url, bearer_token_env_var, http_headers,
    env_http_headers}; disabled servers, tool filters and OAuth settings stay."""
    if entry.get("enabled") is False:
        return entry, ["it is disabled in Codex; enable it there first if the agent should reach it"]
    if kept := [k for k in CODEX_KEPT if k in entry]:
        return entry, [f"{', '.join(kept)} has no equivalent in gateway.json"]
    names = entry.get("env_vars", [])
    if not (isinstance(names, list) and all(isinstance(n, str) for n in names)):
        return entry, ["its env_vars is not a list of variable names"]
    dropped = {"enabled", "required", "startup_timeout_sec", "startup_timeout_ms", "env_vars", "tool_timeout_sec"}
    moved = {k: v for k, v in entry.items() if k not in dropped | CODEX_HEADERS}
    if names:  # the gateway passes a server only the variables its entry names: these, from its own environment
        moved["env"] = {**{n: f"${{{n}}}" for n in names}, **entry.get("env", {})}
    if isinstance(seconds := entry.get("tool_timeout_sec"), int | float) and seconds > 0:
        moved["timeout"] = f"{int(seconds)}s" if float(seconds).is_integer() else f"{round(seconds * 1000)}ms"
    if "url" in entry:
        headers = dict(entry.get("http_headers") or {})
        headers |= {k: f"${{{v}}}" for k, v in (entry.get("env_http_headers") or {}).items()}
        if token := entry.get("bearer_token_env_var"):
            headers["Authorization"] = f"Bearer ${{{token}}}"
        moved = {"type": "http", **moved, **({"headers": headers} if headers else {})}
    return moved, []  # anything else stays in, for gateway.json's check to name


def _plan_gateway(path: Path, moved: dict[str, Any], force: bool, notes: list[str]) -> Planned:
    from ..gateway import edits as gateway_edits

    old = read_text(path)
    try:
        data, indent = gateway_edits.read(path)
    except gateway_edits.GatewayFileError as exc:
        raise ConfigError(str(exc)) from None
    table = data.setdefault("mcpServers", {})
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: mcpServers must be a JSON object; fix it by hand, nothing was changed")
    for server, entry in moved.items():
        if table.get(server) not in (None, entry) and not force:
            raise ConfigError(
                f"{path} already has a server {server!r} that differs from the one to move; rename one of them, or "
                "pass --force to replace gateway.json's. Nothing was changed."
            )
        table[server] = entry
    return Planned(path, old, gateway_edits.render(data, indent), notes)
